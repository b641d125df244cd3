"""Whether a FetchResponse (versions 4-12) names any node at all, found without decoding its records.

A proxy must rewrite every node id in the answers it relays; in a FetchResponse those are the
preferred read replica (v11+, KIP-392) and, in tagged fields, a partition's current leader (v12+,
KIP-951). A broker that names neither (barnabas never does) lets the proxy pass the answer on as
it came, records uncopied. This walks the frame's small fields only, skipping record sets by their
length, and answers conservatively: any tagged field at all, or bytes it cannot walk, count as
"names a node", so the caller decodes and rewrites.

Layout (FetchResponse.json): ThrottleTimeMs, ErrorCode and SessionId (v7+), then Responses [Topic
(name up to v12), Partitions [PartitionIndex, ErrorCode, HighWatermark, LastStableOffset,
LogStartOffset (v5+), AbortedTransactions (nullable) [ProducerId, FirstOffset],
PreferredReadReplica (v11+), Records (nullable bytes)]]; flexible from v12 (compact lengths and a
tagged-field section after each struct, the response header's included).
"""

from __future__ import annotations

import struct
from typing import Final

from ._declared_sizes import read_uvarint
from ._errors import RemoteProtocolError

__all__ = ["FETCH_SCAN_VERSIONS", "fetch_response_names_nodes"]

#: Versions fetch_response_names_nodes walks.
FETCH_SCAN_VERSIONS: Final = range(4, 13)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _UnwalkableError(Exception):
    pass


def fetch_response_names_nodes(frame: bytes | bytearray | memoryview, version: int) -> bool:
    """Whether the response frame (its payload after the size prefix) may name a node.

    True when a preferred read replica is set, when any tagged field is present, or when the frame
    does not walk as a FetchResponse of ``version``; False only when it surely names none.
    """
    if version not in FETCH_SCAN_VERSIONS:
        return True
    try:
        return _walk(memoryview(frame), version)
    except (_UnwalkableError, RemoteProtocolError, struct.error, IndexError):
        return True


def _walk(view: memoryview, version: int) -> bool:
    flexible = version >= 12
    pos = 4  # correlation id
    if flexible:
        if view[pos] != 0:
            return True  # a tagged field in the response header
        pos += 1
    pos += 4 + (2 + 4 if version >= 7 else 0)  # throttle, error code, session id
    topics, pos = _count(view, pos, flexible)
    for _ in range(topics):
        pos = _skip_string(view, pos, flexible)
        partitions, pos = _count(view, pos, flexible)
        for _ in range(partitions):
            pos += 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
            aborted, pos = _count(view, pos, flexible, nullable=True)
            if flexible:
                for _ in range(aborted):
                    pos = _no_tags(view, pos + 16)  # ProducerId, FirstOffset
            else:
                pos += 16 * aborted
            if version >= 11:
                (replica,) = _INT32.unpack_from(view, pos)
                if replica != -1:
                    return True
                pos += 4
            pos = _skip_bytes(view, pos, flexible)
            if flexible:
                pos = _no_tags(view, pos)
        if flexible:
            pos = _no_tags(view, pos)
    if flexible:
        pos = _no_tags(view, pos)
    if pos != len(view):
        raise _UnwalkableError(f"{len(view) - pos} bytes left over")
    return False


def _count(view: memoryview, pos: int, flexible: bool, *, nullable: bool = False) -> tuple[int, int]:
    """An array's element count; every element takes a byte or more, so one the frame cannot hold is unwalkable."""
    if flexible:
        length, pos = read_uvarint(view, pos, len(view))
        if length == 0 and not nullable:
            raise _UnwalkableError("null array")
        count = max(length - 1, 0)
    else:
        (length,) = _INT32.unpack_from(view, pos)
        if length < -1 or (length == -1 and not nullable):
            raise _UnwalkableError("bad array length")
        count, pos = max(length, 0), pos + 4
    if count > len(view) - pos:
        raise _UnwalkableError(f"an array of {count} elements in {len(view) - pos} bytes")
    return count, pos


def _skip_string(view: memoryview, pos: int, flexible: bool) -> int:
    if flexible:
        length, pos = read_uvarint(view, pos, len(view))
        return pos + max(length - 1, 0)
    length = int(_INT16.unpack_from(view, pos)[0])
    return pos + 2 + max(length, 0)


def _skip_bytes(view: memoryview, pos: int, flexible: bool) -> int:
    if flexible:
        length, pos = read_uvarint(view, pos, len(view))
        end = pos + max(length - 1, 0)
    else:
        (length,) = _INT32.unpack_from(view, pos)
        end = pos + 4 + max(length, 0)
    if end > len(view):
        raise _UnwalkableError("records run past the frame")
    return end


def _no_tags(view: memoryview, pos: int) -> int:
    if view[pos] != 0:
        raise _TaggedFieldError
    return pos + 1


class _TaggedFieldError(_UnwalkableError):
    """A tagged field is present: it may carry a node (current leader, node endpoints)."""
