"""The client side of the codec: encode requests, decode responses (broker-to-broker traffic).

A follower sends Fetch, OffsetForLeaderEpoch, Metadata and ApiVersions to its leader with
these; the I/O shell is ``barnabas.client``.

Rules this module keeps:

- Request bodies are kio request entities; the entity's class must be the schema for the
  (api_key, api_version) it is sent as, so a body is never written in another version's layout.
- The request header is v2 (v1 plus an empty tagged-field section) when the schema is flexible
  and v1 otherwise, as kio's ``__header_schema__`` says; ``client_id`` is a legacy nullable
  string in both (RequestHeader.json).
- The response header is v1 (correlation id plus tagged fields, skipped) when the response schema
  says so and v0 otherwise. kio already encodes Kafka's exception: ApiVersions responses use
  header v0 in every version (KIP-511), so its ``__header_schema__`` is trusted as is.
- An ApiVersions response whose error is UNSUPPORTED_VERSION is read in the v0 body layout,
  which is how a broker answers a version it does not know (Kafka's ApiVersionsResponse.parse).
- A response must be consumed exactly: trailing bytes mean the two sides disagree on the
  version, and that is a RemoteProtocolError like any other undecodable frame.
- Unknown tagged fields in a response body are skipped (KIP-482) through the same slow path the
  request decoder uses (``strip_unknown_tags``), and a body declaring arrays its frame cannot
  hold is refused before kio reads it (``check_declared_sizes``), as requests are.
- Records fields come back as ``bytes`` exactly as the peer sent them: kio's native reader
  copies them once out of the frame (about a memcpy, ~0.07 ms per MB) and never parses them.
- Our own misuse (an unknown schema, a body of the wrong class, a value the wire cannot carry)
  raises LocalProtocolError; bytes from the peer that do not decode raise RemoteProtocolError.
"""

from __future__ import annotations

import functools
import io
import struct
import sys
from collections.abc import Mapping
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial.errors import SerialError

from ._declared_sizes import check_declared_sizes
from ._errors import LocalProtocolError, RemoteProtocolError, UnsupportedApiError
from ._requests import _reader, request_schema, skip_header_tags
from ._responses import _writer
from ._tagged import strip_unknown_tags

__all__ = [
    "decode_response",
    "encode_request",
    "request_class",
    "response_class",
    "response_correlation_id",
    "usable_version",
]

_API_VERSIONS = 18
_REQUEST_HEAD = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UNSUPPORTED_VERSION = ErrorCode.unsupported_version.value
# What kio's writer raises for a value that does not fit its field (found by trying: a tuple of
# ints where entities belong gives AttributeError, an int32 out of range struct.error).
_ENCODE_ERRORS = (SerialError, AttributeError, TypeError, ValueError, OverflowError, struct.error)
_DECODE_ERRORS = (SerialError, ValueError, TypeError, OverflowError, IndexError)


def _nested(schema: type[Any], entity: str | None) -> type[Any]:
    if entity is None:
        return schema
    found = getattr(sys.modules[schema.__module__], entity, None)
    if not isinstance(found, type) or not hasattr(found, "__flexible__"):
        raise LocalProtocolError(f"{schema.__module__} has no entity named {entity!r}")
    return found


def request_class(api_key: int, api_version: int, entity: str | None = None) -> type[Any]:
    """The kio request class for (api_key, api_version), or one of its nested entity classes.

    Args:
        api_key: the API key (1 = Fetch, 3 = Metadata, 18 = ApiVersions, 23 = OffsetForLeaderEpoch).
        api_version: the version the request will be sent as.
        entity: the name of a nested class of the same schema module (e.g. ``"FetchTopic"``);
            None for the top-level request class.

    Raises:
        LocalProtocolError: kio has no such schema or entity.
    """
    try:
        schema = request_schema(api_key, api_version)
    except UnsupportedApiError as exc:
        raise LocalProtocolError(f"no request schema for api_key={api_key} v{api_version}") from exc
    return _nested(schema, entity)


@functools.cache
def _response_schema(api_key: int, api_version: int) -> type[Any]:
    try:
        return load_response_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise LocalProtocolError(f"no response schema for api_key={api_key} v{api_version}") from exc


def response_class(api_key: int, api_version: int, entity: str | None = None) -> type[Any]:
    """The kio response class for (api_key, api_version), or one of its nested entity classes.

    Raises:
        LocalProtocolError: kio has no such schema or entity.
    """
    return _nested(_response_schema(api_key, api_version), entity)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """Encode a kio request entity as a complete frame: int32 size, request header, body.

    Args:
        api_key: the API key the body is sent as.
        api_version: the version the body is sent as; the body's class must be its schema.
        correlation_id: echoed by the peer in the response header (int32).
        client_id: the header's client id; None is written as a null string.
        body: an instance of ``request_class(api_key, api_version)``.

    Returns:
        The frame, size prefix included, ready for ``transport.write``.

    Raises:
        LocalProtocolError: no schema for (api_key, api_version), a body of another class, or a
            field value the wire cannot carry.
    """
    schema = request_class(api_key, api_version)
    if type(body) is not schema:
        raise LocalProtocolError(
            f"api_key={api_key} v{api_version} needs a {schema.__module__}.{schema.__name__}, got {type(body)!r}"
        )
    client = b"" if client_id is None else client_id.encode()
    if len(client) > 0x7FFF:
        raise LocalProtocolError(f"client_id of {len(client)} bytes does not fit a legacy string")
    client_length = -1 if client_id is None else len(client)
    buffer = io.BytesIO()
    try:
        buffer.write(_REQUEST_HEAD.pack(0, api_key, api_version, correlation_id, client_length))
    except struct.error as exc:
        raise LocalProtocolError(f"request header out of range: {exc}") from exc
    buffer.write(client)
    if schema.__flexible__:
        buffer.write(b"\x00")  # request header v2: no tagged fields
    try:
        _writer(schema)(buffer, body)
    except _ENCODE_ERRORS as exc:
        raise LocalProtocolError(f"cannot encode {schema.__name__} v{api_version}: {exc!r}") from exc
    frame = buffer.getbuffer()
    _INT32.pack_into(frame, 0, len(frame) - 4)
    del frame  # release the export so getvalue() may share the buffer
    return buffer.getvalue()


def response_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (the payload after the size prefix).

    Raises:
        RemoteProtocolError: the frame is too short to hold one.
    """
    if len(frame) < 4:
        raise RemoteProtocolError(f"response of {len(frame)} bytes is too short for a header")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    return int(correlation_id)


def _read_body(schema: type[Any], frame: bytes, offset: int) -> Any:
    check_declared_sizes(schema, frame, offset)
    try:
        body, size = _reader(schema)(frame, offset)
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise RemoteProtocolError(f"cannot decode {schema.__name__}: {exc}") from exc
        stripped = strip_unknown_tags(schema, frame, offset)
        try:
            body, size = _reader(schema)(stripped, 0)
        except (*_DECODE_ERRORS, KeyError) as retry_exc:
            raise RemoteProtocolError(f"cannot decode {schema.__name__}: {retry_exc}") from retry_exc
        frame, offset = stripped, 0
    except _DECODE_ERRORS as exc:
        raise RemoteProtocolError(f"cannot decode {schema.__name__} v{schema.__version__}: {exc}") from exc
    if offset + size != len(frame):
        raise RemoteProtocolError(
            f"{schema.__name__} v{schema.__version__} left {len(frame) - offset - size} bytes unread"
        )
    return body


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """Decode a response frame (the payload after the size prefix) to its correlation id and body.

    Args:
        api_key: the API key of the request this answers.
        api_version: the version that request was sent as.
        frame: the frame payload, as ``FrameReader.next_frame`` returns it (a view is copied once).

    Returns:
        (correlation_id, kio response entity). For ApiVersions with UNSUPPORTED_VERSION the
        entity is an ``api_versions.v0`` response whatever version was asked for.

    Raises:
        LocalProtocolError: kio has no response schema for (api_key, api_version).
        RemoteProtocolError: the bytes do not decode as that response, or leave bytes over.
    """
    schema = _response_schema(api_key, api_version)
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # kio reads only bytes; a relayed large answer arrives as a view
    correlation_id = response_correlation_id(frame)
    offset = 4
    if schema.__header_schema__ is ResponseHeaderV1:
        offset = skip_header_tags(frame, offset, "response header")
    if (
        api_key == _API_VERSIONS
        and api_version > 0
        and len(frame) >= offset + 2
        and _INT16.unpack_from(frame, offset)[0] == _UNSUPPORTED_VERSION
    ):
        schema = _response_schema(_API_VERSIONS, 0)
    return correlation_id, _read_body(schema, frame, offset)


def usable_version(server_ranges: Mapping[int, tuple[int, int]], api_key: int, ours: range) -> int | None:
    """The highest version of ``api_key`` both sides speak, or None.

    Args:
        server_ranges: api_key -> (min_version, max_version), from the peer's ApiVersions.
        api_key: the API to send.
        ours: the versions this side can encode and understand.
    """
    if api_key not in server_ranges or not ours:
        return None
    low, high = server_ranges[api_key]
    best = min(high, ours[-1])
    return best if best >= max(low, ours[0]) else None
