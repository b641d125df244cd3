"""The proxy's Metadata answer, rewritten and encoded in one pass by the broker's own encoder.

``rewrite.rewrite_metadata`` states the rewrite on kio entities (it is what the rewrite table and
the schema walk check); encoding its result with kio took ~19 ms for 1,000 partitions and the
``dataclasses.replace`` per partition ~8 ms more, about twenty times the broker's own answer. Here
the same answer is built as the hand-written encoder's tuples (``encode_metadata_response``, byte
for byte kio's) from the decoded broker answer; a test holds the two byte-identical for every version.

A broker gives the same answer again and again while nothing changes, and the rewritten answer depends
only on it, the brokers' racks, the topic ids and the proxy nodes: :class:`MetadataAnswers` keeps the
last few, so a repeated answer costs a dictionary lookup instead of a decode, a rewrite and an encode.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from barnabas.protocol import (
    AUTHORIZED_OPERATIONS_OMITTED,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    decode_response,
    encode_metadata_response,
)

from .cluster_view import METADATA, ClusterView
from .nodes import ProxyNodes
from .rewrite import metadata_partition_nodes, node_of_broker

__all__ = ["MetadataAnswers", "encode_metadata_answer"]

NO_TOPIC_ID = uuid.UUID(int=0)
#: Rewritten answers kept (each about as large as the broker's answer: ~50 KB for 1,000 partitions).
ANSWERS_KEPT = 8
_INT32 = struct.Struct(">i")


class MetadataAnswers:
    """Rewritten Metadata answers by the broker answer they came from, while the view and nodes stay as they are."""

    def __init__(self) -> None:
        self._answers: dict[tuple[int, bytes], bytes] = {}
        #: The view and nodes (the objects, and their generations) the kept answers were made from.
        self._made_from: tuple[object, int, object, int] | None = None

    def answer(
        self, correlation_id: int, payload: bytes | memoryview, version: int, view: ClusterView, nodes: ProxyNodes
    ) -> bytes | list[bytes | memoryview]:
        """The client's answer to the broker's ``payload`` (correlation id first), as a frame or its parts."""
        made_from = (view, view.generation, nodes, nodes.generation)
        if made_from != self._made_from:
            self._answers.clear()
            self._made_from = made_from
        key = (version, bytes(memoryview(payload)[4:]))  # everything but the broker's correlation id
        after_header = self._answers.get(key)
        if after_header is not None:
            return [_INT32.pack(len(after_header) + 4), _INT32.pack(correlation_id), after_header]
        _, response = decode_response(METADATA, version, payload)
        frame = encode_metadata_answer(correlation_id, response, version, view, nodes)
        if len(self._answers) >= ANSWERS_KEPT:
            self._answers.pop(next(iter(self._answers)))  # the oldest
        self._answers[key] = frame[8:]
        return frame


def encode_metadata_answer(
    correlation_id: int, response: Any, version: int, view: ClusterView, nodes: ProxyNodes
) -> bytes:
    """The whole frame of ``response`` (a broker's decoded Metadata answer) with proxy nodes in it."""
    brokers = [MetadataBroker(node.node_id, node.host, node.port, node.rack) for node in nodes.up()]
    topics = [
        MetadataTopic(
            int(topic.error_code),
            topic.name,
            getattr(topic, "topic_id", None) or NO_TOPIC_ID,  # kio decodes the zero id (an errored topic's) as None
            bool(getattr(topic, "is_internal", False)),
            [_partition(p, view, nodes, topic.name) for p in topic.partitions],
            int(getattr(topic, "topic_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)),
        )
        for topic in response.topics
    ]
    controller = node_of_broker(view, nodes, int(response.controller_id)) if hasattr(response, "controller_id") else -1
    throttle = getattr(response, "throttle_time", None)
    return encode_metadata_response(
        version,
        correlation_id,
        brokers,
        getattr(response, "cluster_id", None),
        controller,
        topics,
        throttle_time_ms=round(throttle.total_seconds() * 1000) if throttle is not None else 0,
        cluster_authorized_operations=int(
            getattr(response, "cluster_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
        ),
    )


def _partition(partition: Any, view: ClusterView, nodes: ProxyNodes, topic: str | None) -> MetadataPartition:
    error_code, index = int(partition.error_code), int(partition.partition_index)
    epoch = int(getattr(partition, "leader_epoch", -1))
    if topic is None:  # a lookup by an unknown topic id: nothing to map
        return MetadataPartition(
            error_code, index, int(partition.leader_id), epoch, tuple(partition.replica_nodes),
            tuple(partition.isr_nodes), tuple(getattr(partition, "offline_replicas", ())),
        )  # fmt: skip
    leader, replicas, isr = metadata_partition_nodes(partition, view, nodes, topic)
    return MetadataPartition(error_code, index, leader, epoch, replicas, isr, ())
