"""Bytes in and out as the proxy, its clients and its brokers see them, and a cluster to rewrite for.

Every helper goes through the real codec: a request is encoded to a frame and decoded the way
the proxy decodes a client's (or a broker decodes the proxy's), a response is encoded and
decoded the way the proxy reads a broker's answer (or a client reads the proxy's).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Sequence
from typing import Any

from kio.static.primitive import i32Timedelta

from barnabas.protocol import (
    ErrorCode,
    ProduceRequestData,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    make,
    request_class,
    response_class,
)
from barnabas.proxy.cluster_view import ClusterView
from barnabas.proxy.links import BrokerLinks
from barnabas.proxy.nodes import ProxyNodes

PRODUCE, METADATA = 0, 3
CLIENT_ID = "wire-test"


def payload(frame: bytes) -> bytes:
    """The frame after its size prefix (as the frame reader hands it on), checking the prefix."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


def request_over_wire(api_key: int, version: int, body: Any, correlation_id: int = 7) -> Any:
    """``body`` encoded as a client writes it, decoded as the receiving side reads it: the body."""
    request = decode_request(payload(encode_request(api_key, version, correlation_id, CLIENT_ID, body)))
    assert (request.header.api_key, request.header.api_version) == (api_key, version)
    assert request.header.correlation_id == correlation_id
    return request.body


def produce_entity(data: ProduceRequestData, version: int) -> Any:
    """The proxy's Produce decoding (record views) as kio's entity of ``version`` (records copied).

    kio's Produce is the reference the proxy's zero-copy split is checked against.
    """
    topic_cls = request_class(PRODUCE, version, "TopicProduceData")
    partition_cls = request_class(PRODUCE, version, "PartitionProduceData")
    return request_class(PRODUCE, version)(
        transactional_id=data.transactional_id,
        acks=data.acks,
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=data.timeout_ms)),
        topic_data=tuple(
            topic_cls(
                name=t.name,
                partition_data=tuple(
                    partition_cls(index=p.index, records=None if p.records is None else bytes(p.records))
                    for p in t.partition_data
                ),
            )
            for t in data.topic_data
        ),
    )


def response_over_wire(api_key: int, version: int, response: Any, correlation_id: int = 7) -> Any:
    """``response`` encoded as its sender writes it, decoded as the receiving side reads it."""
    assert type(response) is response_class(api_key, version), type(response)
    received_id, body = decode_response(api_key, version, payload(encode_response(correlation_id, response)))
    assert received_id == correlation_id
    return body


# -- a cluster: three brokers in two racks, four proxy nodes in the same racks --------------------
# Broker ids (101-103) are none of the proxy node ids (0-3): a real id left in an answer shows.

BROKERS = {
    101: ("broker-1.internal", 9092, "r1"),
    102: ("broker-2.internal", 9093, "r2"),
    103: ("broker-3.internal", 9094, "r2"),
}
CONTROLLER = 102
ORDERS_ID = uuid.UUID("0b8f5a4e-6c1d-4d0e-9a51-2f3c4d5e6f70")
EVENTS_ID = uuid.UUID("5c2d9e1f-7a3b-4c5d-8e9f-0a1b2c3d4e5f")
#: topic -> (topic id, [(partition, leader, replicas, isr)]); orders/3 has no leader.
TOPICS: dict[str, tuple[uuid.UUID, list[tuple[int, int, list[int], list[int]]]]] = {
    "orders": (
        ORDERS_ID,
        [
            (0, 101, [101, 102, 103], [101, 102, 103]),
            (1, 102, [102, 103, 101], [102, 103]),
            (2, 103, [103, 101], [103, 101]),
            (3, -1, [101, 102], []),
        ],
    ),
    "events": (EVENTS_ID, [(0, 102, [102, 101], [102, 101]), (1, 101, [101], [101]), (2, 103, [103, 102], [103])]),
}
PROXY_PEERS = [("proxy-a", 9192, "r1"), ("proxy-b", 9192, "r1"), ("proxy-c", 9192, "r2"), ("proxy-d", 9192, "r2")]
PROXY_IDS = {0, 1, 2, 3}
R1_NODES, R2_NODES = {0, 1}, {2, 3}
BROKER_HOSTS = {host for host, _, _ in BROKERS.values()}
BROKER_PORTS = {port for _, port, _ in BROKERS.values()}


Topics = dict[str, tuple[uuid.UUID, list[tuple[int, int, list[int], list[int]]]]]


def metadata_response(
    version: int, offline: tuple[int, ...] = (), topic_ids: bool = True, topics: Topics = TOPICS
) -> Any:
    """The brokers' Metadata answer for the cluster above (or ``topics`` in it), in ``version``'s layout
    (topic ids zero if not asked)."""
    broker_cls = response_class(METADATA, version, "MetadataResponseBroker")
    topic_cls = response_class(METADATA, version, "MetadataResponseTopic")
    partition_cls = response_class(METADATA, version, "MetadataResponsePartition")
    answered = tuple(
        make(
            topic_cls,
            error_code=ErrorCode.none,
            name=name,
            topic_id=topic_id if topic_ids else uuid.UUID(int=0),
            is_internal=False,
            partitions=tuple(
                make(
                    partition_cls,
                    error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
                    partition_index=index,
                    leader_id=leader,
                    leader_epoch=7,
                    replica_nodes=tuple(replicas),
                    isr_nodes=tuple(isr),
                    offline_replicas=offline,
                )
                for index, leader, replicas, isr in partitions
            ),
            topic_authorized_operations=-(2**31),
        )
        for name, (topic_id, partitions) in topics.items()
    )
    brokers = tuple(
        make(broker_cls, node_id=broker_id, host=host, port=port, rack=rack)
        for broker_id, (host, port, rack) in BROKERS.items()
    )
    return make(
        response_class(METADATA, version),
        throttle_time=datetime.timedelta(0),
        brokers=brokers,
        cluster_id="cluster-x",
        controller_id=CONTROLLER,
        topics=answered,
        cluster_authorized_operations=-(2**31),
    )


def cluster_view(topics: Topics = TOPICS) -> ClusterView:
    """A view of the cluster above (or ``topics`` in it), taken from its Metadata v12 answer (no broker is
    contacted)."""
    links = BrokerLinks(client_id=CLIENT_ID, connect_timeout_s=1.0, request_timeout_s=1.0)
    view = ClusterView(bootstrap=[("broker-1.internal", 9092)], links=links)
    view.apply(response_over_wire(METADATA, 12, metadata_response(12, topics=topics)))
    return view


def proxy_nodes(me: str = "proxy-a", peers: Sequence[tuple[str, int, str | None]] = PROXY_PEERS) -> ProxyNodes:
    (own,) = [peer for peer in peers if peer[0] == me]
    return ProxyNodes(own, peers)
