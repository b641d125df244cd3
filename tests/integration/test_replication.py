"""A three-broker cluster seen through real clients: metadata, acks=all rules, identity, pauses."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata

from barnabas.testing import ServerStartError
from barnabas.testing.servers.zookeeper import ZooKeeperServer
from tests.support.admin_metrics import ADMIN, scrape, total
from tests.support.cluster import FAST_FAILOVER, BrokerCluster

pytestmark = pytest.mark.timeout(300)


def produce(bootstrap: str, topic: str, count: int, partition: int = 0, **config: object) -> list[KafkaError | None]:
    """Produce ``count`` values with acks=all; return each delivery's error (None when acked)."""
    outcomes: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=partition, on_delivery=lambda err, _: outcomes.append(err))
    assert producer.flush(60) == 0
    return outcomes


def consume_all(bootstrap: str, topic: str, partition: int, expected: int) -> list[bytes]:
    # assign() with a fresh group and no commits: the check reads the partition, not a group's progress.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    started = BrokerCluster(tmp_path, 3, properties={"min.insync.replicas": "2"}).start()
    yield started
    started.stop()


def test_metadata_shows_brokers_controller_leaders_and_isr(cluster: BrokerCluster) -> None:
    cluster.create_topic("described", 3, 3)
    for broker in cluster.brokers:  # every broker tells the same story once it has read the new topic
        cluster.wait_for(
            lambda md: cluster.fully_replicated(md, "described"), f"broker {broker.broker_id} has it", ask=[broker]
        )
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert sorted(md.brokers) == [0, 1, 2]
        assert md.controller_id in (0, 1, 2)
        partitions = md.topics["described"].partitions
        assert sorted(partitions) == [0, 1, 2]
        assert sorted(p.leader for p in partitions.values()) == [0, 1, 2], "leadership is spread"
        for p in partitions.values():
            assert sorted(p.replicas) == [0, 1, 2] and sorted(p.isrs) == [0, 1, 2]
            assert p.leader == p.replicas[0], "the preferred replica leads a new topic"

    victim = cluster.leader_of("described", 0)
    cluster.brokers[victim].kill()
    cluster.wait_for(lambda md: victim not in md.brokers, "the killed broker gone from metadata")
    cluster.wait_for(
        lambda md: all(
            p.leader not in (-1, victim) and victim not in p.isrs for p in md.topics["described"].partitions.values()
        ),
        "leaders moved off the dead broker and it left every ISR",
    )


def test_acks_all_needs_min_insync_replicas(cluster: BrokerCluster) -> None:
    cluster.create_topic("guarded", 1, 3)
    assert produce(cluster.bootstrap, "guarded", 10) == [None] * 10
    leader = cluster.leader_of("guarded", 0)
    followers = [b for b in cluster.brokers if b.broker_id != leader]
    for follower in followers:
        follower.kill()
    cluster.wait_for(lambda md: md.topics["guarded"].partitions[0].isrs == [leader], "the ISR shrunk to the leader")
    outcomes = produce(cluster.bootstrap, "guarded", 3, **{"message.timeout.ms": 3000, "retries": 0})
    assert all(e is not None and e.code() == KafkaError.NOT_ENOUGH_REPLICAS for e in outcomes), outcomes
    # acks=1 still works: min.insync.replicas only guards acks=all.
    assert produce(cluster.bootstrap, "guarded", 3, acks=1) == [None] * 3
    for follower in followers:
        follower.start()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, "guarded"), "the followers back in the ISR")
    assert produce(cluster.bootstrap, "guarded", 3) == [None] * 3
    assert len(consume_all(cluster.bootstrap, "guarded", 0, 16)) == 16


def test_same_id_with_an_empty_dir_refuses_to_start_unless_replacing_then_replicates_everything_again(
    cluster: BrokerCluster,
) -> None:
    """The claim on its log dirs stops a broker whose volume is gone; ``--replace`` makes the new one its data."""
    cluster.create_topic("rebuilt", 1, 3)
    assert produce(cluster.bootstrap, "rebuilt", 500) == [None] * 500
    victim = cluster.brokers[2]
    victim.kill()
    shutil.rmtree(victim.data_dir)
    with pytest.raises(ServerStartError) as refused:
        victim.start()
    assert victim.process.exit_code == 1
    reason = [line for line in victim.log_text().splitlines() if line.startswith("barnabas broker:")]
    assert len(reason) == 1 and "broker 2's log dirs are new, but its data is in directory" in reason[0], refused.value
    victim.extra_args.append("--replace")
    victim.start()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, "rebuilt"), "the emptied broker back in the ISR")
    assert (victim.data_dir / "meta.properties").exists()
    assert "broker.id=2" in (victim.data_dir / "meta.properties").read_text()
    # Stop the others: leadership moves to broker 2, which must hold every record on its own.
    for other in cluster.brokers[:2]:
        assert other.stop() == 0
    cluster.wait_for(lambda md: md.topics["rebuilt"].partitions[0].leader == 2, "broker 2 leads")
    values = consume_all(victim.bootstrap, "rebuilt", 0, 500)
    assert values == [str(i).encode() for i in range(500)]


def test_restart_with_same_id_and_data_rejoins_the_isr(cluster: BrokerCluster) -> None:
    cluster.create_topic("rejoined", 1, 3)
    assert produce(cluster.bootstrap, "rejoined", 100) == [None] * 100
    victim = cluster.brokers[1]
    victim.kill()
    cluster.wait_for(lambda md: 1 not in md.topics["rejoined"].partitions[0].isrs, "broker 1 out of the ISR")
    assert produce(cluster.bootstrap, "rejoined", 100) == [None] * 100  # written while it was away
    victim.start()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, "rejoined"), "broker 1 back in the ISR")
    assert len(consume_all(cluster.bootstrap, "rejoined", 0, 200)) == 200


@pytest.mark.parametrize("backend", ["sqlite", "zookeeper"])
def test_a_paused_broker_loses_its_session_and_registers_again(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """SIGSTOP a broker: it keeps its sockets and (on SQLite) its session's lock, and must still be declared dead."""
    url = request.getfixturevalue("zookeeper_server").url_for() if backend == "zookeeper" else None
    cluster = BrokerCluster(tmp_path, 3, url).start()
    try:
        cluster.create_topic("paused", 1, 3)
        victim = cluster.brokers[2]
        others = cluster.brokers[:2]
        assert victim.proc is not None
        os.kill(victim.proc.pid, signal.SIGSTOP)
        try:
            cluster.wait_for(lambda md: 2 not in md.brokers, "the paused broker declared dead", ask=others)
            cluster.wait_for(lambda md: 2 not in md.topics["paused"].partitions[0].isrs, "it left the ISR", ask=others)
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while "registered again" not in victim.log_text():  # the session is found LOST after resuming
            assert time.monotonic() < deadline, victim.log_text()[-3000:]
            time.sleep(0.1)
        cluster.wait_for(lambda md: 2 in md.brokers, "the others see it registered again", ask=others)
        cluster.wait_for(lambda md: cluster.fully_replicated(md, "paused"), "it is back in the ISR", ask=others)
    finally:
        cluster.stop()


def test_followers_warn_once_while_a_dead_leader_is_retried(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    """Until its session expires (3 s) a killed leader is retried every backoff (200 ms): one warning, not 15."""
    cluster = BrokerCluster(tmp_path, 3, zookeeper_server.url_for()).start()
    try:
        cluster.create_topic("quiet", 1, 3)
        victim = cluster.leader_of("quiet", 0)
        cluster.brokers[victim].kill()
        cluster.wait_for(lambda md: victim not in md.topics["quiet"].partitions[0].isrs, "the dead leader replaced")
        for follower in cluster.alive():
            log_text = follower.log_text()
            assert log_text.count(f"fetching from broker {victim} failed") == 1, log_text[-3000:]
    finally:
        cluster.stop()


def test_added_partitions_continue_the_round_robin(cluster: BrokerCluster) -> None:
    """Kafka's addPartitions: partition i is led by broker (i + index of partition 0's leader) % brokers."""
    from confluent_kafka.admin import NewPartitions

    cluster.create_topic("grown", 2, 1)
    admin = cluster.admin()  # kept alive until the future resolves
    admin.create_partitions([NewPartitions("grown", 6)])["grown"].result(timeout=30)

    def round_robin(md: ClusterMetadata) -> bool:
        topic = md.topics.get("grown")
        replicas = {p.id: p.replicas for p in topic.partitions.values()} if topic is not None else {}
        return len(replicas) == 6 and replicas == {i: [(replicas[0][0] + i) % 3] for i in range(6)}

    # A broker that has not read the new partitions yet shows two; one that has must show this placement.
    cluster.wait_for(round_robin, "six partitions placed round robin from partition 0's leader")


def test_followers_fetch_through_incremental_sessions(tmp_path: Path) -> None:
    """Each broker leads one partition of three, so its two followers each keep a fetch session with it,
    and go on fetching within it (KIP-227): the leader counts incremental fetches. Their fetches at rest
    skip the quiet partitions and are recorded once per fetch: over twice replica.lag.time.max.ms no ISR
    shrinks, and acks=all writes go on being acknowledged after it."""
    cluster = BrokerCluster(tmp_path, 3, properties={"min.insync.replicas": "2", **ADMIN}).start()
    try:
        cluster.create_topic("sessions", 3, 3)
        for partition in range(3):
            assert produce(cluster.bootstrap, "sessions", 100, partition) == [None] * 100
            assert consume_all(cluster.bootstrap, "sessions", partition, 100) == [str(i).encode() for i in range(100)]
        first = [scrape(broker.admin_port) for broker in cluster.brokers]
        sessions = [total(samples, "kafka_server_fetchsessioncache_numincrementalfetchsessions") for samples in first]
        assert all(count >= 2 for count in sessions), sessions

        def incremental(samples: dict[Any, float]) -> float:
            return total(samples, "barnabas_fetch_incremental_total")

        # Followers long-poll replica.fetch.wait.max.ms (500 ms) per fetch: their sessions stay in use.
        deadline = time.monotonic() + 30
        while True:
            later = [scrape(broker.admin_port) for broker in cluster.brokers]
            if all(incremental(b) > incremental(a) for a, b in zip(first, later, strict=True)):
                break
            assert time.monotonic() < deadline, "no incremental fetches counted on some leader"
            time.sleep(0.2)

        def shrinks() -> float:
            name = "kafka_server_replicamanager_isrshrinks_total"
            return sum(total(scrape(broker.admin_port), name) for broker in cluster.brokers)

        before = shrinks()
        quiet_until = time.monotonic() + 2 * int(FAST_FAILOVER["replica.lag.time.max.ms"]) / 1000
        while time.monotonic() < quiet_until:
            assert shrinks() == before, "an ISR shrank while its followers fetched at rest"
            time.sleep(0.5)
        for partition in range(3):
            assert produce(cluster.bootstrap, "sessions", 100, partition) == [None] * 100
    finally:
        cluster.stop()
