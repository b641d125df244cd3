"""Real ZooKeeper servers for the coordination tests: one standalone node, or a three-node ensemble.

Rules this module keeps:

- Debian's ``zookeeper`` 3.8.0 jar is run with plain ``java`` (its manifest's ``Class-Path`` names
  its dependencies) plus ``slf4j-simple`` so the server logs to its log file instead of nowhere.
- Servers bind 127.0.0.1 only, on free ports picked here, with ``admin.enableServer=false`` (the
  AdminServer would take :8080) and a 4lw whitelist for the probes. Data and logs live under a
  pytest temp dir, one dir per server and run.
- ``tickTime=200`` and ``minSessionTimeout=400`` keep session expiry fast; the server clamps a
  requested session timeout into [400 ms, 20 ticks = 4 s] and expires in tick buckets.
- Readiness is the ``srvr`` four-letter word answering with a ``Mode:`` line (a quorum member
  without a quorum answers "not currently serving requests"), polled with a deadline over a plain
  socket (``nc -q1`` adds a second per try).
- Processes are started with Popen and stopped by pid: SIGTERM, SIGKILL if they linger, and always
  ``wait()`` before the port or data dir is reused.
- When a test using a server fails, the server's log tail is written to the terminal at teardown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "four_letter_word",
    "free_ports",
    "zookeeper_ensemble",
    "zookeeper_server",
]

JAVA = shutil.which("java") or "/usr/bin/java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
TICK_MS = 200
MIN_SESSION_TIMEOUT_MS = 400


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on right now (held open together so they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def four_letter_word(port: int, word: str = "srvr", timeout_s: float = 1.0) -> str:
    """Send a 4lw command to 127.0.0.1:port and return the whole reply ("" if unreachable)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One ZooKeeper process with its config, data dir and log; restartable on the same ports.

    Standalone by default (``ZooKeeperServerMain``); with ``myid`` and ``servers`` it is one member of
    an ensemble (``QuorumPeerMain``).
    """

    def __init__(
        self,
        base_dir: Path,
        name: str = "zk",
        *,
        client_port: int | None = None,
        myid: int | None = None,
        servers: dict[int, tuple[int, int]] | None = None,
        tick_ms: int = TICK_MS,
        min_session_timeout_ms: int = MIN_SESSION_TIMEOUT_MS,
    ) -> None:
        self.name = name
        self.dir = base_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf_dir = self.dir / "conf"
        self.conf_dir.mkdir(exist_ok=True)
        self.data_dir = self.dir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.dir / "zookeeper.log"
        self.client_port = client_port if client_port is not None else free_ports(1)[0]
        self.myid = myid
        self.servers = dict(servers or {})
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self._write_config()

    # -- addresses -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        """The backend URL for this server with the default chroot."""
        return f"zookeeper://{self.endpoint}/barnabas"

    def url_for(self, chroot: str | None = None) -> str:
        """A backend URL under a fresh (or the given) chroot, so tests sharing a server don't collide."""
        return f"zookeeper://{self.endpoint}/{chroot or 't-' + uuid.uuid4().hex[:12]}"

    @property
    def max_session_timeout_ms(self) -> int:
        return 20 * self.tick_ms

    # -- lifecycle -------------------------------------------------------------------------

    def _write_config(self) -> None:
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,stat,mntr,srvr,cons,conf",
            # Snapshots and log purges are irrelevant for tests; fsync stays on (default).
            "autopurge.purgeInterval=0",
        ]
        if self.myid is not None:
            lines += ["initLimit=25", "syncLimit=10"]  # ticks: 5 s and 2 s
            for sid, (peer, election) in sorted(self.servers.items()):
                lines.append(f"server.{sid}=127.0.0.1:{peer}:{election}")
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        (self.conf_dir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (self.conf_dir / "simplelogger.properties").write_text(
            "org.slf4j.simpleLogger.defaultLogLevel=info\n"
            "org.slf4j.simpleLogger.showDateTime=true\n"
            "org.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS\n"
        )

    def command(self) -> list[str]:
        quorum = self.myid is not None
        main = f"org.apache.zookeeper.server.{'quorum.QuorumPeerMain' if quorum else 'ZooKeeperServerMain'}"
        classpath = [str(self.conf_dir), str(ZOOKEEPER_JAR)]
        if SLF4J_BINDING.exists():
            classpath.append(str(SLF4J_BINDING))
        return [
            JAVA,
            "-Xms64m",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            ":".join(classpath),
            main,
            str(self.conf_dir / "zoo.cfg"),
        ]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.alive, f"{self.name} is already running"
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir
            )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Start and wait until it serves clients."""
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` from ``srvr``; None if not serving."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Poll ``srvr`` until it reports a mode; on timeout or exit, kill and fail with the log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc else None
                raise RuntimeError(f"zookeeper {self.name} exited with {code}\n{self.log_tail()}")
            if self.mode() is not None:
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"zookeeper {self.name} not serving after {timeout_s} s\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL if it lingers. The port and data dir are free afterwards."""
        self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and wait (a crash: no clean shutdown)."""
        self._signal_and_wait(signal.SIGKILL)

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Stop if running, then start again on the same ports and data dir (sessions survive)."""
        if self.alive:
            self.stop()
        return self.start(timeout_s)

    def pause(self) -> None:
        """SIGSTOP the server: clients time out, but no session expires while it is frozen."""
        if self.alive and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def _signal_and_wait(self, sig: signal.Signals) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def session_timeouts_ms(self) -> dict[int, int]:
        """Negotiated timeout of every client session connected here, from ``cons`` (sid -> ms)."""
        result: dict[int, int] = {}
        for line in four_letter_word(self.client_port, "cons").splitlines():
            if "sid=" not in line or "to=" not in line:
                continue
            inside = line.strip().split("(", 1)[-1].rstrip(")")
            fields = dict(part.split("=", 1) for part in inside.split(",") if "=" in part)
            with contextlib.suppress(KeyError, ValueError):
                result[int(fields["sid"], 16)] = int(fields["to"])
        return result

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"---- {self.log_path} (last {lines} lines) ----\n" + "\n".join(text[-lines:])


class ZooKeeperEnsemble:
    """Three (or ``size``) ``QuorumPeerMain`` members on loopback; members can be killed and restarted."""

    def __init__(self, base_dir: Path, size: int = 3) -> None:
        ports = free_ports(3 * size)
        servers = {i + 1: (ports[3 * i + 1], ports[3 * i + 2]) for i in range(size)}
        self.members = [
            ZooKeeperServer(base_dir, f"m{i + 1}", client_port=ports[3 * i], myid=i + 1, servers=servers)
            for i in range(size)
        ]

    @property
    def endpoints(self) -> str:
        return ",".join(member.endpoint for member in self.members)

    @property
    def url(self) -> str:
        return f"zookeeper://{self.endpoints}/barnabas"

    def url_for(self, chroot: str | None = None) -> str:
        return f"zookeeper://{self.endpoints}/{chroot or 't-' + uuid.uuid4().hex[:12]}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ZooKeeperEnsemble:
        """Spawn every member (they need each other for a quorum), then wait until each serves."""
        for member in self.members:
            member.spawn()
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

    def kill(self, member: ZooKeeperServer) -> None:
        member.kill()

    def restart(self, member: ZooKeeperServer, timeout_s: float = START_TIMEOUT_S) -> None:
        member.restart(timeout_s)

    def leader(self, timeout_s: float = 20.0) -> ZooKeeperServer:
        """The member whose ``srvr`` says ``Mode: leader`` (waits through an election)."""
        deadline = time.monotonic() + timeout_s
        while True:
            leaders = [member for member in self.members if member.alive and member.mode() == "leader"]
            if len(leaders) == 1:
                return leaders[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"no single leader after {timeout_s} s\n{self.log_tails()}")
            time.sleep(0.05)

    def wait_serving(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every live member serves (a leader and its followers after an election)."""
        for member in self.members:
            if member.alive:
                member.wait_ready(timeout_s)

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(member.log_tail(lines) for member in self.members)


def _require_zookeeper() -> None:
    if not ZOOKEEPER_JAR.exists() or not os.access(JAVA, os.X_OK):
        pytest.skip("ZooKeeper is not installed (apt-get install zookeeper)")


def _report_logs_on_failure(request: pytest.FixtureRequest, failed_before: int, logs: str) -> None:
    """Write the server logs to the terminal if a test failed while this server was in use."""
    if request.session.testsfailed > failed_before:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\n{logs}")


@pytest.fixture(scope="session")
def zookeeper_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper for the whole run; tests isolate themselves with ``url_for()`` chroots."""
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper-server")).start()
    failed_before = request.session.testsfailed
    yield server
    server.stop()
    _report_logs_on_failure(request, failed_before, server.log_tail())


@pytest.fixture
def zookeeper_ensemble(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperEnsemble]:
    """A fresh three-member ensemble for one test (it may kill and restart members)."""
    _require_zookeeper()
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zookeeper-ensemble")).start()
    failed_before = request.session.testsfailed
    yield ensemble
    ensemble.stop()
    _report_logs_on_failure(request, failed_before, ensemble.log_tails())
