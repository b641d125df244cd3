"""Real etcd servers: one node, or three on loopback, as users of the process harness.

Rules this module keeps:

- Servers bind 127.0.0.1 only (or, given a node of a private network, that node's address inside
  its namespace), on free ports picked here, with data and logs under the directory
  given (one per server and run: etcd preallocates ~123 MB of WAL, so never one per test).
- Readiness is ``GET /health`` answering ``{"health": "true"}`` (the member has a leader).
- ``--heartbeat-interval 10 --election-timeout 100`` (one node) and 25/250 (three nodes, sturdier
  on a loaded 2-core machine) keep starts and elections fast; the lease minimum TTL is then 1 s.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ..network import NetNode
from ..process import ManagedServer, ServerGroup, ServerProcess, free_ports
from ._urls import QuorumUrls, ServerUrls

__all__ = ["ETCD", "EtcdCluster", "EtcdServer"]

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


class EtcdServer(ServerUrls, ManagedServer):
    scheme = "etcd"

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
        node: NetNode | None = None,
    ) -> None:
        self.name = name
        #: Where it runs: 127.0.0.1 here, or inside a private network's node (partition tests).
        self.node = node
        self.host = node.address if node is not None else "127.0.0.1"
        self.dir = base_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "etcd.log"
        if client_port is None or peer_port is None:
            client_port, peer_port = free_ports(2)
        self.client_port = client_port
        self.peer_port = peer_port
        self.initial_cluster = initial_cluster or f"{name}=http://{self.host}:{peer_port}"
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.process = ServerProcess(
            f"etcd {name}", self.command(), log_path=self.log_path, ready=lambda _: self.healthy(), cwd=self.dir,
            start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S,
        )  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------

    def command(self) -> list[str]:
        peer = f"http://{self.host}:{self.peer_port}"
        client = f"http://{self.host}:{self.client_port}"
        prefix = self.node.exec_prefix if self.node is not None else []
        return [
            *prefix, ETCD, "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
            "--initial-cluster-token", f"barnabas-{self.dir.parent.name}",
            "--heartbeat-interval", str(self.heartbeat_ms), "--election-timeout", str(self.election_ms),
            "--logger", "zap", "--log-outputs", "stderr",
        ]  # fmt: skip

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1.0) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

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


class EtcdCluster(ServerGroup[EtcdServer], QuorumUrls):
    scheme = "etcd"

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

    def member_urls(self) -> list[EtcdServer]:
        return self.members

    def leader(self, timeout_s: float = 10.0, among: Sequence[EtcdServer] | None = None) -> EtcdServer:
        """The member that is leader now, as every live member (or every one of ``among``: leave out a
        paused one, which would not answer) agrees; waits through an election."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                leaders = set()
                ids: dict[str, EtcdServer] = {}
                for member in self.members if among is None else among:
                    if member.running:
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
