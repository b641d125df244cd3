"""`barnabas cluster decommission --broker N` on a real three-broker cluster: N ends up holding nothing.

Records produced before the move are all read back after it, from the brokers that stay; a plan
that cannot be made moves nothing and says why in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(300)
PARTITIONS = 6
RECORDS = 600


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    started = BrokerCluster(tmp_path, 3, properties={"min.insync.replicas": "1"}).start()
    yield started
    started.stop()


def _decommission(cluster: BrokerCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", "cluster", "decommission", "-b", cluster.bootstrap, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[object] = []
    for i in range(RECORDS):
        producer.produce(
            topic, str(i).encode(), partition=i % PARTITIONS, on_delivery=lambda e, _: e and failed.append(e)
        )
    assert producer.flush(60) == 0 and not failed, failed[:3]


def _consume(bootstrap: str, topic: str) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
    finally:
        consumer.close()
    return values


def test_decommission_moves_every_replica_off_the_broker_and_loses_nothing(cluster: BrokerCluster) -> None:
    cluster.create_topic("spread", PARTITIONS, 2)
    _produce(cluster.bootstrap, "spread")
    before = cluster.metadata().topics["spread"].partitions
    on_two = sorted(p for p, found in before.items() if 2 in found.replicas)
    assert on_two, "round-robin placement put some replicas on broker 2"

    done = _decommission(cluster, "--broker", "2", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["safe_to_remove"] is True and report["broker"] == 2
    moved = {(m["topic"], m["partition"]): m for m in report["moves"]}
    assert sorted(p for (t, p) in moved if t == "spread") == on_two
    assert all(2 not in m["to"] and 2 in m["from"] for m in moved.values())

    def emptied(md: object) -> bool:
        topics = md.topics  # type: ignore[attr-defined]
        placed = [p for t in topics.values() if t.error is None for p in t.partitions.values()]
        return all(2 not in p.replicas for p in placed) and cluster.fully_replicated(md, "spread")

    cluster.wait_for(emptied, "no replica on broker 2, every ISR full")
    cluster.brokers[2].stop()
    assert _consume(cluster.brokers[0].bootstrap, "spread") == {str(i).encode() for i in range(RECORDS)}

    again = _decommission(cluster, "--broker", "2")  # stopped and empty: nothing to move
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "broker 2 holds no replicas: safe to remove"


def test_a_plan_that_cannot_be_made_moves_nothing(cluster: BrokerCluster) -> None:
    cluster.create_topic("full", 2, 3)
    dry = _decommission(cluster, "--broker", "1", "--dry-run")
    assert dry.returncode == 1
    assert dry.stderr.strip().splitlines() == [
        "barnabas cluster: cannot decommission broker 1: full-0 has 3 replicas and only 2 other brokers could hold "
        "them; add a broker or lower its replication factor first"
    ]
    done = _decommission(cluster, "--broker", "1")
    assert done.returncode == 1 and "cannot decommission broker 1" in done.stderr
    replicas = {p: sorted(found.replicas) for p, found in cluster.metadata().topics["full"].partitions.items()}
    assert replicas == {0: [0, 1, 2], 1: [0, 1, 2]}
