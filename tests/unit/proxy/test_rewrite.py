"""Answers rewritten so that every node id, host and port a client reads is a proxy node's.

The brokers' answers are encoded and decoded as the proxy reads them, rewritten, and encoded and
decoded again as the client reads them. The cluster (``wire.py``): brokers 101 (rack r1), 102 and
103 (r2), controller 102; proxy nodes 0 and 1 in r1, 2 and 3 in r2.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from barnabas.protocol import ErrorCode, encode_response, make, response_class
from barnabas.proxy.cluster_view import ClusterView
from barnabas.proxy.nodes import ProxyNode, ProxyNodes
from barnabas.proxy.rewrite import (
    rewrite_describe_cluster,
    rewrite_describe_topic_partitions,
    rewrite_fetch,
    rewrite_find_coordinator,
    rewrite_list_partition_reassignments,
    rewrite_metadata,
    rewrite_produce,
)
from barnabas.proxy.routes import UNDERSTOOD

from .wire import (
    BROKER_HOSTS,
    BROKER_PORTS,
    BROKERS,
    CONTROLLER,
    METADATA,
    PROXY_IDS,
    PROXY_PEERS,
    R1_NODES,
    R2_NODES,
    TOPICS,
    cluster_view,
    metadata_response,
    proxy_nodes,
    response_over_wire,
)

PRODUCE, FETCH, FIND_COORDINATOR, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLUSTER = 0, 1, 10, 46, 60
DESCRIBE_TOPIC_PARTITIONS = 75
GROUP, TRANSACTION = 0, 1
RACK_NODES = {"r1": R1_NODES, "r2": R2_NODES}
#: Every (topic, partition) of the cluster with a leader, and that leader.
LED = {(name, index): leader for name, (_, ps) in TOPICS.items() for index, leader, _, _ in ps if leader >= 0}


def in_rack_of(broker_id: int) -> set[int]:
    """The proxy node ids in the rack of real broker ``broker_id``."""
    return RACK_NODES[BROKERS[broker_id][2]]


def versions(api_key: int, low: int | None = None) -> range:
    first, last = UNDERSTOOD[api_key]
    return range(first if low is None else max(first, low), last + 1)


def as_client_reads(api_key: int, version: int, response: Any) -> Any:
    return response_over_wire(api_key, version, response, correlation_id=11)


def endpoints(nodes: list[ProxyNode] | tuple[ProxyNode, ...]) -> list[tuple[int, str, int]]:
    return [(n.node_id, n.host, n.port) for n in nodes]


def rewritten_metadata(version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    received = response_over_wire(METADATA, version, metadata_response(version, offline=(103,)))
    return as_client_reads(METADATA, version, rewrite_metadata(received, version, view, nodes))


def metadata_partitions(view: ClusterView, nodes: ProxyNodes) -> dict[tuple[str, int], Any]:
    response = rewritten_metadata(UNDERSTOOD[METADATA][1], view, nodes)
    return {(t.name, int(p.partition_index)): p for t in response.topics for p in t.partitions}


def metadata_leaders(view: ClusterView, nodes: ProxyNodes) -> dict[tuple[str, int], int]:
    return {key: int(p.leader_id) for key, p in metadata_partitions(view, nodes).items()}


# -- Metadata -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(METADATA))
def test_metadata_brokers_are_the_up_proxy_nodes(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes("proxy-a")
    nodes.set_up([0, 2, 3])
    response = rewritten_metadata(version, view, nodes)
    assert endpoints(response.brokers) == [(0, "proxy-a", 9192), (2, "proxy-c", 9192), (3, "proxy-d", 9192)]
    if version >= 1:
        assert [b.rack for b in response.brokers] == ["r1", "r2", "r2"]
    assert not {b.host for b in response.brokers} & BROKER_HOSTS
    assert not {b.port for b in response.brokers} & BROKER_PORTS


@pytest.mark.parametrize("version", versions(METADATA))
def test_metadata_partitions_name_proxy_nodes_leader_first(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes("proxy-b")
    response = rewritten_metadata(version, view, nodes)
    assert [t.name for t in response.topics] == list(TOPICS)
    for topic in response.topics:
        real = {index: (leader, replicas, isr) for index, leader, replicas, isr in TOPICS[topic.name][1]}
        assert sorted(int(p.partition_index) for p in topic.partitions) == sorted(real)
        for p in topic.partitions:
            leader, replicas, isr = real[int(p.partition_index)]
            where = (topic.name, p.partition_index)
            assert len(p.replica_nodes) == len(replicas), where
            assert len(set(p.replica_nodes)) == len(p.replica_nodes), where
            assert set(p.replica_nodes) <= PROXY_IDS, where
            assert tuple(p.isr_nodes) == tuple(p.replica_nodes[: len(isr)]), where
            if leader < 0:
                assert p.leader_id == -1, where
            else:
                assert p.leader_id in in_rack_of(leader), where
                assert p.replica_nodes[0] == p.leader_id, where
            if version >= 5:
                assert p.offline_replicas == (), where  # the broker said 103 was offline
    if version >= 1:
        assert response.controller_id in in_rack_of(CONTROLLER)


def test_metadata_replicas_are_capped_at_the_up_proxy_nodes() -> None:
    view, nodes = cluster_view(), proxy_nodes("proxy-a")
    nodes.set_up([0, 2])
    orders_0 = metadata_partitions(view, nodes)[("orders", 0)]
    assert sorted(orders_0.replica_nodes) == [0, 2]  # three real replicas, two proxy nodes up


def test_metadata_controller_unknown_stays_unknown() -> None:
    view, nodes = cluster_view(), proxy_nodes()
    version = UNDERSTOOD[METADATA][1]
    received = response_over_wire(METADATA, version, metadata_response(version))
    no_controller = dataclasses.replace(received, controller_id=-1)
    assert as_client_reads(METADATA, version, rewrite_metadata(no_controller, version, view, nodes)).controller_id == -1


@pytest.mark.parametrize("version", [1, 12])
def test_metadata_is_the_same_on_every_proxy_node(version: int) -> None:
    """Every proxy node (its own address, the peers listed in another order) answers byte for byte alike."""
    answers = set()
    for me, peers in [("proxy-a", PROXY_PEERS), ("proxy-d", list(reversed(PROXY_PEERS))), ("proxy-b", PROXY_PEERS)]:
        rewritten = rewrite_metadata(metadata_response(version), version, cluster_view(), proxy_nodes(me, peers))
        answers.add(encode_response(5, rewritten))
    assert len(answers) == 1


# -- FindCoordinator ------------------------------------------------------------------------------


def coordinator_answer(version: int, node_id: int, code: ErrorCode = ErrorCode.none) -> Any:
    host, port, _ = BROKERS.get(node_id, ("", -1, None))
    return make(
        response_class(FIND_COORDINATOR, version),
        throttle_time=datetime.timedelta(0),
        error_code=code,
        error_message=None,
        node_id=node_id,
        host=host,
        port=port,
    )


@pytest.mark.parametrize("version", range(UNDERSTOOD[FIND_COORDINATOR][0], 4))
def test_find_coordinator_v0_to_v3_names_a_proxy_node_and_remembers_the_broker(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes()
    key_type = TRANSACTION if version >= 1 else GROUP
    received = response_over_wire(FIND_COORDINATOR, version, coordinator_answer(version, 103))
    answer = as_client_reads(
        FIND_COORDINATOR,
        version,
        rewrite_find_coordinator(received, version, view, nodes, key_type=key_type, keys=["app-1"]),
    )
    assert answer.node_id in in_rack_of(103)
    node = nodes.nodes[answer.node_id]
    assert (answer.host, answer.port) == (node.host, node.port)
    assert view.coordinators == {(key_type, "app-1"): 103}

    failed = response_over_wire(
        FIND_COORDINATOR, version, coordinator_answer(version, -1, ErrorCode.coordinator_not_available)
    )
    unchanged = rewrite_find_coordinator(failed, version, view, nodes, key_type=key_type, keys=["app-1"])
    assert unchanged == failed
    assert view.coordinators == {}


@pytest.mark.parametrize("version", versions(FIND_COORDINATOR, low=4))
def test_find_coordinator_v4_up_names_a_proxy_node_per_key(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes()
    view.coordinators[(GROUP, "group-b")] = 102  # learnt earlier; the broker now says it is not available
    coordinator_cls = response_class(FIND_COORDINATOR, version, "Coordinator")
    answers = (
        make(coordinator_cls, key="group-a", node_id=101, host=BROKERS[101][0], port=BROKERS[101][1],
             error_code=ErrorCode.none, error_message=None),
        make(coordinator_cls, key="group-b", node_id=-1, host="", port=-1,
             error_code=ErrorCode.coordinator_not_available, error_message=None),
        make(coordinator_cls, key="group-c", node_id=102, host=BROKERS[102][0], port=BROKERS[102][1],
             error_code=ErrorCode.none, error_message=None),
    )  # fmt: skip
    response = make(
        response_class(FIND_COORDINATOR, version), throttle_time=datetime.timedelta(0), coordinators=answers
    )
    received = response_over_wire(FIND_COORDINATOR, version, response)
    keys = ["group-a", "group-b", "group-c"]
    client_sees = as_client_reads(
        FIND_COORDINATOR, version, rewrite_find_coordinator(received, version, view, nodes, key_type=GROUP, keys=keys)
    )
    a, b, c = client_sees.coordinators
    assert [a.key, b.key, c.key] == keys
    assert a.node_id in in_rack_of(101)
    assert c.node_id in in_rack_of(102)
    for coordinator in (a, c):
        node = nodes.nodes[coordinator.node_id]
        assert (coordinator.host, coordinator.port) == (node.host, node.port)
    assert (b.node_id, b.host, b.port, b.error_code) == (-1, "", -1, ErrorCode.coordinator_not_available)
    assert view.coordinators == {(GROUP, "group-a"): 101, (GROUP, "group-c"): 102}


def test_find_coordinator_names_the_same_node_on_every_proxy_node() -> None:
    version = UNDERSTOOD[FIND_COORDINATOR][0]
    everyone = [proxy_nodes(me) for me, _, _ in PROXY_PEERS]
    everyone.append(proxy_nodes("proxy-c", list(reversed(PROXY_PEERS))))
    for broker in BROKERS:
        for group in (f"group-{i}" for i in range(20)):
            chosen = set()
            for nodes in everyone:
                answer = rewrite_find_coordinator(
                    coordinator_answer(version, broker), version, cluster_view(), nodes, key_type=GROUP, keys=[group]
                )
                chosen.add((answer.node_id, answer.host, answer.port))
            assert len(chosen) == 1, (broker, group, chosen)


# -- DescribeCluster -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(DESCRIBE_CLUSTER))
def test_describe_cluster_lists_the_up_proxy_nodes_and_maps_the_controller(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes("proxy-c")
    nodes.set_up([1, 2])
    broker_cls = response_class(DESCRIBE_CLUSTER, version, "DescribeClusterBroker")
    response = make(
        response_class(DESCRIBE_CLUSTER, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id="cluster-x",
        controller_id=CONTROLLER,
        brokers=tuple(
            make(broker_cls, broker_id=b, host=host, port=port, rack=rack) for b, (host, port, rack) in BROKERS.items()
        ),
        cluster_authorized_operations=-(2**31),
    )
    received = response_over_wire(DESCRIBE_CLUSTER, version, response)
    client_sees = as_client_reads(DESCRIBE_CLUSTER, version, rewrite_describe_cluster(received, version, view, nodes))
    assert [(b.broker_id, b.host, b.port, b.rack) for b in client_sees.brokers] == [
        (1, "proxy-b", 9192, "r1"),
        (2, "proxy-c", 9192, "r2"),
    ]
    assert client_sees.controller_id == 2  # the only up node in the controller's rack
    assert client_sees.cluster_id == "cluster-x"


# -- ListPartitionReassignments --------------------------------------------------------------------


def reassignments(version: int) -> Any:
    """orders/0 moves from [101, 102] to [102, 103]; orders/1 from [102, 101] to [102, 103]."""
    partition_cls = response_class(LIST_PARTITION_REASSIGNMENTS, version, "OngoingPartitionReassignment")
    partitions = (
        make(partition_cls, partition_index=0, replicas=(101, 102, 103), adding_replicas=(103,),
             removing_replicas=(101,)),
        make(partition_cls, partition_index=1, replicas=(102, 103, 101), adding_replicas=(103,),
             removing_replicas=(101,)),
    )  # fmt: skip
    topic_cls = response_class(LIST_PARTITION_REASSIGNMENTS, version, "OngoingTopicReassignment")
    return make(
        response_class(LIST_PARTITION_REASSIGNMENTS, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        topics=(make(topic_cls, name="orders", partitions=partitions),),
    )


@pytest.mark.parametrize("version", versions(LIST_PARTITION_REASSIGNMENTS))
def test_list_partition_reassignments_names_the_partitions_proxy_nodes(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes()
    received = response_over_wire(LIST_PARTITION_REASSIGNMENTS, version, reassignments(version))
    rewritten = rewrite_list_partition_reassignments(received, version, view, nodes)
    orders_0, orders_1 = as_client_reads(LIST_PARTITION_REASSIGNMENTS, version, rewritten).topics[0].partitions
    metadata = metadata_partitions(view, nodes)
    for partition, (first, second, third) in [(orders_0, (0, 1, 2)), (orders_1, (2, 0, 1))]:
        replicas = tuple(metadata[("orders", partition.partition_index)].replica_nodes)
        assert tuple(partition.replicas) == replicas  # as Metadata names them
        placed = dict(zip((101, 102, 103), (replicas[first], replicas[second], replicas[third]), strict=True))
        assert tuple(partition.adding_replicas) == (placed[103],)
        assert tuple(partition.removing_replicas) == (placed[101],)


def test_list_partition_reassignments_leaves_out_brokers_without_a_proxy_node() -> None:
    view, nodes = cluster_view(), proxy_nodes()
    nodes.set_up([0, 2])
    version = UNDERSTOOD[LIST_PARTITION_REASSIGNMENTS][1]
    orders_0, orders_1 = (
        rewrite_list_partition_reassignments(reassignments(version), version, view, nodes).topics[0].partitions
    )
    assert sorted(orders_0.replicas) == sorted(orders_1.replicas) == [0, 2]
    assert orders_0.adding_replicas == ()  # 103, third of three replicas: there is no third proxy node
    assert orders_0.removing_replicas == (orders_0.replicas[0],)
    assert orders_1.adding_replicas == (orders_1.replicas[1],)
    assert orders_1.removing_replicas == ()  # 101, third of three


def topic_partitions_answer(eligible: dict[tuple[str, int], tuple[int, ...]]) -> Any:
    """The brokers' DescribeTopicPartitions answer for the cluster (ELRs as given), 103 offline."""
    partition_cls = response_class(DESCRIBE_TOPIC_PARTITIONS, 0, "DescribeTopicPartitionsResponsePartition")
    topic_cls = response_class(DESCRIBE_TOPIC_PARTITIONS, 0, "DescribeTopicPartitionsResponseTopic")
    return make(
        response_class(DESCRIBE_TOPIC_PARTITIONS, 0),
        throttle_time=datetime.timedelta(0),
        next_cursor=None,
        topics=tuple(
            make(topic_cls, error_code=ErrorCode.none, name=name, topic_id=topic_id, is_internal=False,
                 topic_authorized_operations=-2147483648, partitions=tuple(
                     make(partition_cls, error_code=ErrorCode.none, partition_index=index, leader_id=leader,
                          leader_epoch=4, replica_nodes=tuple(replicas), isr_nodes=tuple(isr),
                          eligible_leader_replicas=eligible.get((name, index), ()),
                          last_known_elr=eligible.get((name, index), ())[:1],
                          offline_replicas=tuple(r for r in replicas if r == 103))
                     for index, leader, replicas, isr in partitions))
            for name, (topic_id, partitions) in TOPICS.items()
        ),
    )  # fmt: skip


def test_describe_topic_partitions_names_the_nodes_metadata_names() -> None:
    view, nodes = cluster_view(), proxy_nodes()
    eligible = {("orders", 1): (101,), ("orders", 3): (102, 101)}
    received = response_over_wire(DESCRIBE_TOPIC_PARTITIONS, 0, topic_partitions_answer(eligible))
    rewritten = rewrite_describe_topic_partitions(received, 0, view, nodes)
    answer = as_client_reads(DESCRIBE_TOPIC_PARTITIONS, 0, rewritten)
    metadata = metadata_partitions(view, nodes)
    for topic in answer.topics:
        for p in topic.partitions:
            named = metadata[(topic.name, p.partition_index)]
            assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (
                named.leader_id, tuple(named.replica_nodes), tuple(named.isr_nodes),
            )  # fmt: skip
            assert p.offline_replicas == ()
            ids = {p.leader_id, *p.replica_nodes, *p.isr_nodes, *p.eligible_leader_replicas, *p.last_known_elr}
            assert ids <= set(PROXY_IDS) | {-1}, f"{topic.name}/{p.partition_index} names a broker: {ids}"
    orders = {p.partition_index: p for p in answer.topics[0].partitions}
    # An eligible replica is the proxy node in its broker's place among the partition's replicas.
    assert orders[1].eligible_leader_replicas == (orders[1].replica_nodes[2],)  # 101, third of (102, 103, 101)
    assert orders[3].eligible_leader_replicas == (orders[3].replica_nodes[1], orders[3].replica_nodes[0])
    assert orders[3].last_known_elr == (orders[3].replica_nodes[1],)


# -- Produce and Fetch ------------------------------------------------------------------------------

#: The answer's partitions: each led by its leader in the view, but events/1 now led by 103 (r2).
NEW_LEADERS = {**LED, ("events", 1): 103}


def produce_answer(version: int) -> Any:
    """Every partition answers NOT_LEADER_OR_FOLLOWER naming its leader, but orders/3 (no leader) and orders/0 (ok)."""
    leader_cls = response_class(PRODUCE, version, "LeaderIdAndEpoch")
    partition_cls = response_class(PRODUCE, version, "PartitionProduceResponse")
    endpoint_cls = response_class(PRODUCE, version, "NodeEndpoint")

    def partition(name: str, index: int) -> Any:
        leader = NEW_LEADERS.get((name, index), -1) if (name, index) != ("orders", 0) else -1
        code = ErrorCode.not_leader_or_follower if leader >= 0 else ErrorCode.none
        return make(
            partition_cls, index=index, error_code=code, base_offset=-1, log_start_offset=0, record_errors=(),
            error_message=None, current_leader=make(leader_cls, leader_id=leader, leader_epoch=9),
        )  # fmt: skip

    topic_cls = response_class(PRODUCE, version, "TopicProduceResponse")
    return make(
        response_class(PRODUCE, version),
        responses=tuple(
            make(topic_cls, name=name, partition_responses=tuple(partition(name, index) for index, *_ in partitions))
            for name, (_, partitions) in TOPICS.items()
        ),
        throttle_time=datetime.timedelta(0),
        node_endpoints=tuple(
            make(endpoint_cls, node_id=b, host=host, port=port, rack=rack) for b, (host, port, rack) in BROKERS.items()
        ),
    )


@pytest.mark.parametrize("version", versions(PRODUCE, low=10))
def test_produce_names_new_leaders_as_proxy_nodes(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes()
    received = response_over_wire(PRODUCE, version, produce_answer(version))
    client_sees = as_client_reads(PRODUCE, version, rewrite_produce(received, version, view, nodes))
    leaders = {
        (t.name, p.index): int(p.current_leader.leader_id) for t in client_sees.responses for p in t.partition_responses
    }
    assert leaders.pop(("orders", 0)) == -1
    assert leaders.pop(("orders", 3)) == -1
    assert leaders.pop(("events", 1)) in in_rack_of(103)
    metadata = metadata_leaders(view, nodes)
    assert leaders == {key: metadata[key] for key in leaders}  # what Metadata names too
    named = sorted({p.current_leader.leader_id for t in client_sees.responses for p in t.partition_responses} - {-1})
    assert [(e.node_id, e.host, e.port, e.rack) for e in client_sees.node_endpoints] == [
        (n.node_id, n.host, n.port, n.rack) for n in (nodes.nodes[i] for i in named)
    ]


@pytest.mark.parametrize("version", versions(PRODUCE)[:3])
def test_produce_before_v10_is_left_alone(version: int) -> None:
    response = make(response_class(PRODUCE, version), responses=(), throttle_time=datetime.timedelta(0))
    assert rewrite_produce(response, version, cluster_view(), proxy_nodes()) is response


def fetch_answer(version: int) -> Any:
    """Every partition names broker 103 as preferred read replica; from v12 each names its leader, as Produce's."""
    partition_cls = response_class(FETCH, version, "PartitionData")
    leader_cls = response_class(FETCH, version, "LeaderIdAndEpoch") if version >= 12 else None

    def partition(name: str, index: int) -> Any:
        leader = NEW_LEADERS.get((name, index), -1) if (name, index) != ("orders", 0) else -1
        extra = {} if leader_cls is None else {"current_leader": make(leader_cls, leader_id=leader, leader_epoch=9)}
        return make(
            partition_cls, partition_index=index, error_code=ErrorCode.none, high_watermark=50, last_stable_offset=50,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=103, records=None, **extra,
        )  # fmt: skip

    return make(
        response_class(FETCH, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            make(
                response_class(FETCH, version, "FetchableTopicResponse"),
                topic=name,
                partitions=tuple(partition(name, index) for index, *_ in partitions),
            )
            for name, (_, partitions) in TOPICS.items()
        ),
    )


@pytest.mark.parametrize("version", versions(FETCH, low=11))
def test_fetch_names_no_read_replica_and_new_leaders_as_proxy_nodes(version: int) -> None:
    view, nodes = cluster_view(), proxy_nodes()
    received = response_over_wire(FETCH, version, fetch_answer(version))
    rewritten = rewrite_fetch(received, version, view, nodes, lambda topic: topic.topic)
    client_sees = as_client_reads(FETCH, version, rewritten)
    partitions = {(t.topic, p.partition_index): p for t in client_sees.responses for p in t.partitions}
    assert {p.preferred_read_replica for p in partitions.values()} == {-1}
    if version >= 12:
        leaders = {key: int(p.current_leader.leader_id) for key, p in partitions.items()}
        assert leaders.pop(("orders", 0)) == -1
        assert leaders.pop(("orders", 3)) == -1
        assert leaders.pop(("events", 1)) in in_rack_of(103)
        metadata = metadata_leaders(view, nodes)
        assert leaders == {key: metadata[key] for key in leaders}


def test_fetch_before_v11_is_left_alone() -> None:
    version = 10
    response = make(response_class(FETCH, version), throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                    session_id=0, responses=())  # fmt: skip
    assert rewrite_fetch(response, version, cluster_view(), proxy_nodes(), lambda topic: topic.topic) is response
