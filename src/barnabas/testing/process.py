"""One server process, run for a test or a local cluster: started, waited for, stopped, killed, paused.

Every server the tests, the benchmarks, the pytest plugin and ``barnabas cluster up`` run (a broker,
etcd, ZooKeeper, PostgreSQL, Cassandra) is a ServerProcess with its own command and readiness check,
so starting, waiting, stopping and reading the log are written once.

Rules it keeps:

- Output goes to a log file, never a pipe: a server outlives a reader that stopped reading (or a
  parent that exited, for a detached cluster), and its log can be read after it is gone.
- Ready means the ``ready`` check said so (a port file written, a line logged, a port open);
  a process that exits while starting is an error carrying its log's last lines.
- Processes are signalled by pid, never by name; a stop is SIGTERM and then, after the timeout,
  SIGKILL; every process started is reaped.
- A process started by an earlier command (a detached cluster's broker) can be adopted by its pid
  and is then stopped the same way; it counts as running only while its command line still has the
  marks it was adopted with, so a pid the kernel reused for another program is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Generic, Self, TypeVar

__all__ = [
    "AdoptedProcess",
    "ManagedServer",
    "ServerGroup",
    "ServerProcess",
    "ServerStartError",
    "free_ports",
    "line_logged",
    "port_file_written",
    "port_open",
    "process_table",
]

POLL_S = 0.01
TAIL_BYTES = 64 * 1024


class ServerStartError(RuntimeError):
    """A server exited, or did not become ready in time, while starting."""


class AdoptedProcess:
    """A running process that this one did not start, known by its pid: the part of ``Popen`` ServerProcess uses.

    It runs while /proc has it, not a zombie, with every one of ``marks`` among its arguments; once
    seen gone it stays gone. Not being this process's child, its exit code cannot be known: it is given as 0.
    """

    def __init__(self, pid: int, marks: Sequence[str]) -> None:
        self.pid = pid
        self.marks = list(marks)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            args = _command_line(self.pid)
            if args is None or not all(mark in args for mark in self.marks):
                self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait until it is gone.

        Raises:
            subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.marks, timeout or 0.0)
            time.sleep(POLL_S)
        return code

    def send_signal(self, signum: int) -> None:
        """Signal it if it still runs (a reused pid is left alone)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ServerProcess:
    """A server process whose output is appended to ``log_path``."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        log_path: Path,
        ready: Callable[[ServerProcess], bool],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
        new_session: bool = False,
        user: str | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self.ready = ready
        self.env = dict(env or {})
        self.cwd = cwd
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.new_session = new_session
        #: Run as this user (a server that refuses root, such as PostgreSQL, under root).
        self.user = user
        #: What a clean stop sends (PostgreSQL's fast shutdown is SIGINT; SIGTERM waits for clients).
        self.stop_signal = stop_signal
        self.proc: subprocess.Popen[bytes] | AdoptedProcess | None = None
        #: Where this run's output starts in the log file.
        self.run_offset = 0

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> ServerProcess:
        """Launch the process and wait until it is ready."""
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> None:
        """Launch the process without waiting (``wait_ready`` waits): several can start at once."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.run_offset = log.tell()
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env}, cwd=self.cwd, start_new_session=self.new_session, user=self.user,
            )  # fmt: skip

    def adopt(self, pid: int, marks: Sequence[str]) -> bool:
        """Take over a process an earlier command started, by pid; whether it runs (with ``marks`` in its arguments).

        Stopping, killing and pausing then work as on a process started here; its output is
        wherever that command sent it.
        """
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.proc = AdoptedProcess(pid, marks)
        return self.running

    def wait_ready(self, deadline: float | None = None) -> None:
        """Wait until ``ready`` holds, by ``deadline`` (monotonic) or the start timeout.

        Raises:
            ServerStartError: the process exited first, or the time ran out (it is then killed).
        """
        if deadline is None:
            deadline = time.monotonic() + self.start_timeout_s
        while not self.poll_ready():
            if time.monotonic() >= deadline:
                self.kill()
                raise ServerStartError(f"{self.name} was not ready in time:\n{self.tail()}")
            time.sleep(POLL_S)

    def poll_ready(self) -> bool:
        """Whether ``ready`` holds now, without waiting (``wait_ready`` waits): several can be watched at once.

        Raises:
            ServerStartError: the process has exited (or was never launched).
        """
        if self.ready(self):
            return True
        code = self.proc.poll() if self.proc is not None else -1
        if code is not None:
            raise ServerStartError(f"{self.name} exited with code {code} while starting:\n{self.tail()}")
        return False

    def stop(self, timeout_s: float | None = None) -> int:
        """The stop signal (SIGTERM), then ``kill()`` if it has not exited in time; the exit code (0 if never run)."""
        if self.proc is None:
            return 0
        self.terminate()
        code = self.wait_exit(self.stop_timeout_s if timeout_s is None else timeout_s)
        if code is None:
            self.kill()
            code = self.proc.wait()
        return code

    def terminate(self) -> None:
        """The stop signal, without waiting (``wait_exit`` waits): several can stop at once."""
        if self.running:
            assert self.proc is not None
            self.resume()  # a paused process cannot act on the signal
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(self.stop_signal)

    def wait_exit(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the process to exit (reaping it); its exit code, or None if it still runs."""
        if self.proc is None:
            return 0
        try:
            return self.proc.wait(max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and files and does nothing until resumed."""
        if not self.running:
            raise RuntimeError(f"{self.name} is not running")
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT (harmless when not paused)."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> ServerProcess:
        self.stop()
        return self.start()

    # --- state -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def exit_code(self) -> int | None:
        """The exit code once the process has exited; None while it runs or before it was launched."""
        return self.proc.poll() if self.proc is not None else None

    def log_text(self, *, this_run: bool = False) -> str:
        """The log's text (every run's, or only the current run's)."""
        try:
            with self.log_path.open("rb") as log:
                if this_run:
                    log.seek(self.run_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 40, *, this_run: bool = False) -> str:
        """The last ``lines`` lines of the log (every run's, or only the current run's)."""
        start = self.run_offset if this_run else 0
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(start, self.log_path.stat().st_size - TAIL_BYTES))
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ManagedServer:
    """What every server object built on one ServerProcess (``self.process``) offers: start, stop, crash, hang.

    Subclasses set ``process`` and add what is particular to their server (addresses, probes, admin calls).
    """

    process: ServerProcess

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def launch(self) -> None:
        """Start the process without waiting (members of a quorum need each other to become ready)."""
        self.process.launch()

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until ready (the process is killed, and its log is in the error, if it is not in time)."""
        self.process.wait_ready(None if timeout_s is None else time.monotonic() + timeout_s)

    def poll_ready(self) -> bool:
        """Whether it is ready now, without waiting.

        Raises:
            ServerStartError: it has exited.
        """
        return self.process.poll_ready()

    def start(self, timeout_s: float | None = None) -> Self:
        """Start and wait until ready."""
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def stop(self, timeout_s: float | None = None) -> int:
        """A clean stop (then SIGKILL if it lingers); the exit code. Ports and files are free afterwards."""
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        """SIGKILL and reap: a crash."""
        self.process.kill()

    def pause(self) -> None:
        """SIGSTOP: it holds its connections and answers nothing until ``resume``."""
        self.process.pause()

    def resume(self) -> None:
        self.process.resume()

    def restart(self, timeout_s: float | None = None) -> Self:
        """Stop if running, then start again on the same ports and data."""
        self.process.stop()
        return self.start(timeout_s)

    def log_tail(self, lines: int = 60) -> str:
        return f"---- {self.process.log_path} (last {lines} lines) ----\n" + self.process.tail(lines)


Member = TypeVar("Member", bound=ManagedServer)


class ServerGroup(Generic[Member]):
    """Members of one quorum (an etcd cluster, a ZooKeeper ensemble): started together, faults per member."""

    members: list[Member]

    def start(self, timeout_s: float | None = None) -> Self:
        """Launch every member (they need each other for a quorum), then wait for each; all stop on failure."""
        for member in self.members:
            member.launch()
        try:
            for member in self.members:
                member.wait_ready(timeout_s)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def kill(self, member: Member) -> None:
        member.kill()

    def restart(self, member: Member, timeout_s: float | None = None) -> None:
        member.restart(timeout_s)

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(member.log_tail(lines) for member in self.members)


def _command_line(pid: int) -> list[str] | None:
    """The arguments of a live process (not a zombie), or None if no process has this pid."""
    if pid <= 0:
        return None
    entry = Path("/proc") / str(pid)
    try:
        state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (entry / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return None
    if state in ("Z", "X"):  # exited, waiting for its parent to reap it
        return None
    return [arg.decode(errors="replace") for arg in argv]


def process_table() -> Iterator[tuple[int, str, int, int]]:
    """(pid, state, parent pid, process group) of every process in /proc now (those that vanish are skipped)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        state, ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        yield int(entry.name), state, int(ppid), int(pgrp)


# --- readiness checks ----------------------------------------------------------------------------


def port_file_written(path: Path) -> Callable[[ServerProcess], bool]:
    """Ready once ``path`` holds a port (the server writes it whole, by a rename)."""

    def ready(_: ServerProcess) -> bool:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int(path.read_text().strip()) > 0
        return False

    return ready


def admin_port_of(path: Path, process: ServerProcess, name: str) -> int:
    """The admin endpoint port ``process`` wrote to ``path`` in this run.

    Raises:
        RuntimeError: none is written (not started yet, or no ``admin.listeners``).
    """
    if not port_file_written(path)(process):
        raise RuntimeError(f"{name} has no admin endpoint (is admin.listeners set?)")
    return int(path.read_text().strip())


def line_logged(pattern: str | re.Pattern[str]) -> Callable[[ServerProcess], bool]:
    """Ready once this run's log has a line matching ``pattern``."""
    compiled = re.compile(pattern)
    return lambda server: compiled.search(server.log_text(this_run=True)) is not None


def port_open(host: str, port: int) -> Callable[[ServerProcess], bool]:
    """Ready once ``host:port`` accepts a TCP connection."""

    def ready(_: ServerProcess) -> bool:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            return False

    return ready


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports nothing listens on right now (held open together, then closed).

    A server that must be told its port in advance gets one of these; another process can take it
    before the server binds, so callers retry a start that failed with "address already in use".
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
