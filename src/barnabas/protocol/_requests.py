"""Request headers (v0-v2) and request bodies, decoded with kio.

Rules this module keeps:

- The header is parsed by hand: api_key, api_version and correlation_id sit at fixed offsets,
  so even a request we cannot decode can be answered or logged with its correlation id.
- ``client_id`` is a legacy nullable string in every header version (Kafka special-cases it
  in RequestHeader.json); flexible versions add a tagged-field section, which is skipped.
- Bodies go through kio's native reader, once ``check_declared_sizes`` has refused any array
  the frame cannot hold (kio reserves room for a declared count before reading it, and a
  refused reservation aborts the process); a frame it refuses only for an unknown tagged field
  is retried once through ``strip_unknown_tags``. Produce bodies go through the hand-written
  decoder instead (``_produce_request``), whose records are views of the frame: a writable
  frame stays the records' buffer. kio needs ``bytes``, so other frames are converted.
- Every failure to decode surfaces as RemoteProtocolError: the caller closes the connection.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from ._declared_sizes import check_declared_sizes, check_tagged_count, read_uvarint
from ._errors import RemoteProtocolError, UnsupportedApiError
from ._produce_request import PRODUCE_REQUEST_VERSIONS, decode_produce_request
from ._tagged import strip_unknown_tags

__all__ = ["Request", "RequestHeader", "decode_request", "peek_header", "request_schema"]

_FIXED_HEADER = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_PRODUCE_KEY = 0


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header, the kio body entity and the frame size in bytes."""

    header: RequestHeader
    body: Any
    size: int


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """Return (api_key, api_version, correlation_id) without decoding anything else.

    Raises:
        RemoteProtocolError: the frame is shorter than the fixed header fields.
    """
    if len(frame) < _FIXED_HEADER.size:
        raise RemoteProtocolError(f"request of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


@functools.cache
def request_schema(api_key: int, api_version: int) -> type[Any]:
    """The kio request class for (api_key, api_version).

    Raises:
        UnsupportedApiError: kio has no schema for it.
    """
    try:
        return load_request_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise UnsupportedApiError(api_key, api_version, "no schema") from exc


_READERS: dict[type, Any] = {}


def _reader(schema: type) -> Any:
    reader = _READERS.get(schema)
    if reader is None:
        reader = _READERS[schema] = entity_reader(schema)
    return reader


def _parse_header(frame: bytes | bytearray | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    api_key, api_version, correlation_id = peek_header(frame)
    pos = _FIXED_HEADER.size
    if len(frame) < pos + 2:
        raise RemoteProtocolError("request header is truncated (client_id)")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id: str | None = None
    if length >= 0:
        if len(frame) < pos + length:
            raise RemoteProtocolError("request header is truncated (client_id)")
        try:
            client_id = bytes(frame[pos : pos + length]).decode()
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError("client_id is not UTF-8") from exc
        pos += length
    if flexible:
        pos = skip_header_tags(frame, pos, "request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_header_tags(frame: bytes | bytearray | memoryview, pos: int, where: str) -> int:
    """Skip the tagged-field section of a flexible request or response header (``where`` names it).

    Raises:
        RemoteProtocolError: the section runs past the frame or declares over 10,000 fields.
    """
    end = len(frame)
    count, pos = read_uvarint(frame, pos, end)
    check_tagged_count(count, end - pos, where)
    for _ in range(count):
        _, pos = read_uvarint(frame, pos, end)
        size, pos = read_uvarint(frame, pos, end)
        pos += size
    if pos > len(frame):
        raise RemoteProtocolError(f"{where} is truncated (tagged fields)")
    return pos


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a whole request frame (the payload after the size prefix).

    Raises:
        UnsupportedApiError: no schema for the api key and version.
        RemoteProtocolError: the bytes do not decode.
    """
    api_key, api_version, _ = peek_header(frame)
    schema = request_schema(api_key, api_version)
    header, offset = _parse_header(frame, bool(schema.__flexible__))
    if api_key == _PRODUCE_KEY and api_version in PRODUCE_REQUEST_VERSIONS:
        return Request(header, decode_produce_request(frame, offset, api_version), len(frame))
    if not isinstance(frame, bytes):
        frame = bytes(frame)
    check_declared_sizes(schema, frame, offset)
    try:
        body, _ = _reader(schema)(frame, offset)
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise RemoteProtocolError(f"cannot decode {schema.__name__}: {exc}") from exc
        stripped = strip_unknown_tags(schema, frame, offset)
        try:
            body, _ = _reader(schema)(stripped, 0)
        except (SerialError, KeyError, ValueError, TypeError) as retry_exc:
            raise RemoteProtocolError(f"cannot decode {schema.__name__}: {retry_exc}") from retry_exc
    except (SerialError, ValueError, TypeError, OverflowError) as exc:
        raise RemoteProtocolError(f"cannot decode {schema.__name__} v{api_version}: {exc}") from exc
    return Request(header, body, len(frame))
