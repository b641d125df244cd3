"""Several brokers creating the same topic at once end with one leader per partition that all agree on.

Issue: with FindCoordinator sent to two brokers at once, both created ``__consumer_offsets``; the
loser's partition states overwrote the winner's, so brokers and the coordination store disagreed
(partitions without an acting leader for minutes, others with two leaders at one epoch). Topic
creation must be one commit point the loser writes nothing past, and brokers must act only on the
stored state. Here every broker of a 3-broker cluster is asked at the same instant to create
``__consumer_offsets`` (by FindCoordinator) and then ordinary topics (by CreateTopics), round after
round; afterwards, for every partition, every broker's Metadata names the same leader and leader
epoch, and that leader, and no other broker, answers a leader-only request (ListOffsets).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster, coordination_url
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import LIST_OFFSETS, METADATA, create_topics, timeout_ms

pytestmark = pytest.mark.timeout(600)

OFFSETS_TOPIC = "__consumer_offsets"
FIND_COORDINATOR = 10
CREATE_PARTITIONS = 37
#: Fresh clusters per backend, each racing to create the offsets topic once.
CLUSTERS = {"sqlite": 3, "etcd": 1, "zookeeper": 1}
#: Rounds of ordinary topics created by every broker at once, per cluster.
ROUNDS = 4
TOPICS_PER_ROUND = 3
#: How long the brokers may take to agree after a creation.
AGREE_S = 20.0


@pytest.fixture(params=sorted(CLUSTERS))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def at_once(brokers: list[BrokerProcess], send: Callable[[RawKafkaClient], Any]) -> list[Any]:
    """Connect to every broker, then send on every connection at the same instant; return the answers."""
    clients = [RawKafkaClient.connect("127.0.0.1", broker.port, timeout=30) for broker in brokers]
    start = threading.Barrier(len(clients))
    answers: list[Any] = [None] * len(clients)

    def run(index: int) -> None:
        start.wait()
        try:
            answers[index] = send(clients[index])
        except Exception as exc:  # reported with the answers
            answers[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for client in clients:
        client.close()
    return answers


def find_coordinator(client: RawKafkaClient) -> Any:
    return client.request(FIND_COORDINATOR, 3, FindCoordinatorRequest(key="race", key_type=0))


def views(brokers: list[BrokerProcess], topics: list[str]) -> list[dict[tuple[str, int], tuple[int, int]]]:
    """Each broker's Metadata: (topic, partition) -> (leader, leader epoch)."""
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=name) for name in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    found = []
    for broker in brokers:
        with RawKafkaClient.connect("127.0.0.1", broker.port) as client:
            response = client.request(METADATA, 12, request)
        found.append({
            (str(t.name), int(p.partition_index)): (int(p.leader_id), int(p.leader_epoch))
            for t in response.topics if t.error_code == ErrorCode.none for p in t.partitions
        })  # fmt: skip
    return found


def acting_leaders(brokers: list[BrokerProcess], partitions: list[tuple[str, int]]) -> dict[tuple[str, int], list[int]]:
    """For each partition, the brokers that answer ListOffsets as its leader."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in ps
                ),
            )
            for topic, ps in by_topic.items()
        ),
    )
    leading: dict[tuple[str, int], list[int]] = {tp: [] for tp in partitions}
    for broker in brokers:
        with RawKafkaClient.connect("127.0.0.1", broker.port) as client:
            response = client.request(LIST_OFFSETS, 7, request)
        for topic in response.topics:
            for result in topic.partitions:
                if result.error_code == ErrorCode.none:
                    leading[(str(topic.name), int(result.partition_index))].append(broker.broker_id)
    return leading


def disagreements(brokers: list[BrokerProcess], topics: list[str], expected_partitions: int) -> list[str]:
    """Every way the brokers fail to agree on one acting leader per partition (empty when they do)."""
    seen = views(brokers, topics)
    problems = []
    partitions = sorted(seen[0])
    if len(partitions) != expected_partitions:
        problems.append(f"broker {brokers[0].broker_id} knows {len(partitions)} of {expected_partitions} partitions")
    for index, view in enumerate(seen[1:], 1):
        if view != seen[0]:
            keys = set(view) | set(seen[0])
            diff = {tp: (seen[0].get(tp), view.get(tp)) for tp in keys if seen[0].get(tp) != view.get(tp)}
            problems.append(f"brokers {brokers[0].broker_id} and {brokers[index].broker_id} disagree: {diff}")
    if problems:
        return problems
    for tp, acting in acting_leaders(brokers, partitions).items():
        named = seen[0][tp][0]
        if acting != [named]:
            problems.append(f"{tp[0]}-{tp[1]}: Metadata names leader {named}, brokers {acting} act as leader")
    return problems


def wait_for_agreement(brokers: list[BrokerProcess], topics: list[str], expected_partitions: int) -> None:
    deadline = time.monotonic() + AGREE_S
    problems = disagreements(brokers, topics, expected_partitions)
    while problems and time.monotonic() < deadline:
        time.sleep(0.2)
        problems = disagreements(brokers, topics, expected_partitions)
    assert not problems, problems[:10]


def test_brokers_creating_the_same_topics_at_once_agree_on_one_acting_leader_per_partition(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, cluster_factory: Callable[..., BrokerCluster]
) -> None:
    for run in range(CLUSTERS[backend]):
        directory = tmp_path / f"cluster-{run}"
        directory.mkdir()
        url = coordination_url(request, backend, directory)
        cluster = cluster_factory(directory, 3, url, {"offsets.topic.num.partitions": "12"}).start()
        answers = at_once(cluster.brokers, find_coordinator)
        assert not [a for a in answers if isinstance(a, Exception)], answers
        wait_for_agreement(cluster.brokers, [OFFSETS_TOPIC], 12)
        for round_ in range(ROUNDS):
            names = [f"race-{run}-{round_}-{i}" for i in range(TOPICS_PER_ROUND)]
            results = at_once(cluster.brokers, lambda client, names=names: create_topics(client, names, 6, 3))
            created = [
                sum(1 for outcome in result.values() if outcome.error_code == ErrorCode.none)
                for result in results
                if not isinstance(result, Exception)
            ]
            assert sum(created) == TOPICS_PER_ROUND, f"each topic created exactly once: {results}"
            wait_for_agreement(cluster.brokers, names, 6 * TOPICS_PER_ROUND)
        cluster.stop()


def test_brokers_growing_one_topic_at_once_grow_it_once(
    request: pytest.FixtureRequest, tmp_path: Path, cluster_factory: Callable[..., BrokerCluster]
) -> None:
    """As Kafka's controller would run them one after the other: one succeeds, the others see the new count."""
    cluster = cluster_factory(tmp_path, 3, coordination_url(request, "sqlite", tmp_path)).start()
    with RawKafkaClient.connect("127.0.0.1", cluster.brokers[0].port) as client:
        assert create_topics(client, ["growing"], 3, 3)["growing"].error_code == ErrorCode.none
    wait_for_agreement(cluster.brokers, ["growing"], 3)
    for count in (6, 9):
        results = at_once(cluster.brokers, lambda client, count=count: create_partitions(client, "growing", count))
        codes = sorted(int(result) if not isinstance(result, Exception) else -1 for result in results)
        assert codes == sorted([ErrorCode.none, ErrorCode.invalid_partitions, ErrorCode.invalid_partitions]), results
        wait_for_agreement(cluster.brokers, ["growing"], count)


def create_partitions(client: RawKafkaClient, topic: str, count: int) -> ErrorCode:
    request = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=topic, count=count, assignments=None),),
        timeout=timeout_ms(10_000),
        validate_only=False,
    )
    (result,) = client.request(CREATE_PARTITIONS, 3, request).results
    return ErrorCode(result.error_code)
