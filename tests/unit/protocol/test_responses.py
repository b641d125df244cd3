import struct

from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.serial import entity_reader

from barnabas.protocol import ErrorCode, encode_api_versions_error


def test_unsupported_api_versions_answer_is_v0_format() -> None:
    frame = encode_api_versions_error(77, ErrorCode.unsupported_version, 0, 4)
    size, correlation_id = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    assert correlation_id == 77
    body, consumed = entity_reader(ApiVersionsResponse)(frame[8:], 0)
    assert consumed == len(frame) - 8
    assert body.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
