"""Hand-written ProduceRequest decoder (versions 3-11) that hands out record bytes as views, never copies.

kio copies each partition's records into a new ``bytes`` (and refuses writable buffers), so a
megabyte produce cost two extra copies before the log could patch the batch. This decoder reads
the small fields itself and returns each partition's records as a ``memoryview`` of the frame:
of a writable frame (a ``bytearray``, or the frame reader's own buffer) it is writable, so the log
patches baseOffset and partitionLeaderEpoch in place and writes the same bytes to the segment.

Rules this module keeps:

- Field layout follows ProduceRequest.json: TransactionalId (nullable string), Acks, TimeoutMs,
  TopicData [Name, PartitionData [Index, Records (nullable bytes)]]; flexible from v9 (compact
  lengths, tagged-field sections, whose unknown tags are skipped). v13 topic IDs are not served.
- The result reads like kio's entity (``topic_data[i].partition_data[j].records``), with
  ``timeout_ms`` instead of kio's timedelta; tests prove the two decoders agree.
- Anything that runs past the frame, a negative length other than null, or a topic name that
  is not UTF-8 raises RemoteProtocolError; so does, at once, an array declaring more elements
  than the bytes left or than 1,000,000, or over 10,000 tagged fields (``_declared_sizes``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from ._declared_sizes import check_count, check_tagged_count
from ._errors import RemoteProtocolError

__all__ = [
    "PRODUCE_REQUEST_VERSIONS",
    "ProducePartitionData",
    "ProduceRequestData",
    "ProduceTopicData",
    "decode_produce_request",
]

#: Versions decode_produce_request reads.
PRODUCE_REQUEST_VERSIONS: Final = range(3, 12)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    index: int
    #: The partition's RecordBatch bytes, a view of the frame; None when the client sent null.
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceTopicData:
    name: str
    partition_data: tuple[ProducePartitionData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[ProduceTopicData, ...]


class _Reader:
    """A cursor over the frame; every read checks the bounds."""

    __slots__ = ("frame", "pos", "view")

    def __init__(self, frame: bytes | bytearray | memoryview, pos: int) -> None:
        self.frame = frame
        self.view = memoryview(frame)
        self.pos = pos

    def need(self, size: int) -> int:
        start = self.pos
        end = start + size
        if size < 0 or end > len(self.frame):
            raise RemoteProtocolError(f"ProduceRequest is truncated at byte {start} (needs {size} more)")
        self.pos = end
        return start

    def int32(self) -> int:
        return int(_INT32.unpack_from(self.frame, self.need(4))[0])

    def int16(self) -> int:
        return int(_INT16.unpack_from(self.frame, self.need(2))[0])

    def uvarint(self) -> int:
        value = shift = 0
        frame = self.frame
        while True:
            byte = frame[self.need(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RemoteProtocolError("unsigned varint is too long")

    def text(self, size: int) -> str:
        start = self.need(size)
        try:
            return bytes(self.view[start : start + size]).decode()
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError("ProduceRequest string is not UTF-8") from exc

    def nullable_string(self, flexible: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size == -1:
            return None
        if size < 0:
            raise RemoteProtocolError(f"ProduceRequest string length {size} is negative")
        return self.text(size)

    def string(self, flexible: bool) -> str:
        value = self.nullable_string(flexible)
        if value is None:
            raise RemoteProtocolError("ProduceRequest topic name is null")
        return value

    def array_length(self, flexible: bool) -> int:
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < 0:
            raise RemoteProtocolError(f"ProduceRequest array length {count} is not allowed here")
        check_count(count, len(self.frame) - self.pos, "ProduceRequest")
        return count

    def nullable_bytes(self, flexible: bool) -> memoryview | None:
        size = self.uvarint() - 1 if flexible else self.int32()
        if size == -1:
            return None
        if size < 0:
            raise RemoteProtocolError(f"ProduceRequest records length {size} is negative")
        start = self.need(size)
        return self.view[start : start + size]

    def skip_tagged_fields(self) -> None:
        count = self.uvarint()
        check_tagged_count(count, len(self.frame) - self.pos, "ProduceRequest")
        for _ in range(count):
            self.uvarint()  # tag
            self.need(self.uvarint())


def decode_produce_request(frame: bytes | bytearray | memoryview, pos: int, version: int) -> ProduceRequestData:
    """Decode the ProduceRequest body that starts at ``pos`` (after the request header).

    Raises:
        RemoteProtocolError: the body does not decode (bytes after it are ignored, as kio does).
    """
    if version not in PRODUCE_REQUEST_VERSIONS:
        raise RemoteProtocolError(f"ProduceRequest v{version} cannot be decoded here")
    flexible = version >= 9
    reader = _Reader(frame, pos)
    transactional_id = reader.nullable_string(flexible)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, reader.need(_ACKS_TIMEOUT.size))
    topics = []
    for _ in range(reader.array_length(flexible)):
        name = reader.string(flexible)
        partitions = []
        for _ in range(reader.array_length(flexible)):
            index = reader.int32()
            records = reader.nullable_bytes(flexible)
            if flexible:
                reader.skip_tagged_fields()
            partitions.append(ProducePartitionData(index, records))
        if flexible:
            reader.skip_tagged_fields()
        topics.append(ProduceTopicData(name, tuple(partitions)))
    if flexible:
        reader.skip_tagged_fields()
    return ProduceRequestData(transactional_id, acks, timeout_ms, tuple(topics))
