"""Encode responses that are not on the hot path, with kio's writers.

Rules this module keeps:

- The response header version comes from the kio class (``__header_schema__``): v1 adds an
  empty tagged-field section, v0 does not; ApiVersions always uses v0 (kio encodes that).
- Tagged fields are written only when they differ from their defaults (kio's rule), so a
  handler that never sets them emits none — older librdkafka misreads them.
- An unsupported ApiVersions version is answered in the v0 body format, which every client
  can parse, listing the ApiVersions range (Kafka's ApiVersionsRequest.getErrorResponse).
"""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer
from kio.static.primitive import i16

__all__ = ["encode_api_versions_error", "encode_response", "frame_with_header"]

_INT32 = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")


_WRITERS: dict[type, Any] = {}


def _writer(schema: type) -> Any:
    writer = _WRITERS.get(schema)
    if writer is None:
        writer = _WRITERS[schema] = entity_writer(schema)
    return writer


def frame_with_header(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    """Prefix an encoded body with the size and a response header (v1 when flexible)."""
    tagged = b"\x00" if flexible_header else b""
    size = 4 + len(tagged) + len(body)
    return _SIZE_AND_CORRELATION.pack(size, correlation_id) + tagged + body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Encode a kio response entity as a complete frame (size prefix, header, body)."""
    buffer = io.BytesIO()
    _writer(type(response))(buffer, response)
    flexible_header = type(response).__header_schema__ is ResponseHeaderV1
    return frame_with_header(correlation_id, flexible_header, buffer.getvalue())


def encode_api_versions_error(correlation_id: int, error_code: ErrorCode, min_version: int, max_version: int) -> bytes:
    """An ApiVersions v0-format error body naming the ApiVersions versions we do serve."""
    response = ApiVersionsResponse(
        error_code=error_code,
        api_keys=(ApiVersion(api_key=i16(18), min_version=i16(min_version), max_version=i16(max_version)),),
    )
    return encode_response(correlation_id, response)
