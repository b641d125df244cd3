"""Every request decoder the broker and the proxy run: ``decode_request`` on a whole frame.

The input is one request frame (the payload after the size prefix), header included, so the
fuzzer reaches every (api key, version) kio has a schema for: kio's native reader behind the
declared-size walk, the unknown-tag fallback (``strip_unknown_tags``), and the hand-written
Produce decoder, which is also given the frame as a writable view, as the broker hands it a large
frame. ``decode_request`` documents RemoteProtocolError (UnsupportedApiError included) only.

A Produce frame the hand-written decoder reads must read the same through kio (``_produce_request``
promises the two agree).
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

from kio.serial.errors import SerialError

from barnabas.protocol import RemoteProtocolError, decode_request, peek_header, request_schema
from barnabas.protocol._declared_sizes import check_declared_sizes
from barnabas.protocol._produce_request import PRODUCE_REQUEST_VERSIONS, ProduceRequestData
from barnabas.protocol._requests import _reader, skip_header_tags
from barnabas.protocol._tagged import strip_unknown_tags
from tests.fuzz.harness import Target, attempt

_PRODUCE = 0
_MS = datetime.timedelta(milliseconds=1)
_INT16 = struct.Struct(">h")
#: What kio's reader raises on bytes it refuses (as ``decode_request`` catches them).
_KIO_ERRORS = (SerialError, KeyError, ValueError, TypeError, OverflowError, RemoteProtocolError)


def _plain(body: Any) -> tuple[Any, ...]:
    """A Produce body, ours or kio's, as plain values."""
    timeout = body.timeout_ms if isinstance(body, ProduceRequestData) else body.timeout // _MS
    return (
        body.transactional_id,
        int(body.acks),
        int(timeout),
        [
            (t.name, [(int(p.index), None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in body.topic_data
        ],
    )


def _kio_produce(frame: bytes, offset: int, version: int) -> Any:
    """The Produce body as kio reads it, by decode_request's path for every other API."""
    schema = request_schema(_PRODUCE, version)
    check_declared_sizes(schema, frame, offset)
    try:
        body, _ = _reader(schema)(frame, offset)
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise
        body, _ = _reader(schema)(strip_unknown_tags(schema, frame, offset), 0)
    return body


def _body_offset(frame: bytes, version: int) -> int:
    """Where the body of a Produce frame decode_request accepted starts."""
    (length,) = _INT16.unpack_from(frame, 8)
    offset = 10 + max(length, 0)
    return skip_header_tags(frame, offset, "request header") if version >= 9 else offset


def run(data: bytes) -> None:
    request = attempt(lambda: decode_request(data), RemoteProtocolError)
    if len(data) < 8:
        return
    api_key, version, _ = peek_header(data)
    if api_key != _PRODUCE or version not in PRODUCE_REQUEST_VERSIONS:
        return
    view_request = attempt(lambda: decode_request(memoryview(bytearray(data))), RemoteProtocolError)
    assert (request is None) == (view_request is None), "a writable view decodes unlike the same bytes"
    if request is None:
        return
    assert view_request is not None and _plain(view_request.body) == _plain(request.body)
    kio_body = attempt(lambda: _kio_produce(data, _body_offset(data, version), version), *_KIO_ERRORS)
    assert kio_body is not None, "kio refuses a Produce request the hand-written decoder reads"
    assert _plain(kio_body) == _plain(request.body), "the Produce decoder and kio read different requests"


TARGET = Target("requests", run, __doc__ or "", max_len=8192)
