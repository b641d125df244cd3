"""Real ZooKeeper servers: one standalone node, or a three-node ensemble, as users of the process harness.

Rules this module keeps:

- Debian's ``zookeeper`` 3.8.0 jar is run with plain ``java`` (its manifest's ``Class-Path`` names
  its dependencies) plus ``slf4j-simple`` so the server logs to its log file instead of nowhere.
- Servers bind 127.0.0.1 only (or, given a node of a private network, that node's address inside
  its namespace), on free ports picked here, with ``admin.enableServer=false`` (the
  AdminServer would take :8080) and a 4lw whitelist for the probes. Data and logs live under the
  directory given, one dir per server and run.
- ``tickTime=200`` and ``minSessionTimeout=400`` keep session expiry fast; the server clamps a
  requested session timeout into [400 ms, 20 ticks = 4 s] and expires in tick buckets.
- Readiness is the ``srvr`` four-letter word answering with a ``Mode:`` line (a quorum member
  without a quorum answers "not currently serving requests"), over a plain socket.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from ..network import NetNode
from ..process import ManagedServer, ServerGroup, ServerProcess, free_ports
from ._urls import QuorumUrls, ServerUrls

__all__ = ["JAVA", "ZOOKEEPER_JAR", "ZooKeeperEnsemble", "ZooKeeperServer", "four_letter_word"]

JAVA = shutil.which("java") or "/usr/bin/java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
TICK_MS = 200
MIN_SESSION_TIMEOUT_MS = 400


def four_letter_word(port: int, word: str = "srvr", timeout_s: float = 1.0, host: str = "127.0.0.1") -> str:
    """Send a 4lw command to host:port and return the whole reply ("" if unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer(ServerUrls, ManagedServer):
    scheme = "zookeeper"

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
        node: NetNode | None = None,
    ) -> None:
        self.name = name
        #: Where it runs: 127.0.0.1 here, or inside a private network's node (partition tests; standalone only).
        self.node = node
        self.host = node.address if node is not None else "127.0.0.1"
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
        self._write_config()
        self.process = ServerProcess(
            f"zookeeper {name}", self.command(), log_path=self.log_path, ready=lambda _: self.mode() is not None,
            cwd=self.dir, start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S,
        )  # fmt: skip

    # -- addresses -------------------------------------------------------------------------

    @property
    def max_session_timeout_ms(self) -> int:
        return 20 * self.tick_ms

    # -- lifecycle -------------------------------------------------------------------------

    def _write_config(self) -> None:
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            f"clientPortAddress={self.host}",
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
            *(self.node.exec_prefix if self.node is not None else []),
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

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` from ``srvr``; None if not serving."""
        for line in four_letter_word(self.client_port, "srvr", host=self.host).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def pause(self) -> None:
        """SIGSTOP the server: clients time out, but no session expires while it is frozen."""
        if self.running:
            self.process.pause()

    def session_timeouts_ms(self) -> dict[int, int]:
        """Negotiated timeout of every client session connected here, from ``cons`` (sid -> ms)."""
        result: dict[int, int] = {}
        for line in four_letter_word(self.client_port, "cons", host=self.host).splitlines():
            if "sid=" not in line or "to=" not in line:
                continue
            inside = line.strip().split("(", 1)[-1].rstrip(")")
            fields = dict(part.split("=", 1) for part in inside.split(",") if "=" in part)
            with contextlib.suppress(KeyError, ValueError):
                result[int(fields["sid"], 16)] = int(fields["to"])
        return result


class ZooKeeperEnsemble(ServerGroup[ZooKeeperServer], QuorumUrls):
    scheme = "zookeeper"

    """Three (or ``size``) ``QuorumPeerMain`` members on loopback; members can be killed and restarted."""

    def __init__(self, base_dir: Path, size: int = 3) -> None:
        ports = free_ports(3 * size)
        servers = {i + 1: (ports[3 * i + 1], ports[3 * i + 2]) for i in range(size)}
        self.members = [
            ZooKeeperServer(base_dir, f"m{i + 1}", client_port=ports[3 * i], myid=i + 1, servers=servers)
            for i in range(size)
        ]

    def member_urls(self) -> list[ZooKeeperServer]:
        return self.members

    def leader(self, timeout_s: float = 20.0, among: Sequence[ZooKeeperServer] | None = None) -> ZooKeeperServer:
        """The member (of ``among``, default all: leave out a paused one) whose ``srvr`` says ``Mode: leader``;
        waits through an election."""
        deadline = time.monotonic() + timeout_s
        while True:
            asked = self.members if among is None else among
            leaders = [member for member in asked if member.running and member.mode() == "leader"]
            if len(leaders) == 1:
                return leaders[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"no single leader after {timeout_s} s\n{self.log_tails()}")
            time.sleep(0.05)

    def wait_serving(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every live member serves (a leader and its followers after an election)."""
        for member in self.members:
            if member.running:
                member.wait_ready(timeout_s)
