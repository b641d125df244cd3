"""etcd for the coordination tests: the shipped EtcdServer and EtcdCluster, as pytest fixtures.

One node for the whole run (tests isolate themselves with ``url_for()`` prefixes), three members
for a module that kills and restarts them; a start that lost its picked ports to another process
("address already in use") is retried on new ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from barnabas.testing import free_ports
from barnabas.testing.servers.etcd import ETCD, EtcdCluster, EtcdServer

__all__ = ["EtcdCluster", "EtcdServer", "etcd_cluster", "etcd_server", "free_ports", "start_server"]


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
