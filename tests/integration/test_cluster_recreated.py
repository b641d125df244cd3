"""A cluster recreated on its old volumes comes back by itself: the coordination store is lost, the disks are not.

Strimzi's users who recreate a Kafka cluster on old volumes meet "Invalid cluster.id" and manual
surgery. Here every broker keeps a copy of its topics' documents beside their logs; the brokers
restarted on an empty store take the cluster id from their dirs, restore the topics, and each
partition's replicas report their logs so that the one holding the most leads.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource

from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(300)

TOPIC = "ledger"
PARTITIONS = 3
RECORDS = 300
GROUP = "auditors"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    started = BrokerCluster(tmp_path, 3, properties={"min.insync.replicas": "2"}).start()
    yield started
    started.stop()


def produce(bootstrap: str, values: range) -> None:
    """Idempotent acks=all values round-robin over the partitions; every one must be acknowledged."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for value in values:
        producer.produce(
            TOPIC, str(value).encode(), partition=value % PARTITIONS, on_delivery=lambda e, _: errors.append(e)
        )
    assert producer.flush(60) == 0
    assert errors == [None] * len(values)


def read_partition(bootstrap: str, partition: int, expected: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}"})
    consumer.assign([TopicPartition(TOPIC, partition, 0)])
    values: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(int(message.value()))
    finally:
        consumer.close()
    return values


def commit(bootstrap: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def identity(cluster: BrokerCluster) -> tuple[str, str, str]:
    """(cluster id, the topic's id, its retention.ms) as a client sees them."""
    admin = cluster.admin()
    cluster_id = admin.describe_cluster().result(timeout=30).cluster_id
    (description,) = admin.describe_topics(TopicCollection([TOPIC])).values()
    (config,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)]).values()
    return cluster_id, str(description.result(timeout=30).topic_id), config.result(timeout=30)["retention.ms"].value


def test_a_cluster_recreated_on_its_old_volumes_comes_back_with_its_topics_records_and_offsets(
    cluster: BrokerCluster,
) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"retention.ms": "987654321"})
    produce(cluster.bootstrap, range(RECORDS))
    commit(cluster.bootstrap, {0: 40, 1: 50, 2: 60})
    before = identity(cluster)
    # One broker falls behind, so its logs end short of the others': it must not be the one that leads.
    laggard = cluster.brokers[2]
    laggard.kill()
    cluster.wait_for(
        lambda md: all(2 not in p.isrs for p in md.topics[TOPIC].partitions.values()), "broker 2 out of every ISR"
    )
    produce(cluster.bootstrap, range(RECORDS, RECORDS + 30))
    for broker in cluster.brokers[:2]:
        assert broker.stop() == 0
    for path in cluster.base.glob("coordination.db*"):  # the store is gone; the volumes are not
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    for broker in cluster.brokers:
        broker.launch()
    for broker in cluster.brokers:
        broker.wait_ready(60)
    cluster.wait_until_every_broker_sees_all()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "every partition led, with a full ISR")

    assert identity(cluster) == before
    for partition in range(PARTITIONS):
        expected = [v for v in range(RECORDS + 30) if v % PARTITIONS == partition]
        assert read_partition(cluster.bootstrap, partition, len(expected)) == expected
    assert committed(cluster.bootstrap) == {0: 40, 1: 50, 2: 60}
    # The producer id counter starts past the ids in the logs: a new idempotent producer is not
    # taken for an old one (OUT_OF_ORDER_SEQUENCE_NUMBER).
    produce(cluster.bootstrap, range(RECORDS + 30, RECORDS + 60))
    restored = [b for b in cluster.brokers if f"restored topic {TOPIC}" in b.log_text()]
    assert len(restored) == 1, "one broker restores the topic, the others find it restored"
