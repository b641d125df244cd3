"""Responses rewritten so that every node id, host and port a client sees is a proxy node's.

A client that learnt a real broker's address would try to reach it (and fail, or bypass the
proxy), so every field that carries one is rewritten, for every version the proxy advertises;
``REWRITTEN`` lists them per API and a test walks Kafka's schemas for any it misses. Choices are
deterministic (``ProxyNodes.pick``), so every proxy node gives every client the same answer:

- a partition's leader is the node picked by (topic id, partition) in the real leader's rack;
  its replicas and ISR are as many distinct nodes, the leader's first; offline replicas are
  empty (a proxy node is never offline while it answers);
- the controller is the node picked by the real controller's id, a coordinator the node picked
  by its key, both in the real broker's rack;
- broker lists are the up proxy nodes;
- a reassignment's replicas are the partition's proxy nodes as Metadata names them, and the
  brokers it adds or removes the proxy nodes in their places;
- Produce and Fetch answers name a new leader (KIP-951 ``current_leader`` and ``node_endpoints``)
  as the partition's proxy node, and a preferred read replica (KIP-392) is never named: the
  proxy itself sends every fetch to the leader.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable
from typing import Any

from barnabas.protocol import make, response_class

from .cluster_view import ClusterView
from .nodes import ProxyNode, ProxyNodes

__all__ = [
    "REWRITTEN",
    "node_of_broker",
    "partition_key",
    "rewrite_describe_cluster",
    "rewrite_describe_topic_partitions",
    "rewrite_fetch",
    "rewrite_find_coordinator",
    "rewrite_list_partition_reassignments",
    "rewrite_metadata",
    "rewrite_produce",
]

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLUSTER = 0, 1, 3, 10, 46, 60
DESCRIBE_TOPIC_PARTITIONS = 75

#: For each API whose responses carry node ids, hosts or ports: the fields (entity.field) rewritten,
#: in the versions the proxy understands (``routes.UNDERSTOOD``; Fetch's ``NodeEndpoint`` is v16+).
REWRITTEN: dict[int, frozenset[str]] = {
    PRODUCE: frozenset(
        {"LeaderIdAndEpoch.leader_id", "NodeEndpoint.node_id", "NodeEndpoint.host", "NodeEndpoint.port"}
    ),
    FETCH: frozenset({"PartitionData.preferred_read_replica", "LeaderIdAndEpoch.leader_id"}),
    METADATA: frozenset(
        {
            "MetadataResponseBroker.node_id",
            "MetadataResponseBroker.host",
            "MetadataResponseBroker.port",
            "MetadataResponse.controller_id",
            "MetadataResponsePartition.leader_id",
            "MetadataResponsePartition.replica_nodes",
            "MetadataResponsePartition.isr_nodes",
            "MetadataResponsePartition.offline_replicas",
        }
    ),
    FIND_COORDINATOR: frozenset(
        {
            "FindCoordinatorResponse.node_id",
            "FindCoordinatorResponse.host",
            "FindCoordinatorResponse.port",
            "Coordinator.node_id",
            "Coordinator.host",
            "Coordinator.port",
        }
    ),
    LIST_PARTITION_REASSIGNMENTS: frozenset(
        {
            "OngoingPartitionReassignment.replicas",
            "OngoingPartitionReassignment.adding_replicas",
            "OngoingPartitionReassignment.removing_replicas",
        }
    ),
    DESCRIBE_CLUSTER: frozenset(
        {
            "DescribeClusterResponse.controller_id",
            "DescribeClusterBroker.broker_id",
            "DescribeClusterBroker.host",
            "DescribeClusterBroker.port",
        }
    ),
    DESCRIBE_TOPIC_PARTITIONS: frozenset(
        {
            "DescribeTopicPartitionsResponsePartition.leader_id",
            "DescribeTopicPartitionsResponsePartition.replica_nodes",
            "DescribeTopicPartitionsResponsePartition.isr_nodes",
            "DescribeTopicPartitionsResponsePartition.eligible_leader_replicas",
            "DescribeTopicPartitionsResponsePartition.last_known_elr",
            "DescribeTopicPartitionsResponsePartition.offline_replicas",
        }
    ),
}

_PARTITION = struct.Struct(">i")


def partition_key(view: ClusterView, topic: str, partition: int) -> bytes:
    return view.topic_key(topic) + _PARTITION.pack(partition)


def _node_of_partition(view: ClusterView, nodes: ProxyNodes, topic: str, partition: int, leader_id: int) -> ProxyNode:
    return nodes.pick(partition_key(view, topic, partition), view.rack_of(leader_id))


def node_of_broker(view: ClusterView, nodes: ProxyNodes, broker_id: int) -> int:
    """The proxy node id standing for broker ``broker_id`` (a negative id as it is)."""
    if broker_id < 0:
        return broker_id
    return nodes.pick(b"broker:%d" % broker_id, view.rack_of(broker_id)).node_id


def _node_entities(cls: type[Any], nodes: Iterable[ProxyNode], id_field: str = "node_id") -> tuple[Any, ...]:
    return tuple(make(cls, **{id_field: n.node_id}, host=n.host, port=n.port, rack=n.rack) for n in nodes)


# -- Metadata, FindCoordinator, DescribeCluster ---------------------------------------------------


def rewrite_metadata(response: Any, version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    broker_cls = response_class(METADATA, version, "MetadataResponseBroker")
    topics = []
    for topic in response.topics:
        partitions = tuple(
            _metadata_partition(p, view, nodes, topic.name) if topic.name is not None else p for p in topic.partitions
        )
        topics.append(dataclasses.replace(topic, partitions=partitions))
    changes: dict[str, Any] = {"brokers": _node_entities(broker_cls, nodes.up()), "topics": tuple(topics)}
    if hasattr(response, "controller_id"):
        changes["controller_id"] = node_of_broker(view, nodes, int(response.controller_id))
    return dataclasses.replace(response, **changes)


def metadata_partition_nodes(
    partition: Any, view: ClusterView, nodes: ProxyNodes, topic: str
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """The proxy nodes a Metadata partition names instead of brokers: its leader, replicas and ISR."""
    leader_id = int(partition.leader_id)
    key = partition_key(view, topic, int(partition.partition_index))
    rack = view.rack_of(leader_id)
    replicas = nodes.spread(key, len(partition.replica_nodes), rack)
    isr = nodes.spread(key, len(partition.isr_nodes), rack)
    leader = replicas[0].node_id if leader_id >= 0 and replicas else -1
    return leader, tuple(n.node_id for n in replicas), tuple(n.node_id for n in isr)


def _metadata_partition(partition: Any, view: ClusterView, nodes: ProxyNodes, topic: str) -> Any:
    leader, replicas, isr = metadata_partition_nodes(partition, view, nodes, topic)
    changes: dict[str, Any] = {"leader_id": leader, "replica_nodes": replicas, "isr_nodes": isr}
    if hasattr(partition, "offline_replicas"):
        changes["offline_replicas"] = ()
    return dataclasses.replace(partition, **changes)


def rewrite_find_coordinator(
    response: Any, version: int, view: ClusterView, nodes: ProxyNodes, *, key_type: int, keys: list[str]
) -> Any:
    """Remember each key's real coordinator, then answer with the proxy node picked for the key."""
    if version < 4:
        (key,) = keys
        node = _coordinator_node(view, nodes, key_type, key, response)
        if node is None:
            return response
        return dataclasses.replace(response, node_id=node.node_id, host=node.host, port=node.port)
    coordinators = []
    for answer in response.coordinators:
        node = _coordinator_node(view, nodes, key_type, answer.key, answer)
        if node is None:
            coordinators.append(answer)
        else:
            coordinators.append(dataclasses.replace(answer, node_id=node.node_id, host=node.host, port=node.port))
    return dataclasses.replace(response, coordinators=tuple(coordinators))


def _coordinator_node(view: ClusterView, nodes: ProxyNodes, key_type: int, key: str, answer: Any) -> ProxyNode | None:
    broker_id = int(answer.node_id)
    if int(answer.error_code) != 0 or broker_id < 0:
        view.forget_coordinator(key_type, key)
        return None
    view.coordinators[(key_type, key)] = broker_id
    return nodes.pick(b"coordinator:%d:" % key_type + key.encode(), view.rack_of(broker_id))


def rewrite_describe_cluster(response: Any, version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    broker_cls = response_class(DESCRIBE_CLUSTER, version, "DescribeClusterBroker")
    return dataclasses.replace(
        response,
        brokers=_node_entities(broker_cls, nodes.up(), "broker_id"),
        controller_id=node_of_broker(view, nodes, int(response.controller_id)),
    )


def rewrite_describe_topic_partitions(response: Any, version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    """Leader, replicas and ISR as Metadata names them; an eligible leader replica (KIP-966) as the proxy
    node in its broker's place among the replicas (left out if it has none); no offline replicas.
    """
    topics = []
    for topic in response.topics:
        partitions = []
        for p in topic.partitions:
            leader, replicas, isr = metadata_partition_nodes(p, view, nodes, topic.name)
            placed = dict(zip(p.replica_nodes, replicas, strict=False))
            partitions.append(
                dataclasses.replace(
                    p,
                    leader_id=leader,
                    replica_nodes=replicas,
                    isr_nodes=isr,
                    eligible_leader_replicas=_placed(p.eligible_leader_replicas, placed),
                    last_known_elr=_placed(p.last_known_elr, placed),
                    offline_replicas=(),
                )
            )
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    return dataclasses.replace(response, topics=tuple(topics))


def _placed(brokers: tuple[int, ...] | None, placed: dict[int, int]) -> tuple[int, ...] | None:
    """Each of ``brokers`` as the proxy node in its place (``placed``), those without one left out; null stays null."""
    return None if brokers is None else tuple(placed[b] for b in brokers if b in placed)


def rewrite_list_partition_reassignments(response: Any, version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    """Replicas as Metadata names them; each added or removed broker as the proxy node in its place.

    A broker past the number of up proxy nodes has no place: it is left out of the lists.
    """
    topics = []
    for topic in response.topics:
        partitions = []
        for p in topic.partitions:
            info = view.partitions.get((topic.name, int(p.partition_index)))
            rack = view.rack_of(info.leader_id) if info is not None else None
            key = partition_key(view, topic.name, int(p.partition_index))
            placed = dict(zip(p.replicas, (n.node_id for n in nodes.spread(key, len(p.replicas), rack)), strict=False))
            partitions.append(
                dataclasses.replace(
                    p,
                    replicas=tuple(placed.values()),
                    adding_replicas=_placed(p.adding_replicas, placed),
                    removing_replicas=_placed(p.removing_replicas, placed),
                )
            )
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    return dataclasses.replace(response, topics=tuple(topics))


# -- Produce and Fetch ------------------------------------------------------------------------------


def rewrite_produce(response: Any, version: int, view: ClusterView, nodes: ProxyNodes) -> Any:
    if version < 10:
        return response
    named: dict[int, ProxyNode] = {}
    topics = []
    for topic in response.responses:
        partitions = []
        for answer in topic.partition_responses:
            leader = answer.current_leader
            if int(leader.leader_id) < 0:
                partitions.append(answer)
                continue
            node = _node_of_partition(view, nodes, topic.name, int(answer.index), int(leader.leader_id))
            named[node.node_id] = node
            partitions.append(
                dataclasses.replace(answer, current_leader=dataclasses.replace(leader, leader_id=node.node_id))
            )
        topics.append(dataclasses.replace(topic, partition_responses=tuple(partitions)))
    endpoint_cls = response_class(PRODUCE, version, "NodeEndpoint")
    endpoints = _node_entities(endpoint_cls, sorted(named.values(), key=lambda n: n.node_id)) if named else ()
    return dataclasses.replace(response, responses=tuple(topics), node_endpoints=endpoints)


def rewrite_fetch(
    response: Any, version: int, view: ClusterView, nodes: ProxyNodes, topic_name: Callable[[Any], str | None]
) -> Any:
    """``topic_name`` names a response topic (by name up to v12, by topic id from v13)."""
    if version < 11:
        return response
    named: dict[int, ProxyNode] = {}
    topics = []
    for topic in response.responses:
        name = topic_name(topic)
        partitions = []
        for p in topic.partitions:
            changes: dict[str, Any] = {"preferred_read_replica": -1}
            leader = getattr(p, "current_leader", None)
            if leader is not None and int(leader.leader_id) >= 0 and name is not None:
                node = _node_of_partition(view, nodes, name, int(p.partition_index), int(leader.leader_id))
                named[node.node_id] = node
                changes["current_leader"] = dataclasses.replace(leader, leader_id=node.node_id)
            partitions.append(dataclasses.replace(p, **changes))
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    changes = {"responses": tuple(topics)}
    if hasattr(response, "node_endpoints"):
        endpoint_cls = response_class(FETCH, version, "NodeEndpoint")
        changes["node_endpoints"] = (
            _node_entities(endpoint_cls, sorted(named.values(), key=lambda n: n.node_id)) if named else ()
        )
    return dataclasses.replace(response, **changes)
