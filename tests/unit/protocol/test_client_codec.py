"""The client side of the codec against the server side: every request encode_request writes
decodes with decode_request to the same body, and every response the broker's encoders write
decodes with decode_response to the same values (Fetch records byte for byte)."""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from barnabas.protocol import (
    FetchPartitionResult,
    LocalProtocolError,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    RemoteProtocolError,
    build_record_batch,
    decode_batch_records,
    decode_request,
    decode_response,
    encode_api_versions_error,
    encode_fetch_response,
    encode_metadata_response,
    encode_request,
    encode_response,
    iter_batch_headers,
    request_class,
    response_class,
    response_correlation_id,
    usable_version,
)

FETCH, METADATA, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH = 1, 3, 18, 23
TOPIC_ID = uuid.UUID("8c1a6f4e-2d55-4bb5-9d0e-3f4a5b6c7d8e")


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def payload(frame: bytes | list[bytes | memoryview]) -> bytes:
    """The frame without its size prefix (as FrameReader returns it), checking the prefix."""
    data = frame if isinstance(frame, bytes) else b"".join(bytes(chunk) for chunk in frame)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


def batches(count: int, first_offset: int = 0, records_each: int = 3) -> list[bytes]:
    """``count`` batches of distinct records, with consecutive offsets, as the log stores them."""
    out = []
    for i in range(count):
        values = [(f"k{i}-{j}".encode(), f"value {i}-{j} ".encode() * (i + 1)) for j in range(records_each)]
        out.append(
            build_record_batch(
                values,
                base_timestamp_ms=1_700_000_000_000 + i,
                base_offset=first_offset + i * records_each,
                partition_leader_epoch=4,
            )
        )
    return out


# --- requests: encode_request -> the server's decode_request ---------------------------------


def api_versions_v3() -> Any:
    return request_class(API_VERSIONS, 3)(client_software_name="barnabas", client_software_version="0.1.0")


def metadata_v12() -> Any:
    topic = request_class(METADATA, 12, "MetadataRequestTopic")
    return request_class(METADATA, 12)(
        topics=(topic(topic_id=None, name="orders"), topic(topic_id=TOPIC_ID, name=None)),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def fetch_v12(replica_id: int = 2) -> Any:
    partition = request_class(FETCH, 12, "FetchPartition")
    return request_class(FETCH, 12)(
        replica_id=replica_id,
        max_wait=ms(500),
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            request_class(FETCH, 12, "FetchTopic")(
                topic="orders",
                partitions=(
                    partition(
                        partition=0,
                        current_leader_epoch=4,
                        fetch_offset=1234,
                        last_fetched_epoch=3,
                        log_start_offset=17,
                        partition_max_bytes=1 << 20,
                    ),
                    partition(partition=2, current_leader_epoch=4, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def offset_for_leader_epoch_v4(replica_id: int = 2) -> Any:
    partition = request_class(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderPartition")
    return request_class(OFFSET_FOR_LEADER_EPOCH, 4)(
        replica_id=replica_id,
        topics=(
            request_class(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderTopic")(
                topic="orders",
                partitions=(
                    partition(partition=0, current_leader_epoch=5, leader_epoch=3),
                    partition(partition=1, current_leader_epoch=5, leader_epoch=4),
                ),
            ),
        ),
    )


REQUESTS = {
    "ApiVersions v3": (API_VERSIONS, 3, api_versions_v3),
    "Metadata v12": (METADATA, 12, metadata_v12),
    "Fetch v12": (FETCH, 12, fetch_v12),
    "OffsetForLeaderEpoch v4": (OFFSET_FOR_LEADER_EPOCH, 4, offset_for_leader_epoch_v4),
}


@pytest.mark.parametrize("name", REQUESTS)
@pytest.mark.parametrize("client_id", ["follower-2", None, ""])
def test_request_decodes_on_the_server_side(name: str, client_id: str | None) -> None:
    api_key, version, make = REQUESTS[name]
    body = make()
    request = decode_request(payload(encode_request(api_key, version, 123_456, client_id, body)))
    assert request.header.api_key == api_key
    assert request.header.api_version == version
    assert request.header.correlation_id == 123_456
    assert request.header.client_id == client_id
    assert request.body == body


def test_replica_id_reaches_the_server() -> None:
    fetch = decode_request(payload(encode_request(FETCH, 12, 1, "f", fetch_v12(replica_id=7)))).body
    assert fetch.replica_id == 7
    assert fetch.topics[0].partitions[0].last_fetched_epoch == 3
    epochs = decode_request(payload(encode_request(OFFSET_FOR_LEADER_EPOCH, 4, 1, "f", offset_for_leader_epoch_v4(7))))
    assert epochs.body.replica_id == 7


def test_non_flexible_request_uses_header_v1() -> None:
    body = request_class(METADATA, 4)(topics=None, allow_auto_topic_creation=False)
    frame = encode_request(METADATA, 4, 9, "c", body)
    # size, key, version, correlation id, client id "c", then the body at once (no tag section).
    assert frame[4:15] == struct.pack(">hhih", METADATA, 4, 9, 1) + b"c"
    assert decode_request(payload(frame)).body == body


def test_flexible_request_uses_header_v2() -> None:
    frame = encode_request(API_VERSIONS, 3, 9, "c", api_versions_v3())
    assert frame[4:16] == struct.pack(">hhih", API_VERSIONS, 3, 9, 1) + b"c" + b"\x00"


# --- requests: our own mistakes ---------------------------------------------------------------


def test_body_of_another_version_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="needs a"):
        encode_request(FETCH, 11, 1, "c", fetch_v12())


def test_unknown_schema_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        request_class(FETCH, 999)
    with pytest.raises(LocalProtocolError):
        request_class(9999, 0)
    with pytest.raises(LocalProtocolError):
        response_class(FETCH, 999)
    with pytest.raises(LocalProtocolError, match="no entity"):
        request_class(FETCH, 12, "NoSuchThing")


def test_value_the_wire_cannot_carry_is_refused() -> None:
    body = fetch_v12(replica_id=2**40)
    with pytest.raises(LocalProtocolError, match="FetchRequest"):
        encode_request(FETCH, 12, 1, "c", body)
    with pytest.raises(LocalProtocolError):
        encode_request(FETCH, 12, 2**40, "c", fetch_v12())


def test_nested_classes_come_from_the_same_version() -> None:
    assert request_class(FETCH, 12, "FetchTopic").__version__ == 12
    assert response_class(FETCH, 12, "PartitionData").__version__ == 12
    assert response_class(FETCH, 12) is type(decode_fetch(fetch_frame([("t", [partition_result(0, [])])])))


# --- responses: the server's encoders -> decode_response --------------------------------------


def partition_result(
    index: int, records: Sequence[bytes | memoryview], high_watermark: int = 100
) -> FetchPartitionResult:
    return FetchPartitionResult(
        partition_index=index,
        error_code=0,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=0,
        records=records,
    )


def fetch_frame(topics: list[tuple[str, list[FetchPartitionResult]]], correlation_id: int = 77) -> bytes:
    return payload(encode_fetch_response(12, correlation_id, topics))


def decode_fetch(frame: bytes) -> Any:
    correlation_id, response = decode_response(FETCH, 12, frame)
    assert correlation_id == response_correlation_id(frame)
    return response


def test_fetch_v12_records_come_back_unchanged() -> None:
    first = batches(5)
    second = batches(1, first_offset=40)
    frame = fetch_frame(
        [
            ("orders", [partition_result(0, first), partition_result(1, []), partition_result(2, second)]),
            ("audit", [partition_result(0, batches(2))]),
        ]
    )
    correlation_id, response = decode_response(FETCH, 12, frame)
    assert correlation_id == 77
    assert response.error_code == ErrorCode.none
    assert response.session_id == 0
    orders, audit = response.responses
    assert orders.topic == "orders"
    assert audit.topic == "audit"
    p0, p1, p2 = orders.partitions
    assert isinstance(p0.records, bytes)
    assert p0.records == b"".join(first)
    assert p1.records == b""  # Kafka's MemoryRecords.EMPTY, never null
    assert p2.records == second[0]
    assert audit.partitions[0].records == b"".join(batches(2))
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset, p0.log_start_offset) == (0, 100, 100, 0)
    assert p0.aborted_transactions is None
    assert p0.preferred_read_replica == -1
    # Whole batches, in order, and their records still decode.
    assert [header.base_offset for _, header in iter_batch_headers(p0.records)] == [0, 3, 6, 9, 12]
    assert [r.value for r in decode_batch_records(second[0])] == [f"value 0-{j} ".encode() for j in range(3)]


def test_fetch_v12_memoryview_chunks_and_large_records() -> None:
    big = batches(1, records_each=2000)[0]
    assert len(big) > 30_000
    frame = fetch_frame([("orders", [partition_result(0, [memoryview(big)[:100].tobytes(), memoryview(big)[100:]])])])
    assert decode_fetch(frame).responses[0].partitions[0].records == big


def test_fetch_v12_errors_and_aborted_transactions() -> None:
    result = FetchPartitionResult(
        partition_index=3,
        error_code=ErrorCode.offset_out_of_range.value,
        high_watermark=10,
        last_stable_offset=8,
        log_start_offset=2,
        records=[],
        preferred_read_replica=1,
        aborted_transactions=[(1000, 4), (1001, 6)],
    )
    frame = payload(encode_fetch_response(12, 5, [("orders", [result])], throttle_time_ms=30, session_id=9))
    response = decode_fetch(frame)
    assert response.throttle_time == ms(30)
    assert response.session_id == 9
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.offset_out_of_range
    assert (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) == (10, 8, 2)
    assert partition.preferred_read_replica == 1
    assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == [(1000, 4), (1001, 6)]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.binary(max_size=300), max_size=4),  # each partition's record chunks
        min_size=1,
        max_size=4,
    )
)
def test_fetch_records_are_opaque_bytes(partitions: list[list[bytes]]) -> None:
    frame = fetch_frame([("t", [partition_result(i, chunks) for i, chunks in enumerate(partitions)])])
    decoded = decode_fetch(frame).responses[0].partitions
    assert [p.records for p in decoded] == [b"".join(chunks) for chunks in partitions]


def test_fetch_v12_tagged_fields_written_by_kio() -> None:
    """A leader that sets DivergingEpoch / CurrentLeader (tags 0 and 1), as Kafka's does."""
    records = b"".join(batches(2))
    schema = response_class(FETCH, 12)
    partition = response_class(FETCH, 12, "PartitionData")(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=6,
        last_stable_offset=6,
        log_start_offset=0,
        diverging_epoch=response_class(FETCH, 12, "EpochEndOffset")(epoch=3, end_offset=4),
        current_leader=response_class(FETCH, 12, "LeaderIdAndEpoch")(leader_id=1, leader_epoch=4),
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=records,
    )
    response = schema(
        throttle_time=ms(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(response_class(FETCH, 12, "FetchableTopicResponse")(topic="orders", partitions=(partition,)),),
    )
    assert decode_response(FETCH, 12, payload(encode_response(8, response))) == (8, response)


def test_metadata_v12_from_both_encoders() -> None:
    broker = MetadataBroker(node_id=1, host="10.0.0.1", port=9092, rack="r1")
    partition = MetadataPartition(
        error_code=0,
        partition_index=0,
        leader_id=1,
        leader_epoch=4,
        replica_nodes=[1, 2],
        isr_nodes=[1],
        offline_replicas=[],
    )
    topic = MetadataTopic(error_code=0, name="orders", topic_id=TOPIC_ID, is_internal=False, partitions=[partition])
    correlation_id, response = decode_response(
        METADATA, 12, payload(encode_metadata_response(12, 41, [broker], "cluster-a", 1, [topic]))
    )
    assert correlation_id == 41
    assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [(1, "10.0.0.1", 9092, "r1")]
    assert (response.cluster_id, response.controller_id) == ("cluster-a", 1)
    (decoded,) = response.topics
    assert (decoded.name, decoded.topic_id) == ("orders", TOPIC_ID)
    (p,) = decoded.partitions
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (1, 4, (1, 2), (1,))
    # And kio's generic encoder (encode_response) gives the same entity back.
    assert decode_response(METADATA, 12, payload(encode_response(41, response))) == (41, response)


def test_api_versions_v3_uses_header_v0() -> None:
    version = response_class(API_VERSIONS, 3, "ApiVersion")
    response = response_class(API_VERSIONS, 3)(
        error_code=ErrorCode.none,
        api_keys=(version(api_key=1, min_version=4, max_version=12), version(api_key=18, min_version=0, max_version=4)),
        throttle_time=ms(0),
    )
    frame = payload(encode_response(3, response))
    # Header v0: the body's error code follows the correlation id directly.
    assert frame[4:6] == b"\x00\x00"
    assert decode_response(API_VERSIONS, 3, frame) == (3, response)


def test_unsupported_api_versions_answer_is_read_as_v0() -> None:
    frame = payload(encode_api_versions_error(11, ErrorCode.unsupported_version, 0, 3))
    correlation_id, response = decode_response(API_VERSIONS, 4, frame)
    assert correlation_id == 11
    assert response.__version__ == 0
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]


def test_offset_for_leader_epoch_v4() -> None:
    end = response_class(OFFSET_FOR_LEADER_EPOCH, 4, "EpochEndOffset")
    response = response_class(OFFSET_FOR_LEADER_EPOCH, 4)(
        throttle_time=ms(0),
        topics=(
            response_class(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderTopicResult")(
                topic="orders",
                partitions=(
                    end(error_code=ErrorCode.none, partition=0, leader_epoch=3, end_offset=1200),
                    end(error_code=ErrorCode.fenced_leader_epoch, partition=1),
                ),
            ),
        ),
    )
    assert decode_response(OFFSET_FOR_LEADER_EPOCH, 4, payload(encode_response(2**31 - 1, response))) == (
        2**31 - 1,
        response,
    )


# --- responses: what the peer may send that we must skip or refuse ----------------------------


def test_unknown_tagged_fields_are_skipped() -> None:
    frame = fetch_frame([("orders", [partition_result(0, batches(1))])])
    expected = decode_fetch(frame)
    assert frame[4] == 0 and frame.endswith(b"\x00")
    # A tag in the response header (v1) and an unknown tag (9) at the end of the body.
    tagged = frame[:4] + bytes([1, 5, 2, 0xAA, 0xBB]) + frame[5:-1] + bytes([1, 9, 1, 0xCC])
    assert decode_response(FETCH, 12, tagged) == (77, expected)


def test_trailing_bytes_are_refused() -> None:
    frame = fetch_frame([("orders", [partition_result(0, batches(1))])])
    with pytest.raises(RemoteProtocolError, match="unread"):
        decode_response(FETCH, 12, frame + b"\x00")


def test_truncated_and_short_frames_are_refused() -> None:
    frame = fetch_frame([("orders", [partition_result(0, batches(2))])])
    for cut in (0, 3, 5, 20, len(frame) // 2, len(frame) - 1):
        with pytest.raises(RemoteProtocolError):
            decode_response(FETCH, 12, frame[:cut])


def test_response_read_as_another_version_is_refused() -> None:
    """A version mix-up (v11 bytes read as v12) surfaces as a protocol error, not garbage."""
    frame = payload(encode_fetch_response(11, 1, [("orders", [partition_result(0, batches(1))])]))
    with pytest.raises(RemoteProtocolError):
        decode_response(FETCH, 12, frame)


# --- version negotiation --------------------------------------------------------------------


def test_usable_version() -> None:
    server = {FETCH: (4, 12), METADATA: (0, 12), OFFSET_FOR_LEADER_EPOCH: (2, 4)}
    assert usable_version(server, FETCH, range(4, 17)) == 12
    assert usable_version(server, FETCH, range(12, 13)) == 12
    assert usable_version(server, FETCH, range(13, 17)) is None
    assert usable_version(server, OFFSET_FOR_LEADER_EPOCH, range(0, 2)) is None
    assert usable_version(server, METADATA, range(1, 5)) == 4
    assert usable_version(server, API_VERSIONS, range(0, 4)) is None
    assert usable_version(server, FETCH, range(0)) is None
