"""FetchResponse partition entries as byte ranges (versions 4-12): found in answers, put together into one.

The proxy merges the answers of the brokers a client's Fetch was split across. Decoding them
with kio and encoding the merge would copy every record set three times; instead each answer is
walked once over its small fields (record sets skipped by their length, as
``_fetch_response_scan`` does) to find each partition's whole entry as a byte range, and the
merged answer is a fresh header and topic framing around slices of the brokers' frames.

Rules this module keeps:

- Layout follows FetchResponse.json, as in ``_fetch_response_scan``: ThrottleTimeMs, ErrorCode and
  SessionId (v7+), Responses [Topic (name), Partitions [PartitionIndex, ErrorCode, HighWatermark,
  LastStableOffset, LogStartOffset (v5+), AbortedTransactions (nullable), PreferredReadReplica
  (v11+), Records (nullable bytes)]]; flexible from v12 (compact lengths, tagged-field sections).
- An entry runs from its PartitionIndex to the end of its tagged-field section: copied whole it
  is the broker's partition answer, byte for byte.
- ``find_fetch_entries`` answers None for a frame that names a node (a preferred read replica),
  carries any tagged field (a current leader, node endpoints, a diverging epoch) or does not walk
  exactly: such an answer must be decoded and rewritten, never spliced. It never raises.
- What this module writes (headers, topic framing, error entries) carries no tagged field, so a
  merge of kio-canonical answers is the bytes kio would write for the same response.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ._declared_sizes import read_uvarint
from ._errors import LocalProtocolError, RemoteProtocolError
from ._wire import INT32, compact_string, legacy_string, uvarint

__all__ = [
    "FETCH_ENTRY_VERSIONS",
    "FetchEntry",
    "FetchResponseEntries",
    "encode_fetch_response_entries",
    "fetch_error_entry",
    "find_fetch_entries",
]

#: Versions this module walks and writes.
FETCH_ENTRY_VERSIONS: Final = range(4, 13)

_INT16 = struct.Struct(">h")
_PART_HEAD = struct.Struct(">ih")  # partition index, error code
_ERROR_SESSION = struct.Struct(">hi")  # top-level error code, session id (v7+)
_HEAD_V4 = struct.Struct(">iii")  # size, correlation id, throttle
_HEAD_V7 = struct.Struct(">iiihi")  # size, correlation id, throttle, error, session
_HEAD_V12 = struct.Struct(">iiBihi")  # size, correlation id, header tags, throttle, error, session
_ERROR_V4 = struct.Struct(">ihqqi")  # index, error, high watermark, last stable offset, aborted (null)
_ERROR_V5 = struct.Struct(">ihqqqi")  # + log start offset
_ERROR_V11 = struct.Struct(">ihqqqiii")  # + preferred read replica, records (null)
_ERROR_V12 = struct.Struct(">ihqqqBiBB")  # compact: aborted null, replica, records null, no tags
_NULL_INT32: Final = b"\xff\xff\xff\xff"
_NO_TAGS: Final = b"\x00"
#: Entries shorter than this (error entries, partitions without records) are copied into the
#: framing: cheaper than a chunk of their own.
_INLINE: Final = 256


@dataclass(frozen=True, slots=True)
class FetchEntry:
    """One partition's answer in a frame: bytes ``[start, end)``."""

    partition_index: int
    error_code: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class FetchResponseEntries:
    """A FetchResponse's top-level fields and, per topic in its order, its partitions' entries."""

    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: tuple[tuple[str, tuple[FetchEntry, ...]], ...]


class _NotSpliceableError(Exception):
    """The frame names a node, carries a tagged field or does not walk."""


def find_fetch_entries(frame: bytes | bytearray | memoryview, version: int) -> FetchResponseEntries | None:
    """Each partition entry of a response frame (its payload after the size prefix), or None (see above)."""
    if version not in FETCH_ENTRY_VERSIONS:
        return None
    try:
        return _Walk(memoryview(frame), version).response()
    except (_NotSpliceableError, RemoteProtocolError, struct.error, IndexError, UnicodeDecodeError):
        return None


class _Walk:
    """A cursor over one frame; every length is checked against the bytes left."""

    __slots__ = ("flexible", "pos", "version", "view")

    def __init__(self, view: memoryview, version: int) -> None:
        self.view = view
        self.version = version
        self.flexible = version >= 12
        self.pos = 4  # correlation id

    def response(self) -> FetchResponseEntries:
        view = self.view
        if self.flexible:
            self.no_tags()  # response header
        (throttle,) = INT32.unpack_from(view, self.pos)
        self.pos += 4
        error_code = session_id = 0
        if self.version >= 7:
            error_code, session_id = _ERROR_SESSION.unpack_from(view, self.pos)
            self.pos += 6
        topics = []
        for _ in range(self.count(nullable=False)):
            name = self.string()
            entries = tuple(self.entry() for _ in range(self.count(nullable=False)))
            if self.flexible:
                self.no_tags()
            topics.append((name, entries))
        if self.flexible:
            self.no_tags()
        if self.pos != len(view):
            raise _NotSpliceableError(f"{len(view) - self.pos} bytes left over")
        return FetchResponseEntries(throttle, error_code, session_id, tuple(topics))

    def entry(self) -> FetchEntry:
        start = self.pos
        index, error_code = _PART_HEAD.unpack_from(self.view, start)
        self.pos += 6 + 8 + 8 + (8 if self.version >= 5 else 0)
        aborted = self.count(nullable=True)
        if self.flexible:
            for _ in range(aborted):  # ProducerId, FirstOffset, then a tagged-field section
                self.pos += 16
                self.no_tags()
        else:
            self.pos += 16 * aborted
        if self.version >= 11:
            (replica,) = INT32.unpack_from(self.view, self.pos)
            if replica != -1:
                raise _NotSpliceableError("a preferred read replica is named")
            self.pos += 4
        self.skip(self.length(nullable=True))
        if self.flexible:
            self.no_tags()
        if self.pos > len(self.view):
            raise _NotSpliceableError("an entry runs past the frame")
        return FetchEntry(index, error_code, start, self.pos)

    def length(self, *, nullable: bool) -> int:
        """A string, bytes or array length (0 for null where null is allowed)."""
        if self.flexible:
            value, self.pos = read_uvarint(self.view, self.pos, len(self.view))
            if value == 0 and not nullable:
                raise _NotSpliceableError("null where the schema has none")
            return max(value - 1, 0)
        size = int(INT32.unpack_from(self.view, self.pos)[0])
        self.pos += 4
        if size < -1 or (size == -1 and not nullable):
            raise _NotSpliceableError(f"length {size}")
        return max(size, 0)

    def count(self, *, nullable: bool) -> int:
        count = self.length(nullable=nullable)
        if count > len(self.view) - self.pos:  # every element takes a byte or more
            raise _NotSpliceableError(f"an array of {count} elements in {len(self.view) - self.pos} bytes")
        return count

    def string(self) -> str:
        if self.flexible:
            size = self.length(nullable=False)
        else:
            (size,) = _INT16.unpack_from(self.view, self.pos)
            self.pos += 2
            if size < 0:
                raise _NotSpliceableError("a null topic name")
        start = self.pos
        self.skip(size)
        return bytes(self.view[start : self.pos]).decode()

    def skip(self, size: int) -> None:
        self.pos += size
        if self.pos > len(self.view):
            raise _NotSpliceableError("a field runs past the frame")

    def no_tags(self) -> None:
        if self.view[self.pos] != 0:
            raise _NotSpliceableError("a tagged field is present")
        self.pos += 1


def fetch_error_entry(version: int, partition_index: int, error_code: int) -> bytes:
    """A partition's entry answering only ``error_code``: offsets -1, no aborted transactions, no records (null)."""
    if version >= 12:
        return _ERROR_V12.pack(partition_index, error_code, -1, -1, -1, 0, -1, 0, 0)
    if version >= 11:
        return _ERROR_V11.pack(partition_index, error_code, -1, -1, -1, -1, -1, -1)
    if version >= 5:
        return _ERROR_V5.pack(partition_index, error_code, -1, -1, -1, -1) + _NULL_INT32
    return _ERROR_V4.pack(partition_index, error_code, -1, -1, -1) + _NULL_INT32


def encode_fetch_response_entries(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str, int, Sequence[bytes | memoryview]]],
    *,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
) -> list[bytes | memoryview]:
    """A whole FetchResponse frame (size prefix included) around ready-made partition entries.

    Args:
        topics: per topic, its name, its number of partitions, and the chunks whose
            concatenation is those partitions' entries (slices of answers, error entries).

    Returns:
        Framing chunks with the given entry chunks between them: those of ``_INLINE`` bytes or
        more as given (uncopied), shorter ones copied into the framing.
    """
    if version not in FETCH_ENTRY_VERSIONS:
        raise LocalProtocolError(f"FetchResponse v{version} cannot be assembled here")
    flexible = version >= 12
    if flexible:
        out = bytearray(_HEAD_V12.pack(0, correlation_id, 0, throttle_time_ms, error_code, session_id))
    elif version >= 7:
        out = bytearray(_HEAD_V7.pack(0, correlation_id, throttle_time_ms, error_code, session_id))
    else:
        out = bytearray(_HEAD_V4.pack(0, correlation_id, throttle_time_ms))
    out += uvarint(len(topics) + 1) if flexible else INT32.pack(len(topics))
    head = out  # patched with the size at the end (written into, never resized)
    chunks: list[bytes | memoryview] = []
    total = 0
    for name, partitions, entries in topics:
        out += compact_string(name) if flexible else legacy_string(name)
        out += uvarint(partitions + 1) if flexible else INT32.pack(partitions)
        for entry in entries:
            if len(entry) < _INLINE:
                out += entry
                continue
            chunks.append(memoryview(out))
            chunks.append(entry)
            total += len(out) + len(entry)
            out = bytearray()
        if flexible:
            out += _NO_TAGS
    if flexible:
        out += _NO_TAGS
    if out:
        chunks.append(memoryview(out))
        total += len(out)
    INT32.pack_into(head, 0, total - 4)
    return chunks
