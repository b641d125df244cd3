"""The proxy's answers rewritten: a broker's response decoded, rewritten to name proxy nodes, re-encoded.

Input: one byte picks the API (Produce, Fetch, Metadata, FindCoordinator, ListPartitionReassignments,
DescribeCluster, DescribeTopicPartitions: every API whose answers the proxy rewrites), one byte the version
among those the proxy understands, then the response frame as a broker sends it (after the size prefix). Each goes
the proxy's way: ``fetch_response_names_nodes`` and ``find_fetch_entries`` first for a Fetch (they
never raise), then
``decode_response`` (documented: RemoteProtocolError), ``ClusterView.apply`` for a Metadata answer,
the API's ``rewrite_*``, and ``encode_response``. None of those after the decoder documents an
error, so any is a finding; so is an answer that, re-read as the client reads it, still names a real
broker, a Fetch answer the scan or the splice walk let through that names a node, and entries the
walk found that are not the partitions decoding finds.
"""

from __future__ import annotations

from typing import Any

from barnabas.protocol import (
    RemoteProtocolError,
    decode_response,
    encode_response,
    fetch_response_names_nodes,
    find_fetch_entries,
)
from barnabas.proxy.cluster_view import ClusterView
from barnabas.proxy.links import BrokerLinks
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
from tests.fuzz.harness import Target, attempt
from tests.unit.proxy.wire import BROKERS, PROXY_IDS, cluster_view, proxy_nodes

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLUSTER = 0, 1, 3, 10, 46, 60
DESCRIBE_TOPIC_PARTITIONS = 75
#: Picked by the first byte modulo their number; new ones go last, so the written seeds (first bytes 0 to
#: one less than the APIs then) keep their API.
APIS = (PRODUCE, FETCH, METADATA, FIND_COORDINATOR, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLUSTER)
APIS += (DESCRIBE_TOPIC_PARTITIONS,)

_VIEW = cluster_view()
_NODES = proxy_nodes()


def pick_version(api_key: int, choice: int) -> int:
    low, high = UNDERSTOOD[api_key]
    return low + choice % (high - low + 1)


def _rewrite(api_key: int, version: int, response: Any) -> Any:
    _VIEW.coordinators.clear()
    if api_key == PRODUCE:
        return rewrite_produce(response, version, _VIEW, _NODES)
    if api_key == FETCH:
        return rewrite_fetch(response, version, _VIEW, _NODES, lambda topic: topic.topic)
    if api_key == METADATA:
        ClusterView([("fuzz", 1)], BrokerLinks(client_id="fuzz", connect_timeout_s=1, request_timeout_s=1)).apply(
            response
        )
        return rewrite_metadata(response, version, _VIEW, _NODES)
    if api_key == FIND_COORDINATOR:
        return rewrite_find_coordinator(response, version, _VIEW, _NODES, key_type=0, keys=["group"])
    if api_key == LIST_PARTITION_REASSIGNMENTS:
        return rewrite_list_partition_reassignments(response, version, _VIEW, _NODES)
    if api_key == DESCRIBE_TOPIC_PARTITIONS:
        return rewrite_describe_topic_partitions(response, version, _VIEW, _NODES)
    return rewrite_describe_cluster(response, version, _VIEW, _NODES)


def _named_nodes(api_key: int, response: Any) -> set[int]:
    """The node ids a rewritten answer names where the proxy promises its own nodes."""
    if api_key == METADATA:
        named = {int(b.node_id) for b in response.brokers}
        named |= {int(p.leader_id) for t in response.topics if t.name is not None for p in t.partitions}
        return named
    if api_key == DESCRIBE_CLUSTER:
        return {int(b.broker_id) for b in response.brokers}
    if api_key == DESCRIBE_TOPIC_PARTITIONS:
        return {
            int(node)
            for t in response.topics
            for p in t.partitions
            for node in (p.leader_id, *p.replica_nodes, *p.isr_nodes, *(p.eligible_leader_replicas or ()),
                         *(p.last_known_elr or ()), *p.offline_replicas)
        }  # fmt: skip
    if api_key in (PRODUCE, FETCH):
        return {int(n.node_id) for n in getattr(response, "node_endpoints", ())}
    return set()


def _names_no_node(response: Any) -> bool:
    """A Fetch answer neither names a preferred read replica nor a current leader."""
    for topic in response.responses:
        for partition in topic.partitions:
            if int(getattr(partition, "preferred_read_replica", -1)) != -1:
                return False
            leader = getattr(partition, "current_leader", None)
            if leader is not None and int(leader.leader_id) >= 0:
                return False
    return True


def run(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key = APIS[data[0] % len(APIS)]
    version, payload = pick_version(api_key, data[1]), data[2:]
    scanned_clean = api_key == FETCH and not fetch_response_names_nodes(payload, version)
    entries = find_fetch_entries(payload, version) if api_key == FETCH else None
    decoded = attempt(lambda: decode_response(api_key, version, payload), RemoteProtocolError)
    if decoded is None:
        return
    correlation_id, response = decoded
    if scanned_clean:
        assert _names_no_node(response), "the Fetch scan let an answer naming a node through unrewritten"
    if entries is not None:
        assert _names_no_node(response), "the splice walk let an answer naming a node through unrewritten"
        assert [(name, [e.partition_index for e in found]) for name, found in entries.topics] == [
            (t.topic, [int(p.partition_index) for p in t.partitions]) for t in response.responses
        ], "the splice walk found other partitions than decoding"
    encoded = encode_response(correlation_id, _rewrite(api_key, version, response))
    _, reread = decode_response(api_key, version, encoded[4:])
    named = _named_nodes(api_key, reread) - {-1}
    assert named <= PROXY_IDS, f"a rewritten answer names {named - PROXY_IDS} (real brokers: {set(BROKERS)})"


TARGET = Target("proxy_rewrite", run, __doc__ or "", max_len=4096)
