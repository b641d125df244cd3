"""The tests' cluster: barnabas.testing's BrokerCluster of BrokerProcess brokers, and the backends it runs on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from barnabas.testing import FAST_FAILOVER
from barnabas.testing import BrokerCluster as ShippedCluster
from tests.support.broker_process import BrokerProcess

__all__ = ["CLUSTER_BACKENDS", "FAST_FAILOVER", "BrokerCluster", "coordination_url"]

#: The coordination backends cluster tests run on: each has its server in every suite run.
CLUSTER_BACKENDS = ("sqlite", "etcd", "zookeeper")


def coordination_url(request: pytest.FixtureRequest, backend: str, directory: Path) -> str:
    """A fresh coordination URL on ``backend`` (SQLite in ``directory``; etcd and ZooKeeper from the
    suite's shared servers, under a fresh prefix)."""
    if backend == "sqlite":
        return f"sqlite:///{directory / 'coordination.db'}"
    server = request.getfixturevalue(f"{backend}_server")
    return str(server.url_for())


class BrokerCluster(ShippedCluster):
    """The shipped cluster, its brokers BrokerProcess (with the tests' ``proc`` and ``output``)."""

    brokers: list[BrokerProcess]  # type: ignore[assignment]

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        return BrokerProcess(data_dir, broker_id, ["--coordination", self.coordination_url], dict(properties))

    def alive(self) -> list[BrokerProcess]:  # type: ignore[override]
        return [b for b in self.brokers if b.running]

    def client_access(self) -> tuple[str, dict[str, str]]:
        """How a workload's clients reach the brokers: a bootstrap, and security settings (librdkafka's) to add."""
        return self.bootstrap, {}
