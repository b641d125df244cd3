"""Hand-written MetadataResponse encoder (versions 0-12), byte-identical to kio's.

Metadata answers are the biggest frequent responses (3 brokers x 50 topics x 6 partitions is
14.5 KB) and kio needs ~3 ms for one (protocol.md §2). This encoder packs each partition with a
single precompiled ``struct`` chosen by the partition's shape (replica, ISR and offline counts).

Rules this module keeps:

- The result is the whole frame: int32 size, response header (v0 for v0-8, v1 with empty tagged
  fields for flexible v9+), body.
- Field presence follows MetadataResponse.json: ThrottleTimeMs v3+, Rack v1+, ClusterId v2+,
  ControllerId v1+, IsInternal v1+, LeaderEpoch v7+, OfflineReplicas v5+,
  TopicAuthorizedOperations v8+, ClusterAuthorizedOperations v8-10 only, TopicId v10+. A topic
  name may be null only from v12.
- No tagged field is ever written: older librdkafka misreads them (protocol.md §5 gotcha 2).
- v13 (top-level ErrorCode) is out of range: the broker does not advertise it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final, NamedTuple

from ._errors import LocalProtocolError
from ._wire import (
    INT16,
    INT32,
    compact_nullable_string,
    compact_string,
    legacy_nullable_string,
    legacy_string,
    uvarint,
)

__all__ = [
    "METADATA_RESPONSE_VERSIONS",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataTopic",
    "encode_metadata_response",
]

#: Versions encode_metadata_response can write.
METADATA_RESPONSE_VERSIONS: Final = range(13)

#: Kafka's "authorized operations not requested" sentinel (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648


class MetadataBroker(NamedTuple):
    """A broker as clients should reach it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataPartition(NamedTuple):
    """One partition's leadership and replica sets."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int]


class MetadataTopic(NamedTuple):
    """One topic; ``name`` may be None only for v12+ lookups by topic ID."""

    error_code: int
    name: str | None
    topic_id: uuid.UUID
    is_internal: bool
    partitions: Sequence[MetadataPartition]
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


# Partition layouts, by version group. The Struct for a partition appends its three int32
# arrays (length prefix + items) to the fixed fields, so one pack() writes the whole partition.
_V0, _V5, _V7, _V9 = 0, 1, 2, 3
_PARTITION_FIXED = {_V0: ">hii", _V5: ">hii", _V7: ">hiii", _V9: ">hiii"}
# Array shapes up to this many items per array get a cached Struct; longer ones (never seen in
# practice) are packed piecewise so the cache stays small.
_MAX_CACHED_ARRAY = 16
_partition_structs: dict[tuple[int, int, int, int], struct.Struct] = {}


def _partition_struct(layout: int, replicas: int, isr: int, offline: int) -> struct.Struct:
    """Build (and cache) the Struct for one partition shape."""
    # Flexible versions use compact array lengths: uvarint(n + 1), one byte ("B") below 127.
    length = "B" if layout == _V9 else "i"
    fmt = f"{_PARTITION_FIXED[layout]}{length}{replicas}i{length}{isr}i"
    if layout != _V0:
        fmt += f"{length}{offline}i"
    if layout == _V9:
        fmt += "B"  # partition tagged fields
    compiled = struct.Struct(fmt)
    _partition_structs[(layout, replicas, isr, offline)] = compiled
    return compiled


def _int32_array(values: Sequence[int], flexible: bool) -> bytes:
    """An int32 array of any length (the uncached path)."""
    prefix = uvarint(len(values) + 1) if flexible else INT32.pack(len(values))
    return prefix + struct.pack(f">{len(values)}i", *values)


def _partition_slow(layout: int, partition: MetadataPartition) -> bytes:
    """Pack a partition whose arrays are too long for the shape cache."""
    error_code, index, leader, epoch, replicas, isr, offline = partition
    flexible = layout == _V9
    if layout >= _V7:
        out = struct.pack(">hiii", error_code, index, leader, epoch)
    else:
        out = struct.pack(">hii", error_code, index, leader)
    out += _int32_array(replicas, flexible) + _int32_array(isr, flexible)
    if layout != _V0:
        out += _int32_array(offline, flexible)
    if flexible:
        out += b"\x00"
    return out


_HEAD_V0 = struct.Struct(">iii")  # size, correlation id, brokers count
_HEAD_V3 = struct.Struct(">iiii")  # size, correlation id, throttle, brokers count
_HEAD_V9 = struct.Struct(">iiBi")  # size, correlation id, header tags, throttle
_TOPIC_OPS = struct.Struct(">i")


def encode_metadata_topic(version: int, topic: MetadataTopic) -> bytes:
    """One topic's section of a MetadataResponse of ``version``: what a cache may keep and reuse.

    Raises:
        LocalProtocolError: the version is out of range, the name is null before v12, or a
            string does not fit.
    """
    if version < 0 or version > 12:
        raise LocalProtocolError(f"MetadataResponse v{version} is not supported")
    flexible = version >= 9
    string = compact_string if flexible else legacy_string
    pack_int16 = INT16.pack
    pack_int32 = INT32.pack
    if version >= 9:
        layout = _V9
    elif version >= 7:
        layout = _V7
    elif version >= 5:
        layout = _V5
    else:
        layout = _V0
    structs = _partition_structs
    topic_error, name, topic_id, is_internal, partitions, topic_ops = topic
    out = bytearray(pack_int16(topic_error))
    if name is not None:
        out += string(name)
    elif version >= 12:
        out += b"\x00"
    else:
        raise LocalProtocolError(f"MetadataResponse v{version} cannot carry a null topic name")
    if version >= 10:
        out += topic_id.bytes
    if version >= 1:
        out += b"\x01" if is_internal else b"\x00"
    out += uvarint(len(partitions) + 1) if flexible else pack_int32(len(partitions))

    for partition in partitions:
        error_code, index, leader, epoch, replicas, isr, offline = partition
        n_replicas = len(replicas)
        n_isr = len(isr)
        n_offline = len(offline)
        compiled = structs.get((layout, n_replicas, n_isr, n_offline))
        if compiled is None:
            if max(n_replicas, n_isr, n_offline) > _MAX_CACHED_ARRAY:
                out += _partition_slow(layout, partition)
                continue
            compiled = _partition_struct(layout, n_replicas, n_isr, n_offline)
        if layout == _V9:
            out += compiled.pack(
                error_code, index, leader, epoch, n_replicas + 1, *replicas, n_isr + 1, *isr, n_offline + 1, *offline, 0
            )
        elif layout == _V7:
            out += compiled.pack(
                error_code, index, leader, epoch, n_replicas, *replicas, n_isr, *isr, n_offline, *offline
            )
        elif layout == _V5:
            out += compiled.pack(error_code, index, leader, n_replicas, *replicas, n_isr, *isr, n_offline, *offline)
        else:
            out += compiled.pack(error_code, index, leader, n_replicas, *replicas, n_isr, *isr)

    if version >= 8:
        out += _TOPIC_OPS.pack(topic_ops)
    if flexible:
        out += b"\x00"
    return bytes(out)


def encode_metadata_response(  # noqa: PLR0917 - the six required fields, in wire order
    version: int,
    correlation_id: int,
    brokers: Sequence[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[MetadataTopic | bytes],
    *,
    throttle_time_ms: int = 0,
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> bytes:
    """Encode a complete MetadataResponse frame, size prefix included.

    Args:
        version: the request's api_version, 0 to 12.
        correlation_id: echoed from the request header.
        brokers: the live brokers; kafkajs sends InitProducerId to the one named by
            ``controller_id``, so that must be among them (protocol.md §4).
        cluster_id: written from v2.
        controller_id: written from v1.
        topics: the topics asked for (or all); a ``bytes`` item is a section
            :func:`encode_metadata_topic` encoded for this version.
        throttle_time_ms: written from v3.
        cluster_authorized_operations: written for v8-10 only.

    Returns:
        The frame, ready to write to the socket.

    Raises:
        LocalProtocolError: the version is out of range, a topic name is null before v12, or a
            string does not fit.
    """
    if version < 0 or version > 12:
        raise LocalProtocolError(f"MetadataResponse v{version} is not supported")
    flexible = version >= 9
    string = compact_string if flexible else legacy_string
    nullable_string = compact_nullable_string if flexible else legacy_nullable_string

    if flexible:
        out = bytearray(_HEAD_V9.pack(0, correlation_id, 0, throttle_time_ms))
        out += uvarint(len(brokers) + 1)
    elif version >= 3:
        out = bytearray(_HEAD_V3.pack(0, correlation_id, throttle_time_ms, len(brokers)))
    else:
        out = bytearray(_HEAD_V0.pack(0, correlation_id, len(brokers)))

    pack_int32 = INT32.pack
    for node_id, host, port, rack in brokers:
        out += pack_int32(node_id)
        out += string(host)
        out += pack_int32(port)
        if version >= 1:
            out += nullable_string(rack)
            if flexible:
                out += b"\x00"

    if version >= 2:
        out += nullable_string(cluster_id)
    if version >= 1:
        out += pack_int32(controller_id)

    out += uvarint(len(topics) + 1) if flexible else pack_int32(len(topics))
    for topic in topics:
        out += topic if isinstance(topic, bytes) else encode_metadata_topic(version, topic)

    if 8 <= version <= 10:
        out += pack_int32(cluster_authorized_operations)
    if flexible:
        out += b"\x00"
    INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
