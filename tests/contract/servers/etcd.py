"""Real etcd servers for the coordination tests: one node, or three on loopback.

Rules this module keeps:

- Servers bind 127.0.0.1 only, on free ports picked here, with data and logs under a pytest temp
  dir (one dir per server and run: etcd preallocates ~123 MB of WAL, so never one per test).
- Processes are started with Popen and stopped by pid: SIGTERM, then SIGKILL if they linger, and
  always ``wait()`` before a port or data dir is reused ("member ... has already been bootstrapped",
  "address already in use" otherwise).
- Readiness is ``GET /health`` answering ``{"health": "true"}`` (the member has a leader), polled
  with a deadline, never a fixed sleep.
- ``--heartbeat-interval 10 --election-timeout 100`` (one node) and 25/250 (three nodes, sturdier
  on a loaded 2-core machine) keep starts and elections fast; the lease minimum TTL is then 1 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["EtcdCluster", "EtcdServer", "etcd_cluster", "etcd_server", "free_ports", "start_server"]

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


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


class EtcdServer:
    """One etcd member process with its data dir and log; restartable on the same ports."""

    def __init__(
        self,
        base_dir: Path,
        name: str = "n1",
        *,
        client_port: int | None = None,
        peer_port: int | None = None,
        initial_cluster: str | None = None,
        heartbeat_ms: int = 10,
        election_ms: int = 100,
    ) -> None:
        self.name = name
        self.dir = base_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "etcd.log"
        if client_port is None or peer_port is None:
            client_port, peer_port = free_ports(2)
        self.client_port = client_port
        self.peer_port = peer_port
        self.initial_cluster = initial_cluster or f"{name}=http://127.0.0.1:{peer_port}"
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.proc: subprocess.Popen[bytes] | None = None

    # -- addresses -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        """The backend URL for this server with the default prefix."""
        return f"etcd://{self.endpoint}/barnabas"

    def url_for(self, prefix: str | None = None) -> str:
        """A backend URL under a fresh (or the given) prefix, so tests sharing a server don't collide."""
        return f"etcd://{self.endpoint}/{prefix or 't-' + uuid.uuid4().hex[:12]}"

    # -- lifecycle -------------------------------------------------------------------------

    def command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://127.0.0.1:{self.client_port}"
        return [
            ETCD,
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            self.initial_cluster,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            f"barnabas-{self.dir.parent.name}",
            "--heartbeat-interval",
            str(self.heartbeat_ms),
            "--election-timeout",
            str(self.election_ms),
            "--logger",
            "zap",
            "--log-outputs",
            "stderr",
        ]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the process without waiting for it to be healthy."""
        assert not self.alive, f"{self.name} is already running"
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir
            )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> EtcdServer:
        """Start and wait until healthy."""
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1.0) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Poll /health until it answers true; on timeout or exit, kill and fail with the log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(
                    f"etcd {self.name} exited with {self.proc and self.proc.returncode}\n{self.log_tail()}"
                )
            if self.healthy():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"etcd {self.name} not healthy after {timeout_s} s\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL if it lingers. Ports and data dir are free afterwards."""
        self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and wait (a crash: no leadership hand-over, no clean close)."""
        self._signal_and_wait(signal.SIGKILL)

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> EtcdServer:
        """Stop if running, then start again on the same ports and data dir."""
        if self.alive:
            self.stop()
        return self.start(timeout_s)

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

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"---- {self.log_path} (last {lines} lines) ----\n" + "\n".join(text[-lines:])

    # -- maintenance API (HTTP gateway, independent of the backend under test) --------------

    def call(self, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        """POST to the member's JSON gateway (``/v3/...``); int64 fields come back as strings."""
        request = urllib.request.Request(
            f"http://{self.endpoint}{path}",
            data=json.dumps(body or {}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5.0) as response:
            answer: dict[str, object] = json.loads(response.read())
            return answer

    def status(self) -> dict[str, object]:
        """The member's Maintenance.Status."""
        return self.call("/v3/maintenance/status")

    def revision(self) -> int:
        header = self.status()["header"]
        assert isinstance(header, dict)
        return int(header["revision"])

    def member_id(self) -> str:
        header = self.status()["header"]
        assert isinstance(header, dict)
        return str(header["member_id"])

    def compact(self) -> int:
        """Compact the history up to the current revision (watches from before it get Resync)."""
        revision = self.revision()
        self.call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def revoke_lease(self, lease_id: int | str) -> None:
        """Revoke a lease behind its owner's back (its keys go; its keepalives learn it is gone)."""
        self.call("/v3/lease/revoke", {"ID": str(lease_id)})


class EtcdCluster:
    """Three (or ``size``) members on loopback, started together; members can be killed and restarted."""

    def __init__(self, base_dir: Path, size: int = 3, *, heartbeat_ms: int = 25, election_ms: int = 250) -> None:
        ports = free_ports(2 * size)
        names = [f"m{i + 1}" for i in range(size)]
        initial = ",".join(f"{name}=http://127.0.0.1:{ports[2 * i + 1]}" for i, name in enumerate(names))
        self.members = [
            EtcdServer(
                base_dir,
                name,
                client_port=ports[2 * i],
                peer_port=ports[2 * i + 1],
                initial_cluster=initial,
                heartbeat_ms=heartbeat_ms,
                election_ms=election_ms,
            )
            for i, name in enumerate(names)
        ]

    @property
    def endpoints(self) -> str:
        return ",".join(member.endpoint for member in self.members)

    @property
    def url(self) -> str:
        return f"etcd://{self.endpoints}/barnabas"

    def url_for(self, prefix: str | None = None) -> str:
        return f"etcd://{self.endpoints}/{prefix or 't-' + uuid.uuid4().hex[:12]}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> EtcdCluster:
        """Spawn every member (they need each other for a quorum), then wait for each to be healthy."""
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

    def kill(self, member: EtcdServer) -> None:
        member.kill()

    def restart(self, member: EtcdServer, timeout_s: float = START_TIMEOUT_S) -> None:
        member.restart(timeout_s)

    def leader(self, timeout_s: float = 10.0) -> EtcdServer:
        """The member that is leader now, as every live member agrees (waits through an election)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                leaders = set()
                ids: dict[str, EtcdServer] = {}
                for member in self.members:
                    if member.alive:
                        status = member.status()
                        leaders.add(str(status.get("leader", "0")))
                        header = status["header"]
                        assert isinstance(header, dict)
                        ids[str(header["member_id"])] = member
                if len(leaders) == 1 and (leader := leaders.pop()) in ids:
                    return ids[leader]
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no agreed leader after {timeout_s} s\n{self.log_tails()}")
            time.sleep(0.05)

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(member.log_tail(lines) for member in self.members)


def _require_etcd() -> None:
    if not os.access(ETCD, os.X_OK):
        pytest.skip("etcd is not installed (apt-get install etcd-server)")


def _bind_race(logs: str) -> bool:
    """The ports picked were taken by someone else before etcd bound them."""
    return "address already in use" in logs


def start_server(tmp_path_factory: pytest.TempPathFactory, name: str = "etcd-server") -> EtcdServer:
    """A running single node in a new temp dir (new ports if the picked ones were taken meanwhile)."""
    _require_etcd()
    for attempt in range(3):
        server = EtcdServer(tmp_path_factory.mktemp(name))
        try:
            return server.start()
        except RuntimeError:
            if attempt == 2 or not _bind_race(server.log_tail(200)):
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """One etcd node for the whole run; tests isolate themselves with ``url_for()`` prefixes."""
    server = start_server(tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """Three etcd members on loopback for one test module (its tests may kill and restart members)."""
    _require_etcd()
    for attempt in range(3):
        cluster = EtcdCluster(tmp_path_factory.mktemp("etcd-cluster"))
        try:
            cluster.start()
            break
        except RuntimeError:
            if attempt == 2 or not _bind_race(cluster.log_tails(200)):
                raise
    yield cluster
    cluster.stop()
