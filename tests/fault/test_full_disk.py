"""A broker whose disk fills up stops, as Kafka's does, and nothing acknowledged is lost.

Three brokers, each with its log dir on a small disk of its own (a 64 MiB tmpfs); a topic with
3 partitions, replication factor 3 and min.insync.replicas=2 under an idempotent acks=all
producer. The leader of partition 0 finds its disk full: a write fails with ENOSPC, the log dir
goes offline and, being the broker's only one, the broker halts (Kafka's LogDirFailureChannel
and "Shutdown broker because all log dirs have failed"). Its partitions fail over to the other
replicas and the producer goes on. Room is made, the broker starts again and catches up; a fresh
consumer then reads every acknowledged value exactly once, in per-partition produce order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from barnabas.testing.disk import DiskUnavailableError, SmallDisk
from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(300)

TOPIC = "filling"
DISK_BYTES = 64 << 20
LEFT_BYTES = 256 << 10


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[list[SmallDisk]]:
    made: list[SmallDisk] = []
    try:
        for i in range(3):
            made.append(SmallDisk(tmp_path / f"broker-{i}", DISK_BYTES))
    except DiskUnavailableError as exc:
        for disk in made:
            disk.close()
        pytest.skip(f"no small disk on this machine: {exc}")
    yield made
    for disk in made:
        disk.close()


def test_a_broker_on_a_full_disk_halts_and_loses_nothing_acknowledged(
    tmp_path: Path, disks: list[SmallDisk], cluster_factory: Callable[..., BrokerCluster]
) -> None:
    cluster = cluster_factory(tmp_path, 3, None, {"min.insync.replicas": "2"}).start()
    cluster.create_topic(TOPIC, 3, 3)
    workload = Workload(cluster.bootstrap, TOPIC, 3).start()
    try:
        workload.wait_acked(200)
        victim = cluster.leader_of(TOPIC, 0)
        others = [b for b in cluster.brokers if b.broker_id != victim]
        disks[victim].fill(LEFT_BYTES)
        halted = cluster.brokers[victim].process.wait_exit(60)
        assert halted is not None, f"broker {victim} still runs on a full disk:\n{cluster.brokers[victim].tail(30)}"
        assert "halting: log dir" in cluster.brokers[victim].log_text()
        cluster.wait_for(
            lambda md: md.topics[TOPIC].partitions[0].leader not in (-1, victim), "a new leader", ask=others
        )
        workload.wait_acked(workload.acked_count() + 100)  # the others take the writes
        disks[victim].make_room()
        cluster.brokers[victim].start()
        cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "healed after the disk was freed")
        workload.wait_acked(workload.acked_count() + 100)
        result = workload.finish()
        result.consumed = workload.read_back(cluster.bootstrap)
    finally:
        workload.finish(timeout_s=1)
    assert workload.fatal is None, workload.fatal
    assert not result.problems(), result.problems()


def test_creating_a_topic_on_a_full_disk_gets_a_storage_error_and_the_broker_serves_on(tmp_path: Path) -> None:
    try:
        disk = SmallDisk(tmp_path / "broker", 8 << 20)
    except DiskUnavailableError as exc:
        pytest.skip(f"no small disk on this machine: {exc}")
    # The coordination store elsewhere: what fails is making the topic's logs.
    broker = BrokerProcess(tmp_path / "broker", 0, ["--coordination", f"sqlite:///{tmp_path / 'coordination.db'}"])
    try:
        broker.start()
        disk.fill(0)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        future = admin.create_topics([NewTopic("no-room", 2, 1)])["no-room"]
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR, refused.value
        assert "creating topic no-room failed" in broker.log_text()
        assert broker.running
        assert admin.list_topics(timeout=10).brokers, "the broker still answers Metadata"
    finally:
        broker.kill()
        disk.close()
