"""The hand-written Produce/Fetch/Metadata response encoders against kio, version by version.

Each property builds the same response twice, once with barnabas' encoder and once as a kio
entity written by kio's generic encoder, and asserts the frames are byte-identical. It then
decodes barnabas' frame with kio's native reader and checks the result equals the entity.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import sys
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import Records, i32, i32Timedelta, i64

from barnabas.protocol import LocalProtocolError
from barnabas.protocol import _wire as wire
from barnabas.protocol._fetch_response import FetchPartitionResult, encode_fetch_response
from barnabas.protocol._metadata_response import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
    encode_metadata_topic,
)
from barnabas.protocol._produce_response import ProducePartitionResult, encode_produce_response

PRODUCE, FETCH, METADATA = 0, 1, 3
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
PROPERTY = settings(max_examples=60, deadline=None)

# --- kio side -------------------------------------------------------------------------------


def kio_frame(correlation_id: int, response: Any) -> bytes:
    """Frame a kio response as protocol.md §2 shows: size, header, body."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header = type(response).__header_schema__
    entity_writer(header)(buf, header(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buf, response)
    out = buf.getbuffer()
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def make(cls: type[Any], **values: Any) -> Any:
    """Build a kio entity from the fields this version has.

    kio generates one class per version holding exactly that version's fields, so dropping the
    others here means the encoders must omit them too, and kio reads them back as defaults.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def schema(api_key: int, version: int) -> tuple[type[Any], ModuleType]:
    cls = load_response_schema(api_key, version)
    return cls, sys.modules[cls.__module__]


def throttle(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def kio_uuid(value: uuid.UUID) -> uuid.UUID | None:
    """kio reads the zero UUID back as None (Kafka's Uuid.ZERO_UUID means no ID)."""
    return None if value.int == 0 else value


def check_against_kio(frame: bytes, correlation_id: int, expected: Any) -> None:
    """Byte-identity with kio's encoder, then a decode with kio's native reader."""
    assert frame == kio_frame(correlation_id, expected)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header_cls = type(expected).__header_schema__
    header, header_size = entity_reader(header_cls)(frame, 4)
    assert header.correlation_id == correlation_id
    body, body_size = entity_reader(type(expected))(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    assert body == expected


# --- strategies -----------------------------------------------------------------------------

int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
error_codes = st.sampled_from([code.value for code in ErrorCode])
# Short names most of the time, sometimes past 127 UTF-8 bytes (a two-byte compact length).
names = st.one_of(st.text(max_size=12), st.text(min_size=130, max_size=160))
messages = st.none() | names
# kio models LogAppendTime as an aware datetime (-1 = None), so stay in its range.
append_times = st.just(-1) | st.integers(0, 4_102_444_800_000)
small_chunks = st.binary(max_size=40)
record_chunks = st.lists(
    st.one_of(small_chunks, st.binary(min_size=120, max_size=300), small_chunks.map(memoryview)),
    max_size=3,
)


# --- ProduceResponse ------------------------------------------------------------------------

produce_partitions = st.builds(
    ProducePartitionResult,
    partition_index=int32s,
    error_code=error_codes,
    base_offset=int64s,
    log_append_time_ms=append_times,
    log_start_offset=int64s,
    error_message=messages,
    record_errors=st.lists(st.tuples(int32s, messages), max_size=3).map(tuple),
)
produce_topics = st.lists(st.tuples(names, st.lists(produce_partitions, max_size=4)), max_size=4)


def kio_produce(version: int, topics: Sequence[tuple[str, Sequence[ProducePartitionResult]]], throttle_ms: int) -> Any:
    cls, mod = schema(PRODUCE, version)
    return make(
        cls,
        responses=tuple(
            make(
                mod.TopicProduceResponse,
                name=name,
                partition_responses=tuple(
                    make(
                        mod.PartitionProduceResponse,
                        index=i32(p.partition_index),
                        error_code=ErrorCode(p.error_code),
                        base_offset=i64(p.base_offset),
                        log_append_time=None
                        if p.log_append_time_ms == -1
                        else EPOCH + datetime.timedelta(milliseconds=p.log_append_time_ms),
                        log_start_offset=i64(p.log_start_offset),
                        record_errors=tuple(
                            make(mod.BatchIndexAndErrorMessage, batch_index=i32(index), batch_index_error_message=text)
                            for index, text in p.record_errors
                        )
                        if version >= 8
                        else (),
                        error_message=p.error_message,
                    )
                    for p in partitions
                ),
            )
            for name, partitions in topics
        ),
        throttle_time=throttle(throttle_ms),
    )


@pytest.mark.parametrize("version", range(3, 13))
@PROPERTY
@given(correlation_id=int32s, topics=produce_topics, throttle_ms=int32s)
def test_produce_response_matches_kio(
    version: int,
    correlation_id: int,
    topics: list[tuple[str, list[ProducePartitionResult]]],
    throttle_ms: int,
) -> None:
    frame = encode_produce_response(version, correlation_id, topics, throttle_time_ms=throttle_ms)
    check_against_kio(frame, correlation_id, kio_produce(version, topics, throttle_ms))


@pytest.mark.parametrize("version", [2, 13, -1])
def test_produce_response_rejects_unsupported_versions(version: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_produce_response(version, 1, [])


# --- FetchResponse --------------------------------------------------------------------------

aborted = st.none() | st.lists(st.tuples(int64s, int64s), max_size=2)
fetch_partitions = st.builds(
    FetchPartitionResult,
    partition_index=int32s,
    error_code=error_codes,
    high_watermark=int64s,
    last_stable_offset=int64s,
    log_start_offset=int64s,
    records=record_chunks,
    preferred_read_replica=int32s,
    aborted_transactions=aborted,
)


def fetch_topics(version: int) -> st.SearchStrategy[list[tuple[str | uuid.UUID, list[FetchPartitionResult]]]]:
    topic: st.SearchStrategy[str | uuid.UUID] = st.uuids() if version >= 13 else names
    return st.lists(st.tuples(topic, st.lists(fetch_partitions, max_size=3)), max_size=3)


def kio_fetch(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionResult]]],
    throttle_ms: int,
    error_code: int,
    session_id: int,
) -> Any:
    cls, mod = schema(FETCH, version)
    return make(
        cls,
        throttle_time=throttle(throttle_ms),
        error_code=ErrorCode(error_code),
        session_id=i32(session_id),
        responses=tuple(
            make(
                mod.FetchableTopicResponse,
                topic=topic,
                topic_id=kio_uuid(topic) if isinstance(topic, uuid.UUID) else topic,
                partitions=tuple(
                    make(
                        mod.PartitionData,
                        partition_index=i32(p.partition_index),
                        error_code=ErrorCode(p.error_code),
                        high_watermark=i64(p.high_watermark),
                        last_stable_offset=i64(p.last_stable_offset),
                        log_start_offset=i64(p.log_start_offset),
                        aborted_transactions=None
                        if p.aborted_transactions is None
                        else tuple(
                            mod.AbortedTransaction(producer_id=pid, first_offset=i64(first))
                            for pid, first in p.aborted_transactions
                        ),
                        preferred_read_replica=i32(p.preferred_read_replica),
                        records=Records(b"".join(p.records)),
                    )
                    for p in partitions
                ),
            )
            for topic, partitions in topics
        ),
    )


@pytest.mark.parametrize("version", range(4, 17))
@PROPERTY
@given(data=st.data(), correlation_id=int32s, throttle_ms=int32s, error_code=error_codes, session_id=int32s)
def test_fetch_response_matches_kio(
    *,
    version: int,
    data: st.DataObject,
    correlation_id: int,
    throttle_ms: int,
    error_code: int,
    session_id: int,
) -> None:
    topics = data.draw(fetch_topics(version))
    chunks = encode_fetch_response(
        version,
        correlation_id,
        topics,
        throttle_time_ms=throttle_ms,
        error_code=error_code,
        session_id=session_id,
    )
    frame = b"".join(chunks)
    check_against_kio(frame, correlation_id, kio_fetch(version, topics, throttle_ms, error_code, session_id))
    # Record chunks are passed through, never copied.
    for _, partitions in topics:
        for partition in partitions:
            for record_chunk in partition.records:
                assert any(chunk is record_chunk for chunk in chunks)


def test_fetch_response_passes_a_large_chunk_through_uncopied() -> None:
    big = memoryview(bytes(1 << 20))
    partition = FetchPartitionResult(0, 0, 10, 10, 0, [big])
    chunks = encode_fetch_response(12, 9, [("t", [partition])])
    assert len(chunks) == 3
    assert chunks[1] is big
    frame = b"".join(chunks)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    check_against_kio(frame, 9, kio_fetch(12, [("t", [partition])], 0, 0, 0))


def test_fetch_response_without_records_is_one_chunk_with_empty_records() -> None:
    partition = FetchPartitionResult(3, 1, -1, -1, -1, [])
    chunks = encode_fetch_response(11, 5, [("t", [partition])])
    assert len(chunks) == 1
    # Kafka answers MemoryRecords.EMPTY (length 0), not null, and so do we.
    assert bytes(chunks[0]).endswith(b"\x00\x00\x00\x00")


@pytest.mark.parametrize(
    ("version", "topic"),
    [(3, "t"), (17, uuid.UUID(int=1)), (12, uuid.UUID(int=1)), (13, "t")],
)
def test_fetch_response_rejects_wrong_versions_and_topic_keys(version: int, topic: str | uuid.UUID) -> None:
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(version, 1, [(topic, [])])


# --- MetadataResponse -----------------------------------------------------------------------

broker_ids = st.integers(-1, 2**31 - 1)
# Mostly small replica sets (the cached-Struct path), sometimes past the cache bound.
node_lists = st.one_of(st.lists(broker_ids, max_size=5), st.lists(broker_ids, min_size=17, max_size=20))
metadata_partitions = st.builds(
    MetadataPartition,
    error_code=error_codes,
    partition_index=int32s,
    leader_id=broker_ids,
    leader_epoch=int32s,
    replica_nodes=node_lists,
    isr_nodes=node_lists,
    offline_replicas=node_lists,
)
metadata_brokers = st.builds(MetadataBroker, node_id=broker_ids, host=names, port=int32s, rack=st.none() | names)


def metadata_topics(version: int) -> st.SearchStrategy[list[MetadataTopic]]:
    topic_names = st.none() | names if version >= 12 else names
    return st.lists(
        st.builds(
            MetadataTopic,
            error_code=error_codes,
            name=topic_names,
            topic_id=st.uuids() | st.just(uuid.UUID(int=0)),
            is_internal=st.booleans(),
            partitions=st.lists(metadata_partitions, max_size=4),
            topic_authorized_operations=int32s,
        ),
        max_size=4,
    )


def kio_metadata(
    version: int,
    *,
    brokers: Sequence[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[MetadataTopic],
    throttle_ms: int,
    cluster_ops: int,
) -> Any:
    cls, mod = schema(METADATA, version)
    return make(
        cls,
        throttle_time=throttle(throttle_ms),
        brokers=tuple(
            make(mod.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=i32(b.port), rack=b.rack)
            for b in brokers
        ),
        cluster_id=cluster_id,
        controller_id=controller_id,
        topics=tuple(
            make(
                mod.MetadataResponseTopic,
                error_code=ErrorCode(t.error_code),
                name=t.name,
                topic_id=kio_uuid(t.topic_id),
                is_internal=t.is_internal,
                partitions=tuple(
                    make(
                        mod.MetadataResponsePartition,
                        error_code=ErrorCode(p.error_code),
                        partition_index=i32(p.partition_index),
                        leader_id=p.leader_id,
                        leader_epoch=i32(p.leader_epoch),
                        replica_nodes=tuple(p.replica_nodes),
                        isr_nodes=tuple(p.isr_nodes),
                        offline_replicas=tuple(p.offline_replicas),
                    )
                    for p in t.partitions
                ),
                topic_authorized_operations=i32(t.topic_authorized_operations),
            )
            for t in topics
        ),
        cluster_authorized_operations=i32(cluster_ops),
    )


@pytest.mark.parametrize("version", range(13))
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    correlation_id=int32s,
    brokers=st.lists(metadata_brokers, max_size=3),
    cluster_id=st.none() | names,
    controller_id=broker_ids,
    throttle_ms=int32s,
    cluster_ops=int32s,
)
def test_metadata_response_matches_kio(
    *,
    version: int,
    data: st.DataObject,
    correlation_id: int,
    brokers: list[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    throttle_ms: int,
    cluster_ops: int,
) -> None:
    topics = data.draw(metadata_topics(version))
    frame = encode_metadata_response(
        version,
        correlation_id,
        brokers,
        cluster_id,
        controller_id,
        topics,
        throttle_time_ms=throttle_ms,
        cluster_authorized_operations=cluster_ops,
    )
    # Sections encoded ahead (the broker caches them) make the same frame as topics encoded in place.
    mixed = [encode_metadata_topic(version, t) if i % 2 else t for i, t in enumerate(topics)]
    again = encode_metadata_response(
        version,
        correlation_id,
        brokers,
        cluster_id,
        controller_id,
        mixed,
        throttle_time_ms=throttle_ms,
        cluster_authorized_operations=cluster_ops,
    )
    assert again == frame
    check_against_kio(
        frame,
        correlation_id,
        kio_metadata(
            version,
            brokers=brokers,
            cluster_id=cluster_id,
            controller_id=controller_id,
            topics=topics,
            throttle_ms=throttle_ms,
            cluster_ops=cluster_ops,
        ),
    )


def test_metadata_response_rejects_null_names_before_v12_and_bad_versions() -> None:
    topic = MetadataTopic(3, None, uuid.UUID(int=1), False, [])
    encode_metadata_response(12, 1, [], None, -1, [topic])
    with pytest.raises(LocalProtocolError):
        encode_metadata_response(11, 1, [], None, -1, [topic])
    for version in (-1, 13):
        with pytest.raises(LocalProtocolError):
            encode_metadata_response(version, 1, [], None, -1, [])


def test_metadata_response_of_the_benchmark_shape_matches_kio() -> None:
    brokers = [MetadataBroker(i, f"broker-{i}.example", 9092, f"rack-{i}") for i in range(3)]
    topics = [
        MetadataTopic(
            0,
            f"topic-{t}",
            uuid.UUID(int=t + 1),
            False,
            [MetadataPartition(0, p, p % 3, 5, [0, 1, 2], [0, 1, 2], []) for p in range(6)],
        )
        for t in range(50)
    ]
    frame = encode_metadata_response(12, 77, brokers, "cluster", 0, topics)
    check_against_kio(
        frame,
        77,
        kio_metadata(
            12,
            brokers=brokers,
            cluster_id="cluster",
            controller_id=0,
            topics=topics,
            throttle_ms=0,
            cluster_ops=-(2**31),
        ),
    )


# --- wire primitives ------------------------------------------------------------------------


@settings(deadline=None)  # no per-example deadline: a busy machine must not fail an encoding check
@given(st.integers(0, 2**64 - 1))
def test_uvarint_matches_kio(value: int) -> None:
    buf = io.BytesIO()
    write_unsigned_varint(buf, value)  # type: ignore[arg-type]
    assert wire.uvarint(value) == buf.getvalue()


@settings(deadline=None)  # the first example imports kafka-python, which can take longer than 200 ms
@given(int64s)
def test_varlong_and_varint_match_kafka_python(value: int) -> None:
    from kafka.record.util import encode_varint

    out = bytearray()
    encode_varint(value, out.append)
    assert wire.varlong(value) == bytes(out)
    if -(2**31) <= value < 2**31:
        assert wire.varint(value) == bytes(out)


def test_wire_strings_bytes_and_arrays() -> None:
    assert wire.compact_nullable_string(None) == b"\x00"
    assert wire.compact_string("é") == b"\x03\xc3\xa9"
    assert wire.legacy_nullable_string(None) == b"\xff\xff"
    assert wire.legacy_string("ab") == b"\x00\x02ab"
    assert wire.compact_nullable_bytes(None) == b"\x00"
    assert wire.compact_bytes(memoryview(b"xy")) == b"\x03xy"
    assert wire.legacy_nullable_bytes(None) == b"\xff\xff\xff\xff"
    assert wire.legacy_bytes(b"xy") == b"\x00\x00\x00\x02xy"
    assert wire.compact_array_length(None) == b"\x00"
    assert wire.compact_array_length(200) == b"\xc9\x01"
    assert wire.legacy_array_length(None) == b"\xff\xff\xff\xff"
    assert wire.legacy_array_length(3) == b"\x00\x00\x00\x03"
    assert wire.uuid_bytes(None) == bytes(16)
    assert wire.uuid_bytes(uuid.UUID(int=1)) == bytes(15) + b"\x01"
    assert wire.EMPTY_TAGGED_FIELDS == b"\x00"
    with pytest.raises(LocalProtocolError):
        wire.legacy_string("x" * 40000)
    with pytest.raises(LocalProtocolError):
        wire.uvarint(-1)
