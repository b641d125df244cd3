"""Real PostgreSQL 15 servers for the coordination tests.

Rules this module keeps:

- ``initdb`` runs once per test run (0.7–1.1 s) into a template; each server copies it (start alone
  ~0.15 s). initdb and postgres refuse to run as root, so under root both run as the Debian
  ``postgres`` user (``Popen(user=...)``, no ``runuser``/``pg_ctl`` in between, so the pid we hold
  is the postmaster's) in a temp dir that user owns. pytest's own temp dirs are ``0700 root`` and
  unreachable for it, hence ``tempfile.mkdtemp`` here; the dir is removed at the end unless a test
  failed, and its logs are printed on failure.
- Servers bind 127.0.0.1 only, on a free port picked here; the unix socket lives in the server dir.
- Processes are signalled by pid. ``stop()`` sends SIGINT to the postmaster ("fast" shutdown:
  SIGTERM would be "smart" and wait for our clients to disconnect, which they never do), then
  SIGKILL on timeout. Backends call ``setsid()``, so no process group reaches them: ``kill()`` and
  ``pause()`` signal the postmaster (first SIGSTOP, so it forks nothing meanwhile) and each of its
  children found in /proc, and ``kill()`` waits for them all (orphaned backends would keep the
  shared memory and block a restart). Always waited for before the port or data dir is reused.
- Readiness: a real connection succeeds (``SELECT 1``), polled with a deadline.
- ``fsync=off``: test data need not survive a host crash, and the 2-core CI box is slow at fsync.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

__all__ = ["PostgresInstall", "PostgresServer", "postgres_install", "postgres_server"]

PG_BIN = Path(os.environ.get("BARNABAS_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresInstall:
    """A temp dir owned by the server's user, holding one initdb template and any number of servers."""

    def __init__(self) -> None:
        if not (PG_BIN / "postgres").exists():
            raise FileNotFoundError(f"no PostgreSQL at {PG_BIN} (apt-get install postgresql-15)")
        # Under root, run as the Debian "postgres" user (initdb refuses root).
        self.user: str | None = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                raise FileNotFoundError("running as root, and there is no 'postgres' user to run initdb as") from None
        self.base = Path(tempfile.mkdtemp(prefix="barnabas-pg-"))
        if self.user is not None:
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self.template = self.base / "template"
        self.servers: list[PostgresServer] = []
        self.initdb_s = 0.0

    def run(self, args: list[str], log: Path) -> None:
        """Run a PostgreSQL tool as the server's user; fail with its output."""
        with open(log, "ab") as out:
            result = subprocess.run(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, user=self.user, check=False
            )
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({result.returncode}):\n{log.read_text(errors='replace')}")

    def initdb(self) -> PostgresInstall:
        started = time.monotonic()
        self.run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(self.template),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            self.base / "initdb.log",
        )
        self.initdb_s = time.monotonic() - started
        return self

    def server(self, name: str | None = None) -> PostgresServer:
        """A new server (not started) with its own copy of the template."""
        name = name or f"s{len(self.servers) + 1}"
        server = PostgresServer(self, name)
        self.servers.append(server)
        return server

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(server.log_tail(lines) for server in self.servers)

    def cleanup(self, keep: bool) -> None:
        for server in self.servers:
            server.stop()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


class PostgresServer:
    """One postmaster with its data dir and log; restartable on the same port."""

    def __init__(self, install: PostgresInstall, name: str, *, durable: bool = False) -> None:
        self.install = install
        self.name = name
        #: fsync on, as in production (the benchmark compares durable backends); tests turn it off.
        self.durable = durable
        self.dir = install.base / name
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "server.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir.mkdir()
        if install.user is not None:
            entry = pwd.getpwnam(install.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        install.run(["cp", "-a", str(install.template), str(self.data_dir)], self.log_path)

    @property
    def url(self) -> str:
        """The backend URL with the default schema."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, schema: str | None = None) -> str:
        """A backend URL with a fresh (or the given) schema, so tests sharing a server don't collide."""
        return f"{self.url}?schema={schema or 't_' + uuid.uuid4().hex[:12]}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        return [
            str(PG_BIN / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-k",
            str(self.dir),
            "-c",
            "listen_addresses=127.0.0.1",
            *(() if self.durable else ("-c", "fsync=off", "-c", "full_page_writes=off")),
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=32MB",
            # Server-side detection of dead clients (coordination.md §5 pitfalls).
            "-c",
            "tcp_keepalives_idle=5",
            "-c",
            "tcp_keepalives_interval=2",
            "-c",
            "tcp_keepalives_count=3",
        ]

    def spawn(self) -> None:
        assert not self.alive, f"postgres {self.name} is already running"
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                user=self.install.user,
                start_new_session=True,  # own process group: kill() reaches the backends too
            )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> PostgresServer:
        """Start and wait until a connection succeeds."""
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def ready(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc else None
                raise RuntimeError(f"postgres {self.name} exited with {code}\n{self.log_tail()}")
            if self.ready():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"postgres {self.name} not ready after {timeout_s} s\n{self.log_tail()}")

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected) and wait; SIGKILL everything if it lingers."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self._signal_all(signal.SIGCONT)  # a paused server cannot act on the signal
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (a crash; recovery runs on the next start)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGSTOP)  # no new backends while we collect them
        children = self._children()
        for pid in [proc.pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        self._wait_gone(children)

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> PostgresServer:
        """Stop if running, then start again on the same port and data dir."""
        self.stop()
        return self.start(timeout_s)

    def pause(self) -> None:
        """SIGSTOP the postmaster and every backend: connections hang instead of failing."""
        assert self.alive
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)  # first, so it forks no backend we would miss
        for pid in self._children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_all(signal.SIGCONT)

    def _signal_all(self, sig: signal.Signals) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in [*self._children(), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _children(self) -> list[int]:
        """The postmaster's children (backends call setsid(), so a process group does not reach them)."""
        assert self.proc is not None
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
            if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                found.append(int(entry.name))
        return found

    def _wait_gone(self, pids: list[int]) -> None:
        """Killed backends linger for a moment; a restart needs them gone (they hold shared memory)."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    break
                if state in ("Z", "X"):
                    break
                time.sleep(0.01)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"---- {self.log_path} (last {lines} lines) ----\n" + "\n".join(text[-lines:])


def _print_logs_on_failure(request: pytest.FixtureRequest, install: PostgresInstall) -> bool:
    """Print the servers' logs if any test failed; return whether one did (then the dir is kept)."""
    failed = bool(request.session.testsfailed)
    if failed:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        context = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
        with context:
            print(f"\nPostgreSQL test servers kept in {install.base}\n{install.log_tails()}", file=sys.stderr)
    return failed


@pytest.fixture(scope="session")
def postgres_install(request: pytest.FixtureRequest) -> Iterator[PostgresInstall]:
    """initdb once per run; tests that restart or kill a server make their own with ``.server()``."""
    try:
        install = PostgresInstall().initdb()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        yield install
    finally:
        install.cleanup(keep=_print_logs_on_failure(request, install))


@pytest.fixture(scope="session")
def postgres_server(postgres_install: PostgresInstall) -> Iterator[PostgresServer]:
    """One server for the whole run; tests isolate themselves with ``url_for()`` schemas."""
    server = postgres_install.server("shared").start()
    yield server
    server.stop()
