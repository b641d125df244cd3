"""A local cluster of real `barnabas broker` processes sharing one coordination URL, for tests.

Every broker is a BrokerProcess (stopped by pid). Cluster state is read the way a client reads
it: Metadata through confluent-kafka's AdminClient, from any live broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from tests.support.broker_process import BrokerProcess

#: The coordination backends cluster tests run on: each has its server in every suite run.
CLUSTER_BACKENDS = ("sqlite", "etcd", "zookeeper")


def coordination_url(request: pytest.FixtureRequest, backend: str, directory: Path) -> str:
    """A fresh coordination URL on ``backend`` (SQLite in ``directory``; etcd and ZooKeeper from the
    suite's shared servers, under a fresh prefix)."""
    if backend == "sqlite":
        return f"sqlite:///{directory / 'coordination.db'}"
    server = request.getfixturevalue(f"{backend}_server")
    return str(server.url_for())


#: Settings that make failure detection and ISR changes quick enough for tests.
FAST_FAILOVER = {
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.max.wait.ms": "10000",
}


class BrokerCluster:
    def __init__(
        self, base: Path, size: int, coordination_url: str | None = None, properties: dict[str, str] | None = None
    ) -> None:
        self.base = base
        self.coordination_url = coordination_url or f"sqlite:///{base / 'coordination.db'}"
        merged = {**FAST_FAILOVER, **(properties or {})}
        self.brokers = [
            BrokerProcess(
                base / f"broker-{i}",
                broker_id=i,
                extra_args=["--coordination", self.coordination_url],
                properties=merged,
            )
            for i in range(size)
        ]

    def start(self) -> BrokerCluster:
        for broker in self.brokers:
            broker.start()
        self.wait_for(lambda md: len(md.brokers) == len(self.brokers), "every broker registered")
        return self

    def stop(self) -> None:
        for broker in self.brokers:
            broker.kill()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.port)

    def alive(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.proc is not None and b.proc.poll() is None]

    def admin(self) -> AdminClient:
        live = ",".join(b.bootstrap for b in self.alive())
        return AdminClient({"bootstrap.servers": live, "socket.timeout.ms": 5000})

    def metadata(self, timeout_s: float = 10.0) -> ClusterMetadata:
        return self.admin().list_topics(timeout=timeout_s)

    def create_topic(self, name: str, partitions: int, replication_factor: int, **config: str) -> None:
        admin = self.admin()  # kept alive until the futures resolve
        futures = admin.create_topics([NewTopic(name, partitions, replication_factor, config=config)])
        for future in futures.values():
            future.result(timeout=30)
        self.wait_for(lambda md: self.fully_replicated(md, name), f"{name} led with a full ISR everywhere")

    @staticmethod
    def fully_replicated(md: ClusterMetadata, topic: str) -> bool:
        found = md.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return False
        return all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in found.partitions.values())

    def wait_for(
        self,
        condition: Callable[[ClusterMetadata], bool],
        what: str,
        timeout_s: float = 60.0,
        ask: Sequence[BrokerProcess] | None = None,
    ) -> None:
        """Poll Metadata until ``condition`` holds, asking each live broker (or each of ``ask``) in turn.

        A broker always lists itself, so whether broker N is registered is a question for the others.
        """
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            for broker in self.alive() if ask is None else ask:
                try:
                    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
                except Exception as exc:  # a broker going down mid-call; ask the next one
                    last = exc
                    continue
                if condition(md):
                    return
                last = {t: [(p.id, p.leader, p.isrs) for p in m.partitions.values()] for t, m in md.topics.items()}
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; last seen: {last}")

    def leader_of(self, topic: str, partition: int) -> int:
        return int(self.metadata().topics[topic].partitions[partition].leader)

    def controller(self) -> int:
        return int(self.metadata().controller_id)
