"""Write a quota's throttle time into an answer already encoded: it is known only once the answer is built.

Rules this module keeps:

- Most responses carry ``throttle_time_ms`` as the first field of their body: its four bytes are
  overwritten in place, after the size prefix, the correlation id and (in a flexible header) the
  header's tagged fields. An answer in chunks (Fetch) has them in its first chunk.
- The few where it comes later (Produce after its results, ApiVersions after its API list,
  OffsetDelete after its error code) are decoded and encoded again with the new value; they are
  small, and rewritten only when a client is throttled.
- A version without the field (Kafka's oldest) is returned unchanged; the connection is still held
  back for the throttle time.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import struct
from typing import Any, TypeVar

from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.primitive import i32Timedelta

from ._client import _response_schema, decode_response
from ._errors import LocalProtocolError
from ._requests import skip_header_tags
from ._responses import encode_response

__all__ = ["with_throttle_time"]

_INT32 = struct.Struct(">i")
_INT32_MAX = 2**31 - 1
_SIZE_AND_CORRELATION = 8

Answer = TypeVar("Answer", bytes, bytearray, list[Any])


class _Layout(enum.Enum):
    NONE = enum.auto()
    FIRST = enum.auto()
    FIRST_AFTER_TAGS = enum.auto()
    LATER = enum.auto()


@functools.cache
def _layout(api_key: int, api_version: int) -> _Layout:
    try:
        schema = _response_schema(api_key, api_version)
    except LocalProtocolError:
        return _Layout.NONE
    names = [f.name for f in dataclasses.fields(schema)]
    if "throttle_time" not in names:
        return _Layout.NONE
    if names[0] != "throttle_time":
        return _Layout.LATER
    return _Layout.FIRST_AFTER_TAGS if schema.__header_schema__ is ResponseHeaderV1 else _Layout.FIRST


def with_throttle_time(api_key: int, api_version: int, answer: Answer, throttle_ms: int) -> Answer:
    """``answer`` (a whole frame, size prefix included, or its chunks) with ``throttle_time_ms`` set.

    Raises:
        RemoteProtocolError: a rewritten answer does not decode (a broken encoder).
    """
    layout = _layout(api_key, api_version)
    throttle_ms = min(max(throttle_ms, 0), _INT32_MAX)
    if layout is _Layout.NONE:
        return answer
    if layout is _Layout.LATER:
        frame = bytes(answer[0]) if isinstance(answer, list) and len(answer) == 1 else answer
        if not isinstance(frame, bytes | bytearray):
            return answer  # never: these answers are one frame
        correlation_id, body = decode_response(api_key, api_version, memoryview(frame)[4:])
        duration = i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms))
        rewritten = encode_response(correlation_id, dataclasses.replace(body, throttle_time=duration))
        return [rewritten] if isinstance(answer, list) else type(answer)(rewritten)
    if isinstance(answer, list):
        return [_patched(layout, answer[0], throttle_ms), *answer[1:]]
    return type(answer)(_patched(layout, answer, throttle_ms))  # bytes in, bytes out


def _patched(layout: _Layout, head: Any, throttle_ms: int) -> bytearray | memoryview:
    """``head`` patched in place where it is writable (a Fetch head is), else a patched copy."""
    writable = isinstance(head, bytearray) or (isinstance(head, memoryview) and not head.readonly)
    out = head if writable else bytearray(head)
    offset = _SIZE_AND_CORRELATION
    if layout is _Layout.FIRST_AFTER_TAGS:
        offset = skip_header_tags(out, offset, "response header")
    _INT32.pack_into(out, offset, throttle_ms)
    return out
