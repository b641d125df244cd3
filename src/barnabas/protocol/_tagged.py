"""Strip tagged fields a schema does not know, so kio's native reader can decode the rest.

The protocol says unknown tagged fields must be skipped (KIP-482); kio 0.6.5's native reader
raises ``KeyError('Unknown tagged field tag: N')`` instead. This module is the slow fallback:
it walks a request against its kio schema in pure Python and copies it, dropping every tag the
schema lacks. It runs only after the native reader refused a frame, so clients newer than
kio's schemas keep working at some cost to that one request.

Rules: the walk follows kio's own field metadata (``kafka_type``, ``tag``) and wire rules
(compact encodings in flexible versions, KIP-893 nullable structs), and any inconsistency
raises RemoteProtocolError, never IndexError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from ._errors import RemoteProtocolError

__all__ = ["FIXED_SIZES", "strip_unknown_tags"]

#: Bytes of each fixed-size Kafka type (the declared-size walk uses the same table).
FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip


class _Cursor:
    """A read position over the input that copies what it passes into ``out``."""

    __slots__ = ("buf", "out", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.out = bytearray()

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RemoteProtocolError("request is truncated")
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def copy(self, n: int) -> None:
        self.out += self.take(n)

    def read_uvarint(self) -> int:
        value = shift = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RemoteProtocolError("unsigned varint is too long")

    def copy_uvarint(self) -> int:
        start = self.pos
        value = self.read_uvarint()
        self.out += self.buf[start : self.pos]
        return value

    def copy_int(self, size: int) -> int:
        return int.from_bytes(self.take_and_copy(size), "big", signed=True)

    def take_and_copy(self, size: int) -> bytes:
        chunk = self.take(size)
        self.out += chunk
        return chunk


def _write_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


_Walker = Callable[[_Cursor], None]


def _length_prefixed(flexible: bool, legacy_size: int) -> _Walker:
    """Strings (int16 length) and bytes (int32 length); compact forms use uvarint(n + 1)."""

    def walk(cursor: _Cursor) -> None:
        n = cursor.copy_uvarint() - 1 if flexible else cursor.copy_int(legacy_size)
        if n > 0:
            cursor.copy(n)

    return walk


def _primitive_walker(kafka_type: str, flexible: bool) -> _Walker:
    if kafka_type in FIXED_SIZES:
        size = FIXED_SIZES[kafka_type]
        return lambda cursor: cursor.copy(size)
    if kafka_type == "string":
        return _length_prefixed(flexible, 2)
    if kafka_type in ("bytes", "records"):
        return _length_prefixed(flexible, 4)
    raise RemoteProtocolError(f"no walker for kafka type {kafka_type!r}")


def _array_walker(inner: _Walker, flexible: bool) -> _Walker:
    def walk(cursor: _Cursor) -> None:
        n = cursor.copy_uvarint() - 1 if flexible else cursor.copy_int(4)
        for _ in range(max(n, 0)):
            inner(cursor)

    return walk


def _nullable_struct(inner: _Walker) -> _Walker:
    def walk(cursor: _Cursor) -> None:
        (marker,) = cursor.take_and_copy(1)
        if marker != 0xFF:
            inner(cursor)

    return walk


def _field_walker(field: dataclasses.Field[Any], flexible: bool) -> _Walker:
    kind = classify_field(field)
    walker: _Walker
    match kind:
        case PrimitiveField() | PrimitiveTupleField():
            walker = _primitive_walker(get_schema_field_type(field), flexible)
        case EntityField(entity_type):
            walker = _entity_walker(entity_type)
            if is_optional(field) and get_field_tag(field) is None:
                walker = _nullable_struct(walker)
        case EntityTupleField(entity_type):
            walker = _entity_walker(entity_type)
    return _array_walker(walker, flexible) if kind.is_array else walker


_WALKERS: dict[type, _Walker] = {}


def _entity_walker(entity_type: type) -> _Walker:
    walker = _WALKERS.get(entity_type)
    if walker is None:
        walker = _WALKERS[entity_type] = _build_entity_walker(entity_type)
    return walker


def _build_entity_walker(entity_type: Any) -> _Walker:
    flexible = bool(entity_type.__flexible__)
    plain: list[_Walker] = []
    known_tags: set[int] = set()
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        if tag is None:
            plain.append(_field_walker(field, flexible))
        else:
            known_tags.add(int(tag))

    def walk(cursor: _Cursor) -> None:
        for walk_field in plain:
            walk_field(cursor)
        if not flexible:
            return
        count = cursor.read_uvarint()
        kept = bytearray()
        kept_count = 0
        for _ in range(count):
            tag = cursor.read_uvarint()
            size = cursor.read_uvarint()
            data = cursor.take(size)
            if tag in known_tags:
                _write_uvarint(kept, tag)
                _write_uvarint(kept, size)
                kept += data
                kept_count += 1
        _write_uvarint(cursor.out, kept_count)
        cursor.out += kept

    return walk


def strip_unknown_tags(entity_type: type[Any], buf: bytes, offset: int) -> bytes:
    """Return ``buf[offset:]`` re-encoded without tags unknown to ``entity_type``.

    Raises:
        RemoteProtocolError: the bytes do not follow the schema.
    """
    cursor = _Cursor(buf, offset)
    _entity_walker(entity_type)(cursor)
    return bytes(cursor.out) + buf[cursor.pos :]
