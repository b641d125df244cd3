"""A topic's compression.type: client batches stored in its codec (LogValidator's recompressing path).

kafka-python reads the converted batches as an independent decoder; the log tests at the end append
through a real PartitionLog on disk.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from barnabas.log import CorruptRecordError, LogConfig, PartitionLog, RecordBatchTooLargeError, RecordTooLargeError
from barnabas.log.validator import convert_compression
from barnabas.protocol import (
    BATCH_HEADER_SIZE,
    Compression,
    NewRecord,
    build_record_batch,
    decode_batch_records,
    parse_batch_header,
    validate_batch,
)
from tests.support.raw_records import expanding_batch, raw_batch

from .batches import T0
from .conftest import OpenLog

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: gzip's XFL header byte: 2 for the slowest level (9), 4 for the fastest (1) (RFC 1952).
_GZIP_XFL_AT, _XFL_BEST, _XFL_FASTEST = 8, 2, 4


def producer_batch(codec: int, count: int = 20, *, producer_id: int = -1, value: bytes = b"value") -> bytearray:
    """A batch as a producer sends it, records with keys, headers and rising timestamps."""
    records = [NewRecord(f"k{i}".encode(), value + bytes([i % 256]), [("h", b"x")], T0 + i) for i in range(count)]
    idempotent = producer_id >= 0
    return bytearray(
        build_record_batch(
            records,
            base_timestamp_ms=T0,
            compression=codec,
            producer_id=producer_id,
            producer_epoch=7 if idempotent else -1,
            base_sequence=42 if idempotent else -1,
        )
    )


def kafka_python_records(batch: bytes | bytearray | memoryview) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record, as kafka-python decodes the batch."""
    return [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(bytes(batch))]


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("source", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_a_batch_is_stored_in_the_topics_codec_with_its_records_unchanged(source: str, target: str) -> None:
    batch = producer_batch(CODECS[source], producer_id=5)
    before = parse_batch_header(batch)
    converted, header = convert_compression(batch, before, LogConfig(compression_type=target))
    if source == target:
        assert converted is batch  # Kafka's in-place path: nothing copied
        return
    assert header.compression == CODECS[target]
    assert validate_batch(converted) == header  # a good CRC-32C and length
    assert header == parse_batch_header(converted)
    unchanged = ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "records_count", "partition_leader_epoch")  # fmt: skip
    assert {f: getattr(header, f) for f in unchanged} == {f: getattr(before, f) for f in unchanged}
    assert header.attributes & ~0x07 == before.attributes & ~0x07
    assert kafka_python_records(converted) == kafka_python_records(batch)
    assert decode_batch_records(converted) == decode_batch_records(batch)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_producer_keeps_every_codec_as_sent(codec: int) -> None:
    batch = producer_batch(codec)
    converted, header = convert_compression(batch, parse_batch_header(batch), LogConfig())
    assert converted is batch
    assert header.compression == codec


@pytest.mark.parametrize(("level", "xfl"), [(1, _XFL_FASTEST), (9, _XFL_BEST)])
def test_the_gzip_level_is_the_topics(level: int, xfl: int) -> None:
    batch = producer_batch(0, 200)
    config = LogConfig(compression_type="gzip", compression_gzip_level=level)
    converted, _ = convert_compression(batch, parse_batch_header(batch), config)
    assert converted[BATCH_HEADER_SIZE + _GZIP_XFL_AT] == xfl


def test_a_higher_zstd_level_compresses_differently() -> None:
    batch = producer_batch(0, 500, value=b"the quick brown fox jumps over the lazy dog " * 3)
    header = parse_batch_header(batch)
    fast, _ = convert_compression(batch, header, LogConfig(compression_type="zstd", compression_zstd_level=-50))
    slow, _ = convert_compression(batch, header, LogConfig(compression_type="zstd", compression_zstd_level=19))
    assert len(slow) < len(fast)
    assert kafka_python_records(slow) == kafka_python_records(fast)


def test_a_batch_too_large_once_decompressed_is_message_too_large() -> None:
    batch = producer_batch(Compression.ZSTD, 200, value=bytes(500))
    header = parse_batch_header(batch)
    limit = header.size * 4
    with pytest.raises(RecordTooLargeError) as caught:
        convert_compression(batch, header, LogConfig(compression_type="uncompressed", max_message_bytes=limit))
    assert caught.value.limit == limit
    assert caught.value.size > 200 * 500


def test_a_batch_too_large_for_a_segment_once_decompressed_is_refused() -> None:
    batch = producer_batch(Compression.ZSTD, 3000, value=bytes(500))
    header = parse_batch_header(batch)
    config = LogConfig(compression_type="uncompressed", max_message_bytes=1 << 22, segment_bytes=1 << 20)
    with pytest.raises(RecordBatchTooLargeError):
        convert_compression(batch, header, config)


def test_records_that_do_not_decompress_are_corrupt() -> None:
    garbage = bytearray(raw_batch([b"\x00" * 8], codec=Compression.LZ4, payload=b"not an lz4 frame"))
    with pytest.raises(CorruptRecordError, match="LZ4"):
        convert_compression(garbage, parse_batch_header(garbage), LogConfig(compression_type="zstd"))


def test_records_decompressing_past_the_bound_are_corrupt() -> None:
    config = LogConfig(compression_type="lz4", max_message_bytes=16_384)
    bomb = bytearray(expanding_batch(Compression.ZSTD, 64 << 20))
    with pytest.raises(CorruptRecordError, match=f"at most {config.max_records_bytes} bytes"):
        convert_compression(bomb, parse_batch_header(bomb), config)


# --- through the log ----------------------------------------------------------------------------


def stored_batches(log: PartitionLog) -> list[bytes]:
    data = bytes(log.read(0, 1 << 20).records)
    out, position = [], 0
    while position < len(data):
        size = parse_batch_header(data, position).size
        out.append(data[position : position + size])
        position += size
    return out


def test_the_log_stores_produced_batches_in_the_topics_codec(open_log: OpenLog) -> None:
    log = open_log(LogConfig(compression_type="lz4"))
    sent = [producer_batch(Compression.GZIP, 5), producer_batch(Compression.NONE, 3)]
    results = [log.append_as_leader(batch, 0, T0) for batch in sent]
    assert [(r.base_offset, r.last_offset) for r in results] == [(0, 4), (5, 7)]
    stored = stored_batches(log)
    assert [parse_batch_header(b).compression for b in stored] == [Compression.LZ4, Compression.LZ4]
    assert [(r[0], r[2]) for r in kafka_python_records(stored[1])] == [(5, b"k0"), (6, b"k1"), (7, b"k2")]


def test_a_retried_idempotent_batch_is_a_duplicate_after_conversion(open_log: OpenLog) -> None:
    log = open_log(LogConfig(compression_type="zstd"))
    first = log.append_as_leader(producer_batch(Compression.NONE, 4, producer_id=9), 0, T0)
    retry = log.append_as_leader(producer_batch(Compression.NONE, 4, producer_id=9), 0, T0)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
    assert log.log_end_offset == 4


def test_log_append_time_stamps_the_converted_batch(open_log: OpenLog) -> None:
    log = open_log(LogConfig(compression_type="snappy", message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(producer_batch(Compression.ZSTD, 3), 0, T0 + 99)
    (stored,) = stored_batches(log)
    header = validate_batch(stored)
    assert header.compression == Compression.SNAPPY
    assert header.is_log_append_time and header.max_timestamp == result.log_append_time_ms == T0 + 99
    assert {r[1] for r in kafka_python_records(stored)} == {T0 + 99}
