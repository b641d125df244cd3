"""Request decoding: hand-parsed headers, kio bodies, and the unknown-tag fallback."""

import datetime
import io
import struct
import uuid

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from barnabas.protocol import RemoteProtocolError, UnsupportedApiError, decode_request, peek_header


def body_bytes(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def header(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    *,
    flexible: bool,
    tags: bytes = b"\x00",
) -> bytes:
    client = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    return struct.pack(">hhi", api_key, version, correlation_id) + client + (tags if flexible else b"")


def metadata_request() -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def untagged_body() -> object:
    """What kio decodes from the same request without extra tags (a zero UUID reads as None)."""
    return decode_request(header(3, 12, 1, "c", flexible=True) + body_bytes(metadata_request())).body


def test_flexible_request_with_header_tags_and_null_client_id() -> None:
    frame = header(3, 12, 42, None, flexible=True, tags=b"\x01\x05\x02ab") + body_bytes(metadata_request())
    request = decode_request(frame)
    assert request.header.correlation_id == 42
    assert request.header.client_id is None
    assert request.body.topics[0].name == "orders"


def test_unknown_tagged_field_in_body_is_skipped() -> None:
    body = body_bytes(metadata_request())
    assert body.endswith(b"\x00")
    # Replace the empty top-level tag section with two unknown tags (7 and 99).
    tagged = body[:-1] + bytes([2, 7, 1, 0xAA, 99, 2, 0xBB, 0xCC])
    request = decode_request(header(3, 12, 1, "c", flexible=True) + tagged)
    assert request.body == untagged_body()


def test_unknown_tag_inside_nested_struct_is_skipped() -> None:
    body = body_bytes(metadata_request())
    # Layout: compact array len (1 byte), topic: uuid(16) + compact string(1+6) + tags(1), ...
    nested_tags_at = 1 + 16 + 1 + len("orders")
    assert body[nested_tags_at] == 0
    tagged = body[:nested_tags_at] + bytes([1, 3, 1, 0x01]) + body[nested_tags_at + 1 :]
    request = decode_request(header(3, 12, 1, "c", flexible=True) + tagged)
    assert request.body == untagged_body()


def test_produce_request_keeps_records_bytes() -> None:
    records = b"\x00" * 70
    produce = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name="t", partition_data=(PartitionProduceData(index=i32(0), records=records),)),),
    )
    request = decode_request(header(0, 9, 7, "p", flexible=True) + body_bytes(produce))
    assert request.body.topic_data[0].partition_data[0].records == records


def test_truncated_body_is_a_protocol_error() -> None:
    frame = header(3, 12, 1, "c", flexible=True) + body_bytes(metadata_request())
    with pytest.raises(RemoteProtocolError):
        decode_request(frame[:-5])


def test_truncated_header_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        peek_header(b"\x00\x03\x00")
    with pytest.raises(RemoteProtocolError):
        decode_request(struct.pack(">hhih", 3, 12, 1, 10) + b"abc")


def test_unknown_api_key_has_no_schema() -> None:
    with pytest.raises(UnsupportedApiError):
        decode_request(header(999, 0, 1, "c", flexible=False))


def test_api_versions_v3_body() -> None:
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    decoded = decode_request(header(18, 3, 5, "c", flexible=True) + body_bytes(request))
    assert decoded.body.client_software_name == "x"
