"""Primitives for writing Kafka wire types, shared by the hand-written response encoders.

Rules this module keeps:

- Every function returns ``bytes`` for the caller to append to a ``bytearray``; none takes a
  buffer, so an encoder can inline a precompiled ``struct.Struct`` where several fixed-width
  fields sit next to each other and call these only for the variable-width ones.
- Integers are big-endian two's complement (``>``), as in Kafka's ``ByteUtils``; unsigned varints
  are LEB128 and signed varints are zigzag-encoded first (protobuf rules, KIP-482 and the
  RecordBatch v2 record format).
- Compact ("flexible version") lengths are stored plus one so that 0 can mean null.
- Nothing here knows about API versions; the encoders choose compact or legacy forms.
- A value the wire cannot carry (a legacy string over 32767 bytes) is our own mistake, so it
  raises LocalProtocolError rather than producing a frame a client would misread.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from ._errors import LocalProtocolError

__all__ = [
    "EMPTY_TAGGED_FIELDS",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT32",
    "compact_array_length",
    "compact_bytes",
    "compact_nullable_bytes",
    "compact_nullable_string",
    "compact_string",
    "legacy_array_length",
    "legacy_bytes",
    "legacy_nullable_bytes",
    "legacy_nullable_string",
    "legacy_string",
    "pack_int8",
    "pack_int16",
    "pack_int32",
    "pack_int64",
    "uuid_bytes",
    "uvarint",
    "varint",
    "varlong",
]

INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
UINT32: Final = struct.Struct(">I")

pack_int8: Final = INT8.pack
pack_int16: Final = INT16.pack
pack_int32: Final = INT32.pack
pack_int64: Final = INT64.pack

#: A flexible-version struct with no tagged fields: a zero count. Barnabas never writes optional
#: tagged fields in responses (librdkafka < 2.2 misreads them, protocol.md §5 gotcha 2).
EMPTY_TAGGED_FIELDS: Final = b"\x00"

_INT16_MAX = 0x7FFF
_INT32_MAX = 0x7FFF_FFFF
_NULL_INT16: Final = b"\xff\xff"
_NULL_INT32: Final = b"\xff\xff\xff\xff"
_NULL_COMPACT: Final = b"\x00"

# One-byte varints are by far the most common (lengths and counts below 128), so they come
# from a table instead of being built.
_ONE_BYTE: Final = tuple(bytes((i,)) for i in range(128))


def uvarint(value: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint (LEB128)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        raise LocalProtocolError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Encode a 32-bit signed integer as a zigzag varint (record fields, ByteUtils.writeVarint)."""
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFF_FFFF)


def varlong(value: int) -> bytes:
    """Encode a 64-bit signed integer as a zigzag varlong (ByteUtils.writeVarlong)."""
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF)


def compact_string(value: str) -> bytes:
    """COMPACT_STRING: uvarint(length + 1) then UTF-8."""
    data = value.encode()
    size = len(data) + 1
    return (_ONE_BYTE[size] if size < 0x80 else uvarint(size)) + data


def compact_nullable_string(value: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING: 0 for null, else as compact_string."""
    if value is None:
        return _NULL_COMPACT
    return compact_string(value)


def legacy_string(value: str) -> bytes:
    """STRING: int16 length then UTF-8.

    Raises:
        LocalProtocolError: the UTF-8 form is longer than 32767 bytes.
    """
    data = value.encode()
    if len(data) > _INT16_MAX:
        raise LocalProtocolError(f"string of {len(data)} bytes does not fit a legacy STRING")
    return INT16.pack(len(data)) + data


def legacy_nullable_string(value: str | None) -> bytes:
    """NULLABLE_STRING: int16 -1 for null, else as legacy_string."""
    if value is None:
        return _NULL_INT16
    return legacy_string(value)


def compact_bytes(value: bytes | bytearray | memoryview) -> bytes:
    """COMPACT_BYTES: uvarint(length + 1) then the bytes (copied)."""
    return uvarint(len(value) + 1) + value


def compact_nullable_bytes(value: bytes | bytearray | memoryview | None) -> bytes:
    """COMPACT_NULLABLE_BYTES: 0 for null, else as compact_bytes."""
    if value is None:
        return _NULL_COMPACT
    return compact_bytes(value)


def legacy_bytes(value: bytes | bytearray | memoryview) -> bytes:
    """BYTES: int32 length then the bytes (copied)."""
    if len(value) > _INT32_MAX:
        raise LocalProtocolError(f"{len(value)} bytes do not fit a legacy BYTES")
    return INT32.pack(len(value)) + value


def legacy_nullable_bytes(value: bytes | bytearray | memoryview | None) -> bytes:
    """NULLABLE_BYTES: int32 -1 for null, else as legacy_bytes."""
    if value is None:
        return _NULL_INT32
    return legacy_bytes(value)


def compact_array_length(count: int | None) -> bytes:
    """COMPACT_ARRAY length: uvarint(count + 1), 0 for a null array."""
    if count is None:
        return _NULL_COMPACT
    return uvarint(count + 1)


def legacy_array_length(count: int | None) -> bytes:
    """ARRAY length: int32 count, -1 for a null array."""
    if count is None:
        return _NULL_INT32
    return INT32.pack(count)


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    """UUID: 16 bytes big-endian; null is written as the zero UUID, as Kafka's Uuid.ZERO_UUID."""
    if value is None:
        return bytes(16)
    return value.bytes
