"""Hand-written FetchResponse encoder (versions 4-16) that never copies record bytes.

The records a consumer fetches can be megabytes; kio would copy them into its output and
spend ~10x longer on the small fields around them (protocol.md §2). This encoder returns a list
of chunks for ``transport.writelines``: small framing chunks it builds, and the caller's record
chunks passed through untouched.

Rules this module keeps:

- Concatenating the returned chunks gives the whole frame: int32 size, response header (v0 for
  v4-11, v1 with empty tagged fields for flexible v12+), body. The first chunk always begins
  with the size, and is the only chunk when no partition carries records.
- Field presence follows FetchResponse.json: LastStableOffset and AbortedTransactions v4+,
  LogStartOffset v5+, ErrorCode and SessionId v7+, PreferredReadReplica v11+, topic name up to
  v12 and topic ID from v13.
- Records is written non-null even when empty: Kafka answers partitions without data with
  ``MemoryRecords.EMPTY`` (length 0), never null.
- No tagged field is ever written (DivergingEpoch, CurrentLeader, SnapshotId, NodeEndpoints):
  older librdkafka misreads them (protocol.md §5 gotcha 2).
- Record chunks are anything whose ``len`` is their size in bytes: byte buffers, or the
  broker's segment file ranges, which this module never looks into; they are neither copied
  nor validated here.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence, Sized
from typing import Final, Generic, NamedTuple, TypeVar

from ._errors import LocalProtocolError
from ._wire import INT32, compact_string, legacy_string, uvarint

__all__ = ["FETCH_RESPONSE_VERSIONS", "FetchPartitionResult", "encode_fetch_response"]

#: Versions encode_fetch_response can write.
FETCH_RESPONSE_VERSIONS: Final = range(4, 17)


#: A record chunk: byte buffers, or any other object whose ``len`` is its size in bytes.
Chunk = TypeVar("Chunk", bound=Sized)


class FetchPartitionResult(NamedTuple, Generic[Chunk]):
    """One partition's answer.

    ``records`` is a sequence of byte chunks whose concatenation is the Records field (whole
    batches, as read from the log); empty means no data. ``aborted_transactions`` is None
    (null, as for READ_UNCOMMITTED fetches) or (producer_id, first_offset) pairs.
    """

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Sequence[Chunk]
    preferred_read_replica: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None


_HEAD_V4 = struct.Struct(">iiii")  # size, correlation id, throttle, topics count
_HEAD_V7 = struct.Struct(">iiihii")  # size, correlation id, throttle, error, session, topics count
_HEAD_V12 = struct.Struct(">iiBihi")  # size, correlation id, header tags, throttle, error, session
_PART_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PART_V5 = struct.Struct(">ihqqq")  # + log start offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_ABORTED_FLEX = struct.Struct(">qqB")  # + tagged fields
_NULL_ARRAY_V4 = b"\xff\xff\xff\xff"
_NULL_ARRAY_FLEX = b"\x00"
_EMPTY_RECORDS_V4 = b"\x00\x00\x00\x00"
_EMPTY_RECORDS_FLEX_END = b"\x01\x00"  # compact length 0 (+1), partition tagged fields
_TOPIC_TAGS = b"\x00"
_BODY_TAGS = b"\x00"


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionResult[Chunk]]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[bytes | memoryview | Chunk]:
    """Encode a complete FetchResponse frame as chunks for ``writelines``.

    Args:
        version: the request's api_version, 4 to 16.
        correlation_id: echoed from the request header.
        topics: (topic, partition results); the topic is its name for v4-12 and its topic ID
            (a UUID) for v13+.
        throttle_time_ms: quota throttle; 0 when not throttled.
        error_code: top-level error (v7+), e.g. a fetch session error.
        session_id: fetch session (v7+); 0 means no session (protocol.md §5 gotcha 5).

    Returns:
        Chunks whose concatenation is the frame, size prefix included. Record chunks are the
        caller's objects, not copies.

    Raises:
        LocalProtocolError: the version is out of range, or a topic is given by name where an
            ID is needed (or the reverse).
    """
    if version < 4 or version > 16:
        raise LocalProtocolError(f"FetchResponse v{version} is not supported")
    flexible = version >= 12
    with_start = version >= 5
    with_replica = version >= 11
    by_id = version >= 13
    if flexible:
        head = bytearray(_HEAD_V12.pack(0, correlation_id, 0, throttle_time_ms, error_code, session_id))
        head += uvarint(len(topics) + 1)
    elif version >= 7:
        head = bytearray(_HEAD_V7.pack(0, correlation_id, throttle_time_ms, error_code, session_id, len(topics)))
    else:
        head = bytearray(_HEAD_V4.pack(0, correlation_id, throttle_time_ms, len(topics)))
    part_pack = _PART_V5.pack if with_start else _PART_V4.pack
    chunks: list[bytes | memoryview | Chunk] = []
    out = head  # the framing chunk being built; record chunks go between framing chunks
    total = 0  # bytes in ``chunks``

    for topic, partitions in topics:
        if by_id:
            if not isinstance(topic, uuid.UUID):
                raise LocalProtocolError(f"FetchResponse v{version} needs topic IDs, got {topic!r}")
            out += topic.bytes
        elif isinstance(topic, str):
            out += compact_string(topic) if flexible else legacy_string(topic)
        else:
            raise LocalProtocolError(f"FetchResponse v{version} needs topic names, got {topic!r}")
        out += uvarint(len(partitions) + 1) if flexible else INT32.pack(len(partitions))

        for (
            index,
            partition_error,
            high_watermark,
            last_stable_offset,
            log_start_offset,
            records,
            preferred_read_replica,
            aborted,
        ) in partitions:
            if with_start:
                out += part_pack(index, partition_error, high_watermark, last_stable_offset, log_start_offset)
            else:
                out += part_pack(index, partition_error, high_watermark, last_stable_offset)
            if aborted is None:
                out += _NULL_ARRAY_FLEX if flexible else _NULL_ARRAY_V4
            elif flexible:
                out += uvarint(len(aborted) + 1)
                for producer_id, first_offset in aborted:
                    out += _ABORTED_FLEX.pack(producer_id, first_offset, 0)
            else:
                out += INT32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
            if with_replica:
                out += INT32.pack(preferred_read_replica)

            if not records:
                out += _EMPTY_RECORDS_FLEX_END if flexible else _EMPTY_RECORDS_V4
                continue
            size = 0
            for chunk in records:
                size += len(chunk)
            out += uvarint(size + 1) if flexible else INT32.pack(size)
            # Close the framing chunk (a view, not a copy; it is never resized again) and pass
            # the record chunks through as they are.
            chunks.append(memoryview(out))
            chunks.extend(records)
            total += len(out) + size
            out = bytearray()
            if flexible:
                out += b"\x00"  # partition tagged fields
        if flexible:
            out += _TOPIC_TAGS
    if flexible:
        out += _BODY_TAGS

    if out:
        chunks.append(memoryview(out))
        total += len(out)
    # Writing into the exported head view is allowed; only resizing is not.
    INT32.pack_into(head, 0, total - 4)
    return chunks
