"""Removing a broker from a real three-broker cluster: cordon, decommission, stop, unregister.

`barnabas cluster decommission --broker N` empties N: records produced before the move are all read
back after it, from the brokers that stay, and a topic created after it places nothing on N (it is
cordoned). A plan that cannot be made moves nothing and says why in one line. `cluster unregister`
refuses N while it runs, and once it is stopped forgets it, so a broker on a new disk may take the id.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigSource, NewTopic

from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(300)
PARTITIONS = 6
RECORDS = 600


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    started = BrokerCluster(tmp_path, 3, properties={"min.insync.replicas": "1"}).start()
    yield started
    started.stop()


def _cluster(cluster: BrokerCluster, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", "cluster", action, "-b", cluster.bootstrap, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)


def _decommission(cluster: BrokerCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return _cluster(cluster, "decommission", *args)


def _placed(cluster: BrokerCluster, topic: str) -> dict[int, list[int]]:
    """partition -> replicas of ``topic``, once every broker knows it."""
    cluster.wait_for(lambda md: cluster.fully_replicated(md, topic), f"{topic} fully replicated")
    return {p: list(found.replicas) for p, found in cluster.metadata().topics[topic].partitions.items()}


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
    assert report["safe_to_remove"] is True and report["broker"] == 2 and report["cordoned"] is True
    moved = {(m["topic"], m["partition"]): m for m in report["moves"]}
    assert sorted(p for (t, p) in moved if t == "spread") == on_two
    assert all(2 not in m["to"] and 2 in m["from"] for m in moved.values())

    def emptied(md: object) -> bool:
        topics = md.topics  # type: ignore[attr-defined]
        placed = [p for t in topics.values() if t.error is None for p in t.partitions.values()]
        return all(2 not in p.replicas for p in placed) and cluster.fully_replicated(md, "spread")

    cluster.wait_for(emptied, "no replica on broker 2, every ISR full")
    cluster.create_topic("after", PARTITIONS, 2)  # through any broker: the cordon keeps broker 2 out
    assert all(2 not in replicas for replicas in _placed(cluster, "after").values())
    running = _cluster(cluster, "unregister", "--broker", "2")
    assert running.returncode == 1
    assert running.stderr.strip() == (
        "barnabas cluster: cannot unregister broker 2: broker 2 is running: stop it before unregistering it"
    )
    assert cluster.brokers[2].stop() == 0
    assert _consume(cluster.brokers[0].bootstrap, "spread") == {str(i).encode() for i in range(RECORDS)}

    again = _decommission(cluster, "--broker", "2")  # stopped and empty: nothing to move
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        "broker 2 holds no replicas and is cordoned: safe to remove "
        "(stop it, then `barnabas cluster unregister --broker 2`)"
    )
    gone = _cluster(cluster, "unregister", "--broker", "2", "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout) == {"broker": 2, "unregistered": True}
    unknown = _cluster(cluster, "unregister", "--broker", "2")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "barnabas cluster: cannot unregister broker 2: Broker ID 2 is not currently registered"
    )
    # Its id is free: a broker 2 on a new, empty disk starts without --replace, and is not cordoned.
    shutil.rmtree(cluster.brokers[2].data_dir)
    cluster.brokers[2].start()
    # It serves before the controller has seen it register: placement counts registered brokers.
    # Each broker's view: CreateTopics may go to one that has not heard of broker 2 yet.
    cluster.wait_for_everywhere(lambda md: len(md.brokers) == 3, "broker 2 registered again")
    cluster.create_topic("reused", 3, 3)


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


def test_a_cordoned_broker_gets_no_new_replica_until_uncordoned(cluster: BrokerCluster) -> None:
    """Kafka's way works too: cordoned.log.dirs=* on a broker resource, as kafka-configs.sh sets it."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, ResourceType

    done = _cluster(cluster, "cordon", "--broker", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "broker 1 is cordoned: new partitions are not placed on it"

    def status() -> dict[int, bool]:
        shown = _cluster(cluster, "status", "--json")
        assert shown.returncode == 0, shown.stderr
        return {b["id"]: b["cordoned"] for b in json.loads(shown.stdout)["brokers"]}

    deadline = time.monotonic() + 30  # each broker describes its own cordon, once its watch has seen it
    while status() != {0: False, 1: True, 2: False}:
        assert time.monotonic() < deadline, status()
    admin = cluster.admin()
    refused = admin.create_topics([NewTopic("everywhere", 1, 3)])["everywhere"]
    with pytest.raises(KafkaException) as too_few:
        refused.result(timeout=30)
    error = too_few.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert error.str() == "Replication factor: 3 larger than available brokers: 2. (cordoned, so left out: brokers 1)"
    cluster.create_topic("around", 4, 2)
    admin.create_partitions([NewPartitions("around", 8)])["around"].result(timeout=30)
    cluster.wait_for(lambda md: len(md.topics["around"].partitions) == 8, "8 partitions")
    assert all(1 not in replicas for replicas in _placed(cluster, "around").values())

    cordon_two = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("cordoned.log.dirs", "*", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([cordon_two])[cordon_two].result(timeout=30)
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "2")])
    entry = next(iter(described.values())).result(timeout=30)["cordoned.log.dirs"]
    assert (entry.value, entry.source) == ("*", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    one_dir = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("cordoned.log.dirs", "/data/a", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    with pytest.raises(KafkaException) as per_dir:
        admin.incremental_alter_configs([one_dir])[one_dir].result(timeout=30)
    assert per_dir.value.args[0].code() == KafkaError.INVALID_CONFIG

    for broker in ("1", "2"):
        lifted = _cluster(cluster, "uncordon", "--broker", broker, "--json")
        assert lifted.returncode == 0, lifted.stderr
        assert json.loads(lifted.stdout) == {"broker": int(broker), "cordoned": False}
    cluster.create_topic("everywhere", 1, 3)
