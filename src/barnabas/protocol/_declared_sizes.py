"""Refuse a frame whose declared sizes it cannot hold, before kio's native reader allocates for them.

kio 0.6.5's native reader reserves room for an array's elements as soon as it reads the declared
count (a vector of that capacity): a 20-byte MetadataRequest declaring 2^32 - 1 topics asks for
32 GiB, and when the allocator refuses, the process aborts. This module walks a request or
response against its kio schema without building anything, and refuses what kio must never see.

Rules this module keeps:

- An array may declare at most as many elements as there are bytes left in its frame (or in the
  tagged field holding it), since every element takes at least one byte (Kafka's generated readers
  make the same check), and at most ``MAX_ARRAY_ELEMENTS``. A tagged-field section may declare at
  most ``MAX_TAGGED_FIELDS`` fields. Those are Kafka 4.4's limits. What kio then allocates is
  bounded by a small multiple of the frame's size.
- Strings and byte fields are not checked here: kio checks their length against the buffer before
  copying (measured: a 2^31 - 1 byte string in a 1 KiB frame costs nothing).
- The walk follows kio's field metadata and wire rules exactly as ``_tagged`` does (compact forms in
  flexible versions, KIP-893 nullable structs), descending into the tagged fields the schema knows,
  which kio decodes too, and skipping the others by their size.
- A null array (count -1, or 0 in compact form) where the schema allows none is refused: kio
  would read it as None, which handlers and the proxy's split then iterate; Kafka refuses it.
- A frame the walk cannot follow (truncated, an impossible count) raises RemoteProtocolError, as
  kio would; one it can is left to kio, which still decides everything else. Nothing is copied.
- Walkers are built once per kio class and cached.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any, Final

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
from ._tagged import FIXED_SIZES

__all__ = ["MAX_ARRAY_ELEMENTS", "MAX_TAGGED_FIELDS", "check_declared_sizes", "read_uvarint"]

#: The most elements an array may declare (Kafka 4.4's limit).
MAX_ARRAY_ELEMENTS: Final = 1_000_000
#: The most fields a tagged-field section may declare (Kafka 4.4's limit).
MAX_TAGGED_FIELDS: Final = 10_000

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

#: Reads one field of ``buf`` at ``pos`` within ``end``; returns the position after it.
_Walker = Callable[[bytes, int, int], int]


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """One unsigned varint at ``pos``: (value, next position).

    Raises:
        RemoteProtocolError: it runs past ``end`` or over 5 bytes.
    """
    value = shift = 0
    while True:
        if pos >= end:
            raise RemoteProtocolError("a varint runs past the end of the frame")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RemoteProtocolError("unsigned varint is too long")


def check_count(count: int, left: int, what: str) -> None:
    """Refuse an array ``count`` that ``left`` bytes cannot hold, or one over MAX_ARRAY_ELEMENTS.

    Raises:
        RemoteProtocolError: with ``what`` naming the message, and the count in the text.
    """
    if count > left or count > MAX_ARRAY_ELEMENTS:
        raise RemoteProtocolError(
            f"{what} declares an array of {count} elements with {max(left, 0)} bytes left "
            f"(at most {MAX_ARRAY_ELEMENTS} elements, each of a byte or more)"
        )


def check_tagged_count(count: int, left: int, what: str) -> None:
    """Refuse a tagged-field section of more than MAX_TAGGED_FIELDS fields, or more than ``left`` bytes hold.

    Raises:
        RemoteProtocolError: with ``what`` naming the message, and the count in the text.
    """
    if count > MAX_TAGGED_FIELDS or 2 * count > left:
        raise RemoteProtocolError(
            f"{what} declares {count} tagged fields with {max(left, 0)} bytes left (at most {MAX_TAGGED_FIELDS})"
        )


def _null(what: str, field: str) -> None:
    raise RemoteProtocolError(f"non-nullable field {field} of {what} was serialized as null")


def _tags(buf: bytes, pos: int, end: int, known: dict[int, _Walker], what: str) -> int:
    """A tagged-field section: known fields walked within their size, unknown ones skipped."""
    count, pos = read_uvarint(buf, pos, end)
    check_tagged_count(count, end - pos, what)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        field_end = pos + size
        if field_end > end:
            raise RemoteProtocolError(f"tagged field {tag} of {what} runs past the end of the frame")
        walk = known.get(tag)
        if walk is not None and walk(buf, pos, field_end) > field_end:
            raise RemoteProtocolError(f"tagged field {tag} of {what} runs past its size")
        pos = field_end
    return pos


# -- walkers, generated as Python source per kio class ----------------------------------------------
#
# A walker is straight-line code: runs of fixed-size fields are one addition, strings and byte
# fields read their length and skip, arrays check their count and loop, nested structs are inlined,
# and a tagged-field section costs one byte when it is empty (the usual case). Reads past the
# buffer raise IndexError or struct.error (mapped by check_declared_sizes); reads past the end of a
# tagged field's bytes are caught when the field's walker returns.


class _Source:
    """The generated lines of one walker, and the names they use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, object] = {
            "_uv": read_uvarint, "_refuse": check_count, "_null": _null, "_tags": _tags, "_i16": _INT16.unpack_from,
            "_i32": _INT32.unpack_from, "_MAX": MAX_ARRAY_ELEMENTS,
        }  # fmt: skip

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def name(self, value: object) -> str:
        key = f"_n{len(self.names)}"
        self.names[key] = value
        return key


def _emit_length_prefixed(src: _Source, depth: int, flexible: bool, legacy_width: int) -> None:
    """Skip a string (int16 length) or bytes (int32 length); compact forms are uvarint(n + 1), 0 for null."""
    if flexible:
        src.emit(depth, "b = buf[pos]")
        src.emit(depth, "if b < 128:")
        src.emit(depth + 1, "pos += b if b else 1")
        src.emit(depth, "else:")
        src.emit(depth + 1, "n, pos = _uv(buf, pos, end)")
        src.emit(depth + 1, "pos += n - 1")
        return
    unpack = "_i16" if legacy_width == 2 else "_i32"
    src.emit(depth, f"(n,) = {unpack}(buf, pos)")
    src.emit(depth, f"pos += {legacy_width} + n if n > 0 else {legacy_width}")


def _emit_count(src: _Source, depth: int, flexible: bool, what: str, field: dataclasses.Field[Any]) -> None:
    """Read an array's count into ``n`` (-1 for null) and refuse one the bytes left cannot hold.

    A null array where the schema has none is refused too: kio would read it as None, where Kafka's
    generated readers refuse it ("non-nullable field ... was serialized as null").
    """
    if flexible:
        src.emit(depth, "b = buf[pos]")
        src.emit(depth, "if b < 128:")
        src.emit(depth + 1, "n = b - 1")
        src.emit(depth + 1, "pos += 1")
        src.emit(depth, "else:")
        src.emit(depth + 1, "n, pos = _uv(buf, pos, end)")
        src.emit(depth + 1, "n -= 1")
    else:
        src.emit(depth, "(n,) = _i32(buf, pos)")
        src.emit(depth, "pos += 4")
    src.emit(depth, "if n > end - pos or n > _MAX:")
    src.emit(depth + 1, f"_refuse(n, end - pos, {what!r})")  # check_count: raises
    if not is_optional(field):
        src.emit(depth, "if n < 0:")
        src.emit(depth + 1, f"_null({what!r}, {field.name!r})")


def _emit_primitive(src: _Source, depth: int, kafka_type: str, flexible: bool) -> None:
    if kafka_type in FIXED_SIZES:
        src.emit(depth, f"pos += {FIXED_SIZES[kafka_type]}")
    elif kafka_type == "string":
        _emit_length_prefixed(src, depth, flexible, 2)
    elif kafka_type in ("bytes", "records"):
        _emit_length_prefixed(src, depth, flexible, 4)
    else:
        raise RemoteProtocolError(f"no walker for kafka type {kafka_type!r}")


def _emit_field(src: _Source, depth: int, field: dataclasses.Field[Any], flexible: bool, what: str) -> None:
    kind = classify_field(field)
    if isinstance(kind, PrimitiveTupleField):
        kafka_type = get_schema_field_type(field)
        _emit_count(src, depth, flexible, what, field)
        if kafka_type in FIXED_SIZES:
            src.emit(depth, f"if n > 0: pos += n * {FIXED_SIZES[kafka_type]}")
            return
        src.emit(depth, "for _ in range(n):")
        _emit_primitive(src, depth + 1, kafka_type, flexible)
        return
    if isinstance(kind, PrimitiveField):
        _emit_primitive(src, depth, get_schema_field_type(field), flexible)
        return
    if isinstance(kind, EntityTupleField):
        _emit_count(src, depth, flexible, what, field)
        src.emit(depth, "for _ in range(n):")
        _emit_entity(src, depth + 1, kind.type_)
        return
    assert isinstance(kind, EntityField)
    if is_optional(field) and get_field_tag(field) is None:  # KIP-893: a marker byte, 0xFF for null
        src.emit(depth, "pos += 1")
        src.emit(depth, "if buf[pos - 1] != 0xFF:")
        _emit_entity(src, depth + 1, kind.type_)
    else:
        _emit_entity(src, depth, kind.type_)


def _emit_entity(src: _Source, depth: int, entity_type: Any) -> None:
    flexible = bool(entity_type.__flexible__)
    what = entity_type.__name__
    run = 0
    known: dict[int, _Walker] = {}
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            known[int(tag)] = _field_walker(field, flexible, what)
            continue
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField) and get_schema_field_type(field) in FIXED_SIZES:
            run += FIXED_SIZES[get_schema_field_type(field)]
            continue
        if run:
            src.emit(depth, f"pos += {run}")
            run = 0
        _emit_field(src, depth, field, flexible, what)
    if run:
        src.emit(depth, f"pos += {run}")
    if flexible:
        src.emit(depth, "if buf[pos]:")
        src.emit(depth + 1, f"pos = _tags(buf, pos, end, {src.name(known)}, {what!r})")
        src.emit(depth, "else:")
        src.emit(depth + 1, "pos += 1")
    if not src.lines or src.lines[-1].strip().endswith(":"):
        src.emit(depth, "pass")


def _compile(src: _Source, body: Callable[[_Source], None]) -> _Walker:
    src.emit(0, "def walk(buf, pos, end):")
    body(src)
    src.emit(1, "return pos")
    namespace = dict(src.names)
    # The source is built above from kio's schema metadata and these names only, never from input.
    exec("\n".join(src.lines), namespace)
    walker: _Walker = namespace["walk"]  # type: ignore[assignment]
    return walker


def _field_walker(field: dataclasses.Field[Any], flexible: bool, what: str) -> _Walker:
    """A walker of one field (a tagged field's bytes)."""
    return _compile(_Source(), lambda src: _emit_field(src, 1, field, flexible, what))


_WALKERS: dict[type, _Walker] = {}


def _entity_walker(entity_type: type) -> _Walker:
    walker = _WALKERS.get(entity_type)
    if walker is None:
        walker = _WALKERS[entity_type] = _compile(_Source(), lambda src: _emit_entity(src, 1, entity_type))
    return walker


def check_declared_sizes(entity_type: type[Any], frame: bytes, offset: int) -> int:
    """Walk the body of ``entity_type`` at ``offset`` of ``frame``; refuse it if kio must not read it.

    Returns:
        The position just after the body.

    Raises:
        RemoteProtocolError: an array declares more elements than the bytes left or than
            MAX_ARRAY_ELEMENTS, or is null where the schema allows no null; a tagged-field section
            declares more than MAX_TAGGED_FIELDS fields; or a field runs past the frame.
    """
    try:
        pos = _entity_walker(entity_type)(frame, offset, len(frame))
    except (IndexError, struct.error) as exc:
        raise RemoteProtocolError(f"{entity_type.__name__} runs past the end of the frame: {exc}") from exc
    if pos > len(frame):
        raise RemoteProtocolError(f"{entity_type.__name__} runs past the end of the frame")
    return pos
