"""Bad input against a real broker process: every case is refused the way Kafka refuses it.

Kafka is the reference. A connection-level problem (oversized or negative frame, unknown API
key, unsupported version, undecodable or truncated request, Produce v0-v2, an acks=0 produce
that fails) closes the connection with one warning line; a record-level problem is an error
code in the Produce response and appends nothing. After every bad input the broker must still
serve: the process is alive and a fresh connection (or the same one, where it stays open)
gets a normal answer.

Expected codes for malformed batches follow Kafka's order of checks: KafkaApis calls
ProduceRequest.validateRecords (no complete batch or a magic 0/1 batch -> INVALID_RECORD, a
magic outside 0..2 -> CORRUPT_MESSAGE from ByteBufferLogInputStream), then
UnifiedLog.analyzeAndValidateRecords (baseOffset != 0 -> INVALID_RECORD, size ->
MESSAGE_TOO_LARGE, CRC -> CORRUPT_MESSAGE), then LogValidator (count vs lastOffsetDelta and
control batches -> INVALID_RECORD).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v3.request import PartitionProduceData as PartitionProduceDataV3
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.schema.produce.v3.request import TopicProduceData as TopicProduceDataV3

from barnabas.protocol import decode_batch_records, iter_batch_headers, validate_batch
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawKafkaClient, encode_body, frame, request_header
from tests.support.requests import (
    API_VERSIONS,
    METADATA,
    PRODUCE,
    api_versions_request,
    batch,
    connect,
    create_topic,
    create_topics,
    fetch,
    latest_offset,
    list_offsets,
    local_port,
    metadata,
    produce,
    produce_request,
    recrc,
    timeout_ms,
    unique,
)

pytestmark = pytest.mark.timeout(120)

CLOSE_TIMEOUT = 10.0

INVALID_TOPIC_NAMES = ["", "..", "a" * 250, "bad/name", "white space"]


# --- helpers -----------------------------------------------------------------------------------


def wait_for_log(broker: BrokerProcess, pattern: str, timeout: float = 10.0) -> str:
    """The first broker output line matching ``pattern``, waiting for it to appear."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        for line in list(broker.output):
            if regex.search(line):
                return line
        if time.monotonic() > deadline:
            tail = "\n".join(list(broker.output)[-30:])
            raise AssertionError(f"no broker log line matches {pattern!r}; last lines:\n{tail}")
        time.sleep(0.02)  # polling the output for the condition, not waiting for time to pass


def assert_serving(broker: BrokerProcess) -> None:
    """The process is alive and a fresh connection gets ApiVersions and Metadata answered."""
    assert broker.proc is not None and broker.proc.poll() is None, "the broker process died"
    with connect(broker) as client:
        versions = client.request(API_VERSIONS, 3, api_versions_request())
        assert versions.error_code == ErrorCode.none
        assert any(v.api_key == PRODUCE for v in versions.api_keys)
        response = client.request(METADATA, 12, MetadataRequest(topics=None, include_topic_authorized_operations=False))
        assert [b.node_id for b in response.brokers] == [broker.broker_id]


def assert_closed_with_warning(broker: BrokerProcess, client: RawKafkaClient, port: int, reason: str) -> None:
    """The broker closed ``client`` (local ``port``), logged why, and still serves others."""
    assert client.is_closed(CLOSE_TIMEOUT), "the broker did not close the connection"
    wait_for_log(broker, rf"WARNING .*closing connection from 127\.0\.0\.1:{port}: .*{re.escape(reason)}")
    assert_serving(broker)


def assert_produce_then_fetch(client: RawKafkaClient, topic: str, partition: int = 0) -> None:
    """A valid produce lands at the log end and a fetch there returns exactly its records."""
    expected = latest_offset(client, topic, partition)
    value = uuid.uuid4().bytes
    result = produce(client, topic, partition, batch(value, value + b"!"))
    assert result.error_code == ErrorCode.none, result
    assert result.base_offset == expected
    data = fetch(client, topic, partition, expected)
    assert data.error_code == ErrorCode.none
    records = decode_batch_records(data.records)
    assert [(r.offset, r.value) for r in records] == [(expected, value), (expected + 1, value + b"!")]
    assert latest_offset(client, topic, partition) == expected + 2


@pytest.fixture
def topic(shared_broker: BrokerProcess) -> str:
    """A fresh one-partition topic on the shared broker, holding one record."""
    name = unique("bad-input")
    with connect(shared_broker) as client:
        create_topic(client, name)
        assert produce(client, name, 0, batch(b"first")).error_code == ErrorCode.none
    return name


# --- frames ------------------------------------------------------------------------------------

LIMIT = 100_000


def produce_frame_of_size(topic: str, payload_size: int) -> bytes:
    """A valid Produce v9 frame whose payload (after the size prefix) is exactly ``payload_size``."""
    value_size = payload_size - 200
    header = request_header(PRODUCE, 9, 7, "raw-client", flexible=True)
    for _ in range(5):
        payload = header + encode_body(produce_request(topic, 0, batch(b"v" * value_size)))
        if len(payload) == payload_size:
            return frame(payload)
        value_size += payload_size - len(payload)
    raise AssertionError(f"cannot build a {payload_size}-byte frame")


def test_frame_over_socket_request_max_bytes_closes_the_connection(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(
        extra_args=["--set", f"socket.request.max.bytes={LIMIT}", "--set", f"message.max.bytes={LIMIT}"]
    ).start()
    name = unique("frames")
    with connect(broker) as client:
        create_topic(client, name)

    # Only the size prefix: refused as soon as it arrives, the payload never has to come.
    with connect(broker) as client:
        port = local_port(client)
        client.send_frame(struct.pack(">i", LIMIT + 1))
        assert_closed_with_warning(broker, client, port, f"frame of {LIMIT + 1} bytes exceeds socket.request.max.bytes")

    # A real, well-formed request one byte over the limit.
    with connect(broker) as client:
        port = local_port(client)
        with contextlib.suppress(ConnectionError):  # the broker may close while we still send
            client.send_frame(produce_frame_of_size(name, LIMIT + 1))
        assert_closed_with_warning(broker, client, port, f"frame of {LIMIT + 1} bytes exceeds")

    # Exactly at the limit is allowed (Kafka refuses only size > max), and nothing above was appended.
    with connect(broker) as client:
        assert latest_offset(client, name) == 0
        client.send_frame(produce_frame_of_size(name, LIMIT))
        (topic_response,) = client.read_response(PRODUCE, 9, 7).responses
        assert topic_response.partition_responses[0].error_code == ErrorCode.none
        assert latest_offset(client, name) == 1
        assert_produce_then_fetch(client, name)


def test_negative_frame_size_closes_the_connection(shared_broker: BrokerProcess) -> None:
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(struct.pack(">i", -1) + b"\x00" * 16)
        assert_closed_with_warning(shared_broker, client, port, "frame of -1 bytes")


def test_unknown_api_key_closes_the_connection(shared_broker: BrokerProcess) -> None:
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(frame(request_header(9999, 0, 1, "raw-client", flexible=False) + b"\x00" * 8))
        assert_closed_with_warning(shared_broker, client, port, "unknown api_key 9999")


def test_unsupported_metadata_version_closes_the_connection(shared_broker: BrokerProcess) -> None:
    body = encode_body(MetadataRequest(topics=None, include_topic_authorized_operations=False))
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(frame(request_header(METADATA, 99, 1, "raw-client", flexible=True) + body))
        assert_closed_with_warning(shared_broker, client, port, "Metadata v99 is not supported")


def test_unsupported_api_versions_version_is_answered_in_the_v0_format(shared_broker: BrokerProcess) -> None:
    with connect(shared_broker) as client:
        advertised = client.request(API_VERSIONS, 3, api_versions_request())
        (own_range,) = [(v.min_version, v.max_version) for v in advertised.api_keys if v.api_key == API_VERSIONS]
        body = encode_body(api_versions_request())
        client.send_frame(frame(request_header(API_VERSIONS, 99, 4242, "raw-client", flexible=True) + body))
        response = client.read_response(API_VERSIONS, 0, 4242)  # header v0, ApiVersionsResponse v0 body
        assert response.error_code == ErrorCode.unsupported_version
        assert [(v.api_key, v.min_version, v.max_version) for v in response.api_keys] == [(API_VERSIONS, *own_range)]
        assert own_range[0] == 0
        # The client now retries with a version it knows, on the same connection (Kafka keeps it open).
        retry = client.request(API_VERSIONS, 0, ApiVersionsRequestV0())
        assert retry.error_code == ErrorCode.none
    assert_serving(shared_broker)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_advertised_but_refused(shared_broker: BrokerProcess, topic: str, version: int) -> None:
    with connect(shared_broker) as client:
        advertised = client.request(API_VERSIONS, 3, api_versions_request())
        (produce_range,) = [(v.min_version, v.max_version) for v in advertised.api_keys if v.api_key == PRODUCE]
        assert produce_range[0] == 0, "Produce must be advertised from v0 (KAFKA-18659)"
    # v0-v2 bodies are v3's without transactional_id (message format v1 records; any bytes do).
    v3 = ProduceRequestV3(
        transactional_id=None,
        acks=-1,
        timeout=timeout_ms(5000),
        topic_data=(
            TopicProduceDataV3(name=topic, partition_data=(PartitionProduceDataV3(index=0, records=batch(b"old")),)),
        ),
    )
    body = encode_body(v3)
    assert body[:2] == b"\xff\xff"  # the null transactional_id
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(frame(request_header(PRODUCE, version, 1, "raw-client", flexible=False) + body[2:]))
        assert_closed_with_warning(shared_broker, client, port, f"Produce v{version} is not supported")
    with connect(shared_broker) as client:
        assert latest_offset(client, topic) == 1
        assert_produce_then_fetch(client, topic)


def test_stream_ending_inside_a_frame_closes_the_connection(shared_broker: BrokerProcess) -> None:
    request = frame(
        request_header(API_VERSIONS, 3, 1, "raw-client", flexible=True) + encode_body(api_versions_request())
    )
    promised = struct.pack(">i", 100)
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(promised + request[4:][:50])
        assert not client.is_closed(0.2), "the broker must wait for the rest of the frame"
        client.sock.shutdown(socket.SHUT_WR)
        assert_closed_with_warning(shared_broker, client, port, "connection closed inside a frame")


def _metadata_frame_cut(cut: int) -> bytes:
    payload = request_header(METADATA, 12, 1, "raw-client", flexible=True) + encode_body(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="some-topic"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    return frame(payload[:-cut])


def _produce_frame_cut(cut: int) -> bytes:
    payload = request_header(PRODUCE, 9, 1, "raw-client", flexible=True) + encode_body(
        produce_request("some-topic", 0, batch(b"x" * 100))
    )
    return frame(payload[:-cut])


@pytest.mark.parametrize(
    ("make_frame", "reason"),
    [
        pytest.param(lambda: _metadata_frame_cut(3), "Metadata v12", id="metadata-body-cut"),
        pytest.param(lambda: _produce_frame_cut(60), "Produce v9", id="produce-records-cut"),
        pytest.param(lambda: frame(b"\x00\x03\x00"), "too short for a header", id="shorter-than-header"),
        pytest.param(lambda: frame(struct.pack(">hhih", METADATA, 12, 1, 50) + b"ab"), "client_id", id="client-id-cut"),
    ],
)
def test_complete_frame_with_truncated_request_closes_the_connection(
    shared_broker: BrokerProcess, make_frame: Callable[[], bytes], reason: str
) -> None:
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_frame(make_frame())
        assert_closed_with_warning(shared_broker, client, port, reason)


# --- record batches ----------------------------------------------------------------------------


def test_batch_over_message_max_bytes_is_message_too_large(shared_broker: BrokerProcess, topic: str) -> None:
    big = batch(os.urandom(1_048_588))  # the broker default message.max.bytes
    assert len(big) > 1_048_588
    with connect(shared_broker) as client:
        result = produce(client, topic, 0, big)
        assert result.error_code == ErrorCode.message_too_large
        assert result.base_offset == -1
        assert latest_offset(client, topic) == 1
        assert_produce_then_fetch(client, topic)


def test_batch_over_topic_max_message_bytes_is_message_too_large(shared_broker: BrokerProcess) -> None:
    name = unique("small-messages")
    with connect(shared_broker) as client:
        create_topic(client, name, max_message_bytes="2000")
        too_big = batch(b"x" * 2000)
        fits = batch(b"y" * 1800)
        assert len(too_big) > 2000 >= len(fits)
        result = produce(client, name, 0, too_big)
        assert result.error_code == ErrorCode.message_too_large
        assert latest_offset(client, name) == 0
        assert produce(client, name, 0, fits).error_code == ErrorCode.none
        assert latest_offset(client, name) == 1
        assert_produce_then_fetch(client, name)


def test_bad_crc_is_corrupt_message(shared_broker: BrokerProcess, topic: str) -> None:
    good = batch(b"payload-1", b"payload-2")
    validate_batch(good)
    bad = bytearray(good)
    bad[-3] ^= 0xFF  # a byte inside the last record, covered by the CRC
    with connect(shared_broker) as client:
        result = produce(client, topic, 0, bytes(bad))
        assert result.error_code == ErrorCode.corrupt_message
        assert latest_offset(client, topic) == 1
        assert_produce_then_fetch(client, topic)


def _with_magic(magic: int) -> bytes:
    data = bytearray(batch(b"m"))
    data[16] = magic & 0xFF  # magic is not covered by the CRC
    return bytes(data)


def _with_batch_length(delta: int) -> bytes:
    data = bytearray(batch(b"len", b"gth"))
    (length,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">i", data, 8, length + delta)  # batchLength is not covered by the CRC
    return bytes(data)


def _with_last_offset_delta(delta: int) -> bytes:
    data = bytearray(batch(b"a", b"b", b"c"))
    struct.pack_into(">i", data, 23, delta)
    return recrc(data)


def _with_base_offset(offset: int) -> bytes:
    data = bytearray(batch(b"based"))
    struct.pack_into(">q", data, 0, offset)  # baseOffset is not covered by the CRC
    return bytes(data)


def _control_batch() -> bytes:
    data = bytearray(batch(b"\x00\x00\x00\x00"))
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x20)
    return recrc(data)


MALFORMED_BATCHES = [
    pytest.param(lambda: _with_magic(3), ErrorCode.corrupt_message, id="magic-3"),
    pytest.param(lambda: _with_magic(-1), ErrorCode.corrupt_message, id="magic-negative"),
    pytest.param(
        lambda: _with_magic(1),
        ErrorCode.invalid_record,
        id="magic-1",
    ),
    pytest.param(lambda: _with_batch_length(-10), ErrorCode.corrupt_message, id="batch-length-short"),
    pytest.param(lambda: _with_batch_length(-1000), ErrorCode.corrupt_message, id="batch-length-below-minimum"),
    pytest.param(
        lambda: _with_batch_length(+100),
        ErrorCode.invalid_record,
        id="batch-length-beyond-records",
    ),
    pytest.param(
        lambda: batch(b"cut" * 20)[:40],
        ErrorCode.invalid_record,
        id="records-shorter-than-a-header",
    ),
    pytest.param(
        lambda: b"",
        ErrorCode.invalid_record,
        id="empty-records",
    ),
    pytest.param(lambda: _with_last_offset_delta(5), ErrorCode.invalid_record, id="last-offset-delta-too-big"),
    pytest.param(lambda: _with_last_offset_delta(0), ErrorCode.invalid_record, id="last-offset-delta-too-small"),
    pytest.param(lambda: _with_base_offset(42), ErrorCode.invalid_record, id="non-zero-base-offset"),
    pytest.param(_control_batch, ErrorCode.invalid_record, id="control-batch"),
    pytest.param(lambda: batch(b"one") + batch(b"two"), ErrorCode.invalid_record, id="two-batches"),
]


@pytest.mark.parametrize(("make_records", "expected"), MALFORMED_BATCHES)
def test_malformed_batch_is_refused_like_kafka(
    shared_broker: BrokerProcess, topic: str, make_records: Callable[[], bytes], expected: ErrorCode
) -> None:
    with connect(shared_broker) as client:
        result = produce(client, topic, 0, make_records())
        assert latest_offset(client, topic) == 1, "a refused batch must append nothing"
        assert result.error_code == expected, result
        assert result.base_offset == -1
        assert_produce_then_fetch(client, topic)


# --- topics and partitions ---------------------------------------------------------------------


def test_create_topics_refuses_invalid_names(shared_broker: BrokerProcess) -> None:
    longest_legal = unique("l").ljust(249, "x")
    with connect(shared_broker) as client:
        results = create_topics(client, [*INVALID_TOPIC_NAMES, longest_legal])
        for name in INVALID_TOPIC_NAMES:
            assert results[name].error_code == ErrorCode.invalid_topic_exception, name
            assert results[name].error_message
        assert results[longest_legal].error_code == ErrorCode.none, "one bad topic must not fail the others"
        found = metadata(client, [*INVALID_TOPIC_NAMES, longest_legal], auto_create=False)
        assert found[longest_legal].error_code == ErrorCode.none
        assert_produce_then_fetch(client, longest_legal)


def test_create_topics_with_segment_bytes_below_kafka_minimum_is_invalid_config(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory().start()
    name = unique("tiny-segments")
    with connect(broker) as client:
        result = create_topics(client, [name], segment_bytes="4096")[name]
        assert result.error_code == ErrorCode.invalid_config
        assert metadata(client, [name], auto_create=False)[name].error_code == ErrorCode.unknown_topic_or_partition
    assert broker.stop() == 0
    broker.start()
    assert_serving(broker)


def test_broker_setting_outside_kafka_range_is_a_one_line_error(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(extra_args=["--set", "log.segment.bytes=4096"])
    with pytest.raises(RuntimeError):
        broker.start()
    output = broker.log_text()
    assert "Traceback" not in output, output
    assert re.search(r"^barnabas broker: .*segment\.bytes", output, re.MULTILINE), output


@pytest.mark.parametrize("auto_create", [True, False])
def test_metadata_refuses_invalid_names(shared_broker: BrokerProcess, auto_create: bool) -> None:
    with connect(shared_broker) as client:
        found = metadata(client, INVALID_TOPIC_NAMES, auto_create=auto_create)
        assert {name: t.error_code for name, t in found.items()} == dict.fromkeys(
            INVALID_TOPIC_NAMES, ErrorCode.invalid_topic_exception
        )
        assert all(t.partitions == () for t in found.values())
    assert_serving(shared_broker)


@pytest.mark.parametrize("name", ["", "..", "a" * 250, "bad/name", "white space", "never-created"])
def test_produce_to_invalid_or_unknown_topic_is_unknown_topic_or_partition(
    shared_broker: BrokerProcess, name: str
) -> None:
    if name == "never-created":
        name = unique(name)
    with connect(shared_broker) as client:
        result = produce(client, name, 0, batch(b"nowhere"))
        assert result.error_code == ErrorCode.unknown_topic_or_partition
        # Produce never creates topics (Kafka auto-creates only through Metadata).
        found = metadata(client, [name], auto_create=False)
        assert found[name].error_code in (ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_topic_exception)
    assert_serving(shared_broker)


def test_unknown_partition_of_an_existing_topic(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        assert produce(client, topic, 5, batch(b"p5")).error_code == ErrorCode.unknown_topic_or_partition
        assert fetch(client, topic, 5, 0).error_code == ErrorCode.unknown_topic_or_partition
        assert list_offsets(client, topic, 5).error_code == ErrorCode.unknown_topic_or_partition
        assert produce(client, topic, -1, batch(b"neg")).error_code == ErrorCode.unknown_topic_or_partition
        assert_produce_then_fetch(client, topic)


# --- acks --------------------------------------------------------------------------------------


def test_acks_zero_success_has_no_response(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        client.send_request(PRODUCE, 9, produce_request(topic, 0, batch(b"fire", b"forget"), acks=0))
        # The next answer on this connection belongs to the next request: read_response checks the id.
        answer = client.request(API_VERSIONS, 3, api_versions_request())
        assert answer.error_code == ErrorCode.none
        assert latest_offset(client, topic) == 3
        assert_produce_then_fetch(client, topic)


def test_acks_zero_error_closes_the_connection(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        port = local_port(client)
        client.send_request(PRODUCE, 9, produce_request(unique("missing"), 0, batch(b"lost"), acks=0))
        assert_closed_with_warning(shared_broker, client, port, "Produce failed and the client asked for no response")
    with connect(shared_broker) as client:
        port = local_port(client)
        bad = bytearray(batch(b"corrupt"))
        bad[-2] ^= 0x01
        client.send_request(PRODUCE, 9, produce_request(topic, 0, bytes(bad), acks=0))
        assert_closed_with_warning(shared_broker, client, port, "Produce failed")
    with connect(shared_broker) as client:
        assert latest_offset(client, topic) == 1
        assert_produce_then_fetch(client, topic)


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_acks_is_invalid_required_acks(shared_broker: BrokerProcess, topic: str, acks: int) -> None:
    with connect(shared_broker) as client:
        result = produce(client, topic, 0, batch(b"acks"), acks=acks)
        assert result.error_code == ErrorCode.invalid_required_acks
        assert latest_offset(client, topic) == 1
        assert_produce_then_fetch(client, topic)


# --- tagged fields -----------------------------------------------------------------------------

UNKNOWN_TAGS = bytes([2, 42, 2, 0xAB, 0xCD, 0x80, 0x08, 1, 0xEE])  # tags 42 and 1024


def test_unknown_tagged_fields_are_ignored(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        body = encode_body(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert body.endswith(b"\x00")  # the empty top-level tagged-field section
        client.send_frame(
            frame(request_header(METADATA, 12, 11, "raw-client", flexible=True) + body[:-1] + UNKNOWN_TAGS)
        )
        (found,) = client.read_response(METADATA, 12, 11).topics
        assert (found.name, found.error_code, len(found.partitions)) == (topic, ErrorCode.none, 1)

        body = encode_body(produce_request(topic, 0, batch(b"tagged")))
        assert body.endswith(b"\x00")
        header = request_header(PRODUCE, 9, 12, "raw-client", flexible=True)[:-1] + UNKNOWN_TAGS  # header tags too
        client.send_frame(frame(header + body[:-1] + UNKNOWN_TAGS))
        (produced,) = client.read_response(PRODUCE, 9, 12).responses
        assert produced.partition_responses[0].error_code == ErrorCode.none
        assert produced.partition_responses[0].base_offset == 1
        (record,) = decode_batch_records(fetch(client, topic, 0, 1).records)
        assert record.value == b"tagged"
        assert_produce_then_fetch(client, topic)


# --- concurrent readers ------------------------------------------------------------------------


def test_readers_never_see_a_half_written_batch(shared_broker: BrokerProcess) -> None:
    name = unique("half-written")
    batches, records_per_batch = 30, 32
    with connect(shared_broker) as client:
        create_topic(client, name)
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            with connect(shared_broker) as producer:
                for _ in range(batches):
                    values = [os.urandom(16 * 1024) for _ in range(records_per_batch)]
                    assert produce(producer, name, 0, batch(*values)).error_code == ErrorCode.none
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=write, name="big-batch-producer")
    writer.start()
    total = batches * records_per_batch
    offset = fetches = 0
    deadline = time.monotonic() + 60
    try:
        with connect(shared_broker) as reader:
            while offset < total and time.monotonic() < deadline and not errors:
                data = fetch(reader, name, 0, offset, max_bytes=1 << 20, max_wait_ms=100)
                fetches += 1
                assert data.error_code == ErrorCode.none
                records = data.records or b""
                end = 0
                for position, header in iter_batch_headers(records):
                    checked = validate_batch(records, position)  # CRC-32C over the whole batch
                    assert checked == header
                    assert checked.base_offset == offset, "batches must follow each other without gaps"
                    assert checked.records_count == records_per_batch
                    offset = checked.next_offset
                    end = position + checked.size
                assert end == len(records), f"fetch returned {len(records) - end} bytes of a partial batch"
    finally:
        writer.join(60)
    assert not errors, errors
    assert done.is_set()
    assert offset == total, f"read {offset} of {total} records"
    assert fetches > 1
