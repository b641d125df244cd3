"""Hand-written ProduceRequest encoder (versions 3-11) whose record sets stay the caller's buffers.

The proxy cuts a client's Produce by partition leader. Encoding each part with kio would copy
every record set twice (into kio's entity, then into its output); this writes only the small
fields and hands each partition's records back as the very object it was given (a view of the
client's frame, from ``decode_produce_request``), for ``transport.writelines``.

Rules this module keeps:

- Concatenating the parts gives the request frame without its int32 size prefix (as a
  ``FrameReader`` hands frames on): request header v1 (api key, version, correlation id, client
  id) for v3-8, v2 (+ empty tagged fields) for flexible v9+, then the body.
- Field layout follows ProduceRequest.json as ``_produce_request`` reads it; no tagged field is
  written, so the bytes are kio's for the same request (tests prove it).
- The first part holds the whole header (so a relay can swap the correlation id in it); a
  record set of one byte or more is a part of its own, never copied; an empty or null one is
  written inline.
"""

from __future__ import annotations

import struct
from typing import Final

from ._errors import LocalProtocolError
from ._produce_request import PRODUCE_REQUEST_VERSIONS, ProduceRequestData
from ._wire import (
    INT32,
    compact_nullable_string,
    compact_string,
    legacy_nullable_string,
    legacy_string,
    uvarint,
)

__all__ = ["encode_produce_request_parts"]

_PRODUCE = 0
_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_ACKS_TIMEOUT = struct.Struct(">hi")
_NULL_RECORDS_V3: Final = b"\xff\xff\xff\xff"
_NULL_COMPACT: Final = b"\x00"
_NO_TAGS: Final = b"\x00"


def encode_produce_request_parts(
    version: int, correlation_id: int, client_id: str | None, data: ProduceRequestData
) -> list[bytes | memoryview]:
    """Encode ``data`` as a ProduceRequest frame (no size prefix), in parts for ``writelines``.

    Returns:
        Framing parts (``bytes``) with each non-empty record set between them as given.

    Raises:
        LocalProtocolError: a version outside 3-11, or a field the wire cannot carry.
    """
    if version not in PRODUCE_REQUEST_VERSIONS:
        raise LocalProtocolError(f"ProduceRequest v{version} cannot be encoded here")
    flexible = version >= 9
    string = compact_string if flexible else legacy_string
    out = bytearray(_HEAD.pack(_PRODUCE, version, correlation_id))
    out += legacy_nullable_string(client_id)  # a legacy string in every header version (RequestHeader.json)
    if flexible:
        out += _NO_TAGS
    out += compact_nullable_string(data.transactional_id) if flexible else legacy_nullable_string(data.transactional_id)
    try:
        out += _ACKS_TIMEOUT.pack(data.acks, data.timeout_ms)
    except struct.error as exc:
        raise LocalProtocolError(f"ProduceRequest acks/timeout out of range: {exc}") from exc
    out += _count(len(data.topic_data), flexible)
    parts: list[bytes | memoryview] = []
    for topic in data.topic_data:
        out += string(topic.name)
        out += _count(len(topic.partition_data), flexible)
        for partition in topic.partition_data:
            out += INT32.pack(partition.index)
            records = partition.records
            if records is None:
                out += _NULL_COMPACT if flexible else _NULL_RECORDS_V3
            else:
                size = records.nbytes
                out += uvarint(size + 1) if flexible else INT32.pack(size)
                if size:
                    parts.append(bytes(out))
                    parts.append(records)
                    out = bytearray()
            if flexible:
                out += _NO_TAGS  # partition
        if flexible:
            out += _NO_TAGS  # topic
    if flexible:
        out += _NO_TAGS  # body
    if out:
        parts.append(bytes(out))
    return parts


def _count(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else INT32.pack(count)
