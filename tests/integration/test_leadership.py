"""Leadership on request, through the Java Admin client and confluent-kafka: reassignments and elections.

Each test runs a three-broker cluster on embedded coordination. The cancel test holds a
reassignment in progress by adding a SIGSTOPped broker, which cannot catch up; that broker stays
registered until its session times out, so its cluster's session timeout outlasts the test (with
the default 9 s, a loaded machine once took longer to ask, and the broker was gone).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from tests.integration.test_replication import consume_all, produce
from tests.support.cluster import BrokerCluster
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, JavaAdmin, build_tools
from tests.support.polling import wait_until
from tests.support.requests import connect, timeout_ms

pytestmark = pytest.mark.timeout(300)

ELECT_LEADERS, LIST_PARTITION_REASSIGNMENTS = 43, 46
#: A removed replica's dir is renamed away at once and its files go log.segment.delete.delay.ms later
#: (60 s by default, as long as the tests wait for it to go): a second here.
NO_AUTO_REBALANCE = {
    "auto.leader.rebalance.enable": "false",
    "min.insync.replicas": "1",
    "log.segment.delete.delay.ms": "1000",
}


@pytest.fixture(scope="module")
def java_tools() -> None:
    problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java tools build")
    if problem:
        pytest.fail(problem)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    started = BrokerCluster(tmp_path, 3, properties=NO_AUTO_REBALANCE).start()
    yield started
    started.stop()


@pytest.fixture
def patient_cluster(tmp_path: Path) -> Iterator[BrokerCluster]:
    """A cluster whose brokers keep their sessions for 2 minutes without a heartbeat."""
    started = BrokerCluster(tmp_path, 3, properties={**NO_AUTO_REBALANCE, "broker.session.timeout.ms": "120000"})
    yield started.start()
    started.stop()


def end_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """The partition's (log start, high watermark) as its leader reports them (ListOffsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=30)
    finally:
        consumer.close()
    return int(low), int(high)


def create_assigned(cluster: BrokerCluster, name: str, *assignment: list[int]) -> None:
    admin = cluster.admin()
    new = NewTopic(name, num_partitions=len(assignment), replica_assignment=[list(a) for a in assignment])
    future = admin.create_topics([new])[name]
    future.result(timeout=30)
    cluster.wait_for(lambda md: cluster.fully_replicated(md, name), f"{name} fully replicated")


def partition_dirs(cluster: BrokerCluster, broker: int, name: str) -> list[Path]:
    return [p for p in (cluster.base / f"broker-{broker}").rglob(f"{name}-*") if p.is_dir()]


def test_reassignment_moves_a_partition_and_its_data(java_tools: None, cluster: BrokerCluster) -> None:
    create_assigned(cluster, "moving", [0, 1])
    assert produce(cluster.bootstrap, "moving", 300) == [None] * 300
    admin = JavaAdmin(cluster.bootstrap)

    assert admin.reassign("moving", 0, [2, 1]) == {"ok": True}
    wait_until(lambda: admin.reassignments() == {}, "the reassignment to finish")

    cluster.wait_for(
        lambda md: (p := md.topics["moving"].partitions[0]).replicas == [2, 1] and sorted(p.isrs) == [1, 2],
        "replicas [2, 1], both in sync",
    )
    assert cluster.leader_of("moving", 0) in (1, 2), "the removed broker no longer leads"
    wait_until(lambda: not partition_dirs(cluster, 0, "moving"), "broker 0 to delete its replica")
    assert partition_dirs(cluster, 2, "moving"), "broker 2 holds the new replica"
    assert produce(cluster.bootstrap, "moving", 100) == [None] * 100
    values = consume_all(cluster.bootstrap, "moving", 0, 400)
    assert values == [str(i).encode() for i in range(300)] + [str(i).encode() for i in range(100)]


def test_reassignment_in_progress_is_listed_and_can_be_cancelled(
    java_tools: None, patient_cluster: BrokerCluster
) -> None:
    cluster = patient_cluster
    controller = cluster.controller()
    frozen = next(b for b in reversed(cluster.brokers) if b.broker_id != controller)  # the controller must answer
    original = [b.broker_id for b in cluster.brokers if b is not frozen]
    create_assigned(cluster, "held", original)
    admin = JavaAdmin(
        ",".join(b.bootstrap for b in cluster.brokers if b is not frozen)
    )  # a stopped broker never answers
    assert frozen.proc is not None
    os.kill(frozen.proc.pid, signal.SIGSTOP)  # registered still, but it cannot catch up
    try:
        assert admin.reassign("held", 0, [*original, frozen.broker_id]) == {"ok": True}
        expected = {"replicas": [*original, frozen.broker_id], "adding": [frozen.broker_id], "removing": []}
        assert admin.reassignments() == {"held-0": expected}
        assert admin.cancel("held", 0) == {"ok": True}
        assert admin.reassignments() == {}
    finally:
        os.kill(frozen.proc.pid, signal.SIGCONT)
    cluster.wait_for(lambda md: md.topics["held"].partitions[0].replicas == original, "back on the original replicas")
    wait_until(lambda: not partition_dirs(cluster, frozen.broker_id, "held"), "the frozen broker to drop its replica")
    assert produce(cluster.bootstrap, "held", 50) == [None] * 50


def test_bad_reassignments_get_kafka_errors(java_tools: None, cluster: BrokerCluster) -> None:
    create_assigned(cluster, "fixed", [0, 1])
    admin = JavaAdmin(cluster.bootstrap)
    assert "InvalidReplicaAssignmentException" in admin.reassign("fixed", 0, [0, 7])["error"]
    assert "InvalidReplicaAssignmentException" in admin.reassign("fixed", 0, [1, 1])["error"]
    assert "UnknownTopicOrPartitionException" in admin.reassign("fixed", 5, [0, 1])["error"]
    assert "UnknownTopicOrPartitionException" in admin.reassign("absent", 0, [0, 1])["error"]
    assert "NoReassignmentInProgressException" in admin.cancel("fixed", 0)["error"]
    assert admin.reassignments() == {}


def test_preferred_and_unclean_elections(java_tools: None, cluster: BrokerCluster) -> None:
    """Leadership goes back to the preferred replica on request; an unclean election loses data knowingly.

    Broker 0 leads "elected" alone after broker 1 dies, takes writes, and dies too: no in-sync
    replica is left. Broker 1 comes back and leads only after an unclean election; broker 0 then
    returns with records broker 1 never had, truncates them (its log diverged at the old epoch),
    and copies broker 1's log. A preferred election finally gives leadership back to broker 0,
    which serves exactly broker 1's history.
    """
    create_assigned(cluster, "elected", [0, 1])
    admin = JavaAdmin(cluster.bootstrap)
    assert produce(cluster.bootstrap, "elected", 100) == [None] * 100
    result = admin.elect("preferred", "elected", 0)
    assert "ElectionNotNeededException" in result["elected-0"], "broker 0 leads already"

    cluster.brokers[1].kill()
    cluster.wait_for(lambda md: md.topics["elected"].partitions[0].isrs == [0], "broker 1 out of the ISR")
    assert produce(cluster.bootstrap, "elected", 50, **{"message.timeout.ms": 20000}) == [None] * 50
    cluster.brokers[0].kill()
    cluster.brokers[1].start()
    cluster.wait_for(lambda md: 1 in md.brokers, "broker 1 registered again", ask=[cluster.brokers[2]])
    partition = cluster.metadata().topics["elected"].partitions[0]
    assert partition.leader == -1, "no in-sync replica alive: the partition stays offline"

    assert "PreferredLeaderNotAvailableException" in admin.elect("preferred", "elected", 0)["elected-0"]
    assert admin.elect("unclean", "elected", 0) == {"elected-0": None}
    cluster.wait_for(lambda md: md.topics["elected"].partitions[0].leader == 1, "broker 1 leads after unclean")
    assert produce(cluster.bootstrap, "elected", 20) == [None] * 20

    cluster.brokers[0].start()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, "elected"), "broker 0 caught up with broker 1")
    truncation = "elected-0: truncated from 150 to 100 to match leader 1"
    assert truncation in cluster.brokers[0].log_text(), "broker 0 dropped the 50 records broker 1 lacks"

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    future = confluent.elect_leaders(ElectionType.PREFERRED, [KafkaTopicPartition("elected", 0)])
    assert future.result(timeout=30)[KafkaTopicPartition("elected", 0)] is None
    # Each broker's view: ListOffsets goes to the leader a fresh client's Metadata names, from any broker.
    cluster.wait_for_everywhere(lambda md: md.topics["elected"].partitions[0].leader == 0, "broker 0 leads again")
    expected = [str(i).encode() for i in range(100)] + [str(i).encode() for i in range(20)]
    assert consume_all(cluster.brokers[0].bootstrap, "elected", 0, 120) == expected
    assert end_offsets(cluster.brokers[0].bootstrap, "elected", 0) == (0, 120), "nothing beyond it"


def test_only_the_controller_serves_leadership_requests(cluster: BrokerCluster) -> None:
    """Other brokers answer NOT_CONTROLLER (clients then retry at the controller); the controller serves."""
    cluster.create_topic("anywhere", 3, 3)
    controller = cluster.controller()
    elect = ElectLeadersRequest(
        election_type=0,
        topic_partitions=(TopicPartitions(topic="anywhere", partitions=(0,)),),
        timeout=timeout_ms(5000),
    )
    listing = ListPartitionReassignmentsRequest(timeout=timeout_ms(5000), topics=None)
    for broker in cluster.brokers:
        with connect(broker) as client:
            elected = client.request(ELECT_LEADERS, 2, elect)
            listed = client.request(LIST_PARTITION_REASSIGNMENTS, 0, listing)
        (result,) = elected.replica_election_results[0].partition_result
        if broker.broker_id == controller:
            assert (elected.error_code, result.error_code) == (ErrorCode.none, ErrorCode.election_not_needed)
            assert (listed.error_code, listed.topics) == (ErrorCode.none, ())
        else:
            assert (elected.error_code, result.error_code) == (ErrorCode.not_controller, ErrorCode.not_controller)
            assert listed.error_code == ErrorCode.not_controller
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert confluent.elect_leaders(ElectionType.PREFERRED, None).result(timeout=30) == {}, "all led as preferred"


def test_auto_leader_rebalance_gives_leadership_back(tmp_path: Path) -> None:
    properties = {"leader.imbalance.check.interval.seconds": "1", "min.insync.replicas": "1"}
    cluster = BrokerCluster(tmp_path, 3, properties=properties).start()
    try:
        cluster.create_topic("rebalanced", 3, 3)
        preferred = {p.id: p.replicas[0] for p in cluster.metadata().topics["rebalanced"].partitions.values()}
        victim = cluster.brokers[preferred[0]]
        victim.kill()
        cluster.wait_for(
            lambda md: md.topics["rebalanced"].partitions[0].leader not in (-1, victim.broker_id), "leader moved"
        )
        victim.start()
        cluster.wait_for(
            lambda md: all(p.leader == preferred[p.id] for p in md.topics["rebalanced"].partitions.values()),
            "every partition led by its preferred replica again, without an admin call",
        )
    finally:
        cluster.stop()
