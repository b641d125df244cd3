"""A real `barnabas proxy` process for tests, and a set of proxy nodes in front of one cluster.

Proxy nodes must know each other's addresses before any starts (they are each other's
``--peers``), so a :class:`ProxySet` picks every node's port first; each node is ready once it
has written its port file, which it does when it serves.

A node started with ``hot_restart=True`` serves hot restarts on a socket in its directory, and
``ProxyNode.hot_restart`` replaces its process with a new one that takes the listening sockets over.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .process import ManagedServer, ServerProcess, ServerStartError, admin_port_of, free_ports, port_file_written

__all__ = ["ProxyNode", "ProxySet"]


class ProxyNode(ManagedServer):
    """One proxy node: ``barnabas proxy`` on 127.0.0.1:``port`` in front of ``bootstrap``.

    Args:
        directory: where its log, port file and properties file go (proxy-PORT.log, ...).
        bootstrap: the cluster's bootstrap servers (HOST:PORT,...).
        port: the port to listen on (and advertise).
        peers: every proxy node's HOST:PORT[@RACK], this one included.
        rack: ``broker.rack`` of this node.
        properties: more proxy settings by their names.
        hot_restart: serve hot restarts (``proxy.hot.restart.socket`` in ``directory``), for :meth:`hot_restart`.
    """

    def __init__(
        self,
        directory: Path,
        bootstrap: str,
        port: int,
        *,
        peers: Sequence[str] = (),
        rack: str | None = None,
        properties: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        start_timeout_s: float = 60.0,
        hot_restart: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.bootstrap_servers = bootstrap
        self.host = host
        self.port = port
        self.peers = list(peers)
        self.rack = rack
        self.properties = dict(properties or {})
        files = self.directory / f"proxy-{port}"
        self.port_file = files.with_suffix(".port")
        #: Where the node writes its admin endpoint's port (``admin.listeners``), before its Kafka port.
        self.admin_port_file = files.with_suffix(".admin-port")
        self.properties_file = files.with_suffix(".properties")
        if hot_restart:
            self.properties.setdefault("proxy.hot.restart.socket", str(files.with_suffix(".sock")))
        self.process = ServerProcess(
            f"proxy {host}:{port}",
            [],
            log_path=files.with_suffix(".log"),
            ready=port_file_written(self.port_file),
            env={"PYTHONUNBUFFERED": "1"},
            start_timeout_s=start_timeout_s,
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "barnabas", "proxy", "--listen", f"{self.host}:{self.port}",
            "--bootstrap", self.bootstrap_servers, "--port-file", str(self.port_file),
            "--admin-port-file", str(self.admin_port_file),
        ]  # fmt: skip
        if self.peers:
            command += ["--peers", ",".join(self.peers)]
        if self.rack is not None:
            command += ["--rack", self.rack]
        if self.properties:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.properties_file.write_text("".join(f"{key}={value}\n" for key, value in self.properties.items()))
            command += ["--config", str(self.properties_file)]
        return command

    def launch(self) -> None:
        self.port_file.unlink(missing_ok=True)
        self.admin_port_file.unlink(missing_ok=True)
        self.process.command = self.command()
        self.process.launch()

    def hot_restart(self, timeout_s: float = 60.0) -> ServerProcess:
        """Start a new process with ``--takeover``; wait until it serves and the old one has drained and exited.

        The new process logs to the same file. Returns the old process (its exit code, its log).

        Raises:
            ServerStartError: the new process did not start (the old one serves on), or the old one did not exit.
        """
        old = self.process
        new = ServerProcess(
            old.name, [*self.command(), "--takeover"], log_path=old.log_path, ready=old.ready, env=old.env,
            start_timeout_s=old.start_timeout_s,
        )  # fmt: skip
        self.port_file.unlink(missing_ok=True)  # the new process writes it once it has taken over
        new.start()
        self.process = new
        if old.wait_exit(timeout_s) is None:
            raise ServerStartError(f"{old.name}: pid {old.pid} still runs {timeout_s:g} s after a hot restart")
        return old

    @property
    def admin_port(self) -> int:
        """The port of this run's admin endpoint (set ``admin.listeners``, e.g. ``http://127.0.0.1:0``).

        Raises:
            RuntimeError: it has none (not started yet, or no admin listener).
        """
        return admin_port_of(self.admin_port_file, self.process, f"proxy {self.bootstrap}")

    def log_text(self) -> str:
        return self.process.log_text()

    def tail(self, lines: int = 40) -> str:
        return self.process.tail(lines)


def _membership(coordination_url: str | None, node_id: int) -> dict[str, str]:
    if coordination_url is None:
        return {}
    return {"coordination.url": coordination_url, "proxy.node.id": str(node_id)}


class ProxySet:
    """``size`` proxy nodes in front of ``bootstrap``: each the others' peer, or, with ``coordination_url``,
    members of the coordination group ``proxies`` under node ids 0..size-1."""

    def __init__(
        self,
        directory: Path,
        bootstrap: str,
        size: int = 2,
        *,
        racks: Sequence[str | None] | None = None,
        properties: Mapping[str, str] | None = None,
        coordination_url: str | None = None,
    ) -> None:
        ports = free_ports(size)
        racks = list(racks) if racks is not None else [None] * size
        peers = [f"127.0.0.1:{port}" + (f"@{rack}" if rack else "") for port, rack in zip(ports, racks, strict=True)]
        self.nodes = [
            ProxyNode(
                directory,
                bootstrap,
                port,
                peers=[] if coordination_url else peers,
                rack=rack,
                properties={**(properties or {}), **_membership(coordination_url, node_id)},
            )
            for node_id, (port, rack) in enumerate(zip(ports, racks, strict=True))
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self, timeout_s: float = 60.0) -> ProxySet:
        """Start every node at once; wait until each one's Metadata lists them all (they probe each other)."""
        for node in self.nodes:
            node.launch()
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            node.wait_ready(max(0.0, deadline - time.monotonic()))
        for node in self.nodes:
            self.wait_until_listed(node, {n.port for n in self.nodes}, max(0.0, deadline - time.monotonic()))
        return self

    @staticmethod
    def wait_until_listed(node: ProxyNode, ports: set[int], timeout_s: float = 30.0) -> None:
        """Until ``node``'s Metadata names exactly the proxy nodes on ``ports``.

        Raises:
            TimeoutError: it did not in time.
        """
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        seen: set[int] | str = "nothing"
        while time.monotonic() < deadline:
            try:
                md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=5)
                seen = {b.port for b in md.brokers.values()}
            except Exception as exc:
                seen = repr(exc)
            if seen == ports:
                return
            time.sleep(0.05)  # polling Metadata for the condition
        raise TimeoutError(f"proxy {node.bootstrap} lists {seen}, expected ports {sorted(ports)}")

    def stop(self) -> None:
        for node in self.nodes:
            if node.running:
                node.stop()
