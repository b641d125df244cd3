"""RecordBatch v2 record codec: round trips, kafka-python interop, corruption.

kafka-python 3.0.12 is the independent implementation. In this venv it has only gzip natively;
for snappy, lz4 and zstd the ``kafka_python_codecs`` fixture plugs cramjam in as its block codec,
so kafka-python's own batch code (and its xerial snappy framing) runs on both sides.
"""

from __future__ import annotations

import contextlib
import struct
import types
from collections.abc import Iterator

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barnabas.protocol import (
    CorruptRecordError,
    InvalidRecordError,
    LocalProtocolError,
    parse_batch_header,
    validate_batch,
)
from barnabas.protocol._records import (
    Compression,
    NewRecord,
    Record,
    build_empty_batch,
    build_record_batch,
    decode_batch_records,
    rebuild_batch,
    scan_record_keys,
)

ALL_CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c != Compression.NONE]


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Give kafka-python snappy, lz4 and zstd backed by cramjam (its own libraries are absent)."""
    import kafka.codec
    from kafka.record import default_records

    monkeypatch.setattr(
        kafka.codec,
        "snappy",
        types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        ),
    )

    def lz4_encode(data: bytes) -> bytes:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())

    monkeypatch.setattr(kafka.codec, "lz4", types.SimpleNamespace())
    monkeypatch.setattr(default_records, "lz4_encode", lz4_encode)
    monkeypatch.setattr(default_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data)))
    monkeypatch.setattr(kafka.codec, "zstd", types.SimpleNamespace())
    monkeypatch.setattr(default_records, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(data)))
    monkeypatch.setattr(default_records, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(data)))
    yield


SAMPLE = [
    NewRecord(b"key-0", b"value " * 40, [("trace", b"abc"), ("empty", b""), ("null", None)], 1_700_000_000_000),
    NewRecord(None, b"no key " * 30, (), 1_700_000_000_250),
    NewRecord(b"null value", None, [("\u00e9t\u00e9", b"\x00\xff")], 1_699_999_999_000),
    NewRecord(b"", b"", (), None),
]


def expected_records(base_offset: int, base_timestamp: int, items: list[NewRecord]) -> list[Record]:
    return [
        Record(
            base_offset + i,
            base_timestamp if item.timestamp_ms is None else item.timestamp_ms,
            item.key,
            item.value,
            tuple(item.headers),
        )
        for i, item in enumerate(items)
    ]


def with_payload(batch: bytes, payload: bytes, codec: int | None = None) -> bytes:
    """Replace a batch's records section (and codec bits), fixing batchLength and the CRC."""
    out = bytearray(batch[:61])
    out += payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    if codec is not None:
        (attributes,) = struct.unpack_from(">h", out, 21)
        struct.pack_into(">h", out, 21, (attributes & ~0x07) | codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_every_codec(codec: Compression) -> None:
    batch = build_record_batch(
        SAMPLE,
        base_timestamp_ms=1_700_000_000_000,
        base_offset=42,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    header = validate_batch(batch)
    assert header.compression == codec
    assert header.records_count == len(SAMPLE)
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_250
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.partition_leader_epoch == 5
    assert header.is_transactional
    assert not header.is_log_append_time
    if codec != Compression.NONE:
        assert header.size < len(build_record_batch(SAMPLE, base_timestamp_ms=1_700_000_000_000))
    assert decode_batch_records(batch) == expected_records(42, 1_700_000_000_000, SAMPLE)
    assert decode_batch_records(memoryview(batch + b"trailing")) == decode_batch_records(batch)


def test_plain_tuples_are_accepted() -> None:
    batch = build_record_batch([(b"k", b"v"), (None, b"w", [("h", None)])], base_timestamp_ms=9)
    assert decode_batch_records(batch) == [
        Record(0, 9, b"k", b"v", ()),
        Record(1, 9, None, b"w", (("h", None),)),
    ]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = build_record_batch(SAMPLE, base_timestamp_ms=1_700_000_000_000, timestamp_type_log_append=True)
    assert parse_batch_header(batch).is_log_append_time
    assert {r.timestamp for r in decode_batch_records(batch)} == {1_700_000_000_250}


def test_builder_rejects_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        build_record_batch([], base_timestamp_ms=0)
    with pytest.raises(LocalProtocolError):
        build_record_batch([(b"k", b"v")], base_timestamp_ms=0, compression=5)


headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
new_records = st.builds(
    NewRecord,
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    headers=headers,
    timestamp_ms=st.none() | st.integers(0, 2**42),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(new_records, min_size=1, max_size=12),
    codec=st.sampled_from(ALL_CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(0, 2**42),
    producer_id=st.integers(-1, 2**62),
    log_append=st.booleans(),
)
def test_round_trip_property(
    *,
    items: list[NewRecord],
    codec: Compression,
    base_offset: int,
    base_timestamp: int,
    producer_id: int,
    log_append: bool,
) -> None:
    batch = build_record_batch(
        items,
        base_timestamp_ms=base_timestamp,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        timestamp_type_log_append=log_append,
    )
    header = validate_batch(batch)
    expected = expected_records(base_offset, base_timestamp, items)
    assert header.max_timestamp == max(r.timestamp for r in expected)
    if log_append:
        expected = [r._replace(timestamp=header.max_timestamp) for r in expected]
    assert decode_batch_records(batch) == expected


# --- kafka-python interop -------------------------------------------------------------------


def kafka_python_batch(codec: int, items: list[NewRecord], base_timestamp: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, item in enumerate(items):
        timestamp = base_timestamp if item.timestamp_ms is None else item.timestamp_ms
        builder.append(i, timestamp, item.key, item.value, list(item.headers))
    return bytes(builder.build())


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_batches_decode(codec: Compression) -> None:
    batch = kafka_python_batch(codec, SAMPLE, 1_700_000_000_000)
    # kafka-python falls back to no compression when it does not pay; SAMPLE compresses.
    assert parse_batch_header(batch).compression == codec
    validate_batch(batch)
    # kafka-python takes the first record's timestamp as baseTimestamp.
    assert decode_batch_records(batch) == expected_records(0, SAMPLE[0].timestamp_ms or 0, SAMPLE)


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("log_append", [False, True])
def test_our_batches_decode_with_kafka_python(codec: Compression, log_append: bool) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    batch = build_record_batch(
        SAMPLE,
        base_timestamp_ms=1_700_000_000_000,
        base_offset=100,
        compression=codec,
        timestamp_type_log_append=log_append,
    )
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    decoded = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert decoded == [tuple(r) for r in decode_batch_records(batch)]


@pytest.mark.usefixtures("kafka_python_codecs")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(new_records, min_size=1, max_size=8),
    codec=st.sampled_from(ALL_CODECS),
    base_timestamp=st.integers(0, 2**42),
)
def test_interop_property(items: list[NewRecord], codec: Compression, base_timestamp: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    theirs = kafka_python_batch(codec, items, base_timestamp)
    # Every record's timestamp made explicit: kafka-python picks its own baseTimestamp.
    stamped = [i._replace(timestamp_ms=base_timestamp) if i.timestamp_ms is None else i for i in items]
    assert decode_batch_records(theirs) == expected_records(0, 0, stamped)
    ours = build_record_batch(items, base_timestamp_ms=base_timestamp, compression=codec)
    decoded = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in DefaultRecordBatch(bytearray(ours))]
    assert decoded == [tuple(r) for r in decode_batch_records(ours)]


# --- compaction: rebuilt, empty and scanned batches -------------------------------------------


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("horizon", [None, 1_700_000_100_000])
def test_a_rebuilt_batch_keeps_offsets_timestamps_and_header_fields(codec: Compression, horizon: int | None) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    original = build_record_batch(
        SAMPLE,
        base_timestamp_ms=1_700_000_000_000,
        base_offset=500,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
    )
    header = parse_batch_header(original)
    kept = [r for r in decode_batch_records(original) if r.offset in (501, 502)]
    rebuilt = rebuild_batch(header, kept, delete_horizon_ms=horizon)

    new = validate_batch(rebuilt, from_client=False)
    assert (new.base_offset, new.last_offset, new.records_count) == (500, 503, 2)
    assert (new.producer_id, new.producer_epoch, new.base_sequence, new.partition_leader_epoch) == (42, 3, 17, 9)
    assert new.compression == codec
    assert new.delete_horizon_ms == horizon
    assert new.max_timestamp == max(r.timestamp for r in kept)
    assert decode_batch_records(rebuilt) == kept
    theirs = DefaultRecordBatch(bytearray(rebuilt))  # an independent reader agrees
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in theirs] == [
        (r.offset, r.timestamp, r.key, r.value) for r in kept
    ]
    with pytest.raises(InvalidRecordError, match="record count"):
        validate_batch(rebuilt)  # a client may not send such a batch


def test_a_rebuilt_log_append_time_batch_keeps_its_stamp() -> None:
    original = build_record_batch(SAMPLE, base_timestamp_ms=5, timestamp_type_log_append=True)
    header = parse_batch_header(original)
    kept = decode_batch_records(original)[1:2]
    rebuilt = rebuild_batch(header, kept, delete_horizon_ms=None)
    new = parse_batch_header(rebuilt)
    assert new.is_log_append_time and new.max_timestamp == header.max_timestamp
    assert decode_batch_records(rebuilt) == kept


def test_an_empty_batch_keeps_the_producer_fields_and_the_offset_range() -> None:
    original = build_record_batch(
        SAMPLE,
        base_timestamp_ms=1_700_000_000_000,
        base_offset=70,
        compression=Compression.ZSTD,
        producer_id=5,
        producer_epoch=1,
        base_sequence=40,
        partition_leader_epoch=2,
        is_transactional=True,
    )
    header = parse_batch_header(original)
    empty = build_empty_batch(header)
    new = validate_batch(empty, from_client=False)
    assert len(empty) == 61
    assert (new.base_offset, new.last_offset, new.records_count, new.compression) == (70, 73, 0, 0)
    assert (new.producer_id, new.producer_epoch, new.base_sequence, new.last_sequence) == (5, 1, 40, 43)
    assert (new.is_transactional, new.base_timestamp, new.max_timestamp) == (True, -1, header.max_timestamp)
    assert decode_batch_records(empty) == []
    with pytest.raises(LocalProtocolError):
        rebuild_batch(header, [], delete_horizon_ms=None)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_scanning_keys_agrees_with_decoding(codec: Compression) -> None:
    batch = build_record_batch(SAMPLE, base_timestamp_ms=0, base_offset=1 << 40, compression=codec)
    expected = [(r.offset, r.key, r.value is not None) for r in decode_batch_records(batch)]
    assert [tuple(k) for k in scan_record_keys(batch)] == expected
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        scan_record_keys(damaged)


# --- snappy framings ------------------------------------------------------------------------


def xerial_frame(data: bytes, block_size: int) -> bytes:
    """Frame as the Java client's xerial SnappyOutputStream does: 16-byte header, sized blocks."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


@pytest.mark.parametrize("block_size", [32 * 1024, 100, 7])
def test_xerial_snappy_decodes(block_size: int) -> None:
    plain = build_record_batch(SAMPLE, base_timestamp_ms=1_700_000_000_000)
    batch = with_payload(plain, xerial_frame(plain[61:], block_size), Compression.SNAPPY)
    assert decode_batch_records(batch) == decode_batch_records(plain)


@pytest.mark.usefixtures("kafka_python_codecs")
def test_kafka_python_xerial_snappy_decodes() -> None:
    from kafka.codec import snappy_encode

    plain = build_record_batch(SAMPLE, base_timestamp_ms=1_700_000_000_000)
    framed = snappy_encode(plain[61:], xerial_compatible=True, xerial_blocksize=64)
    assert framed.startswith(b"\x82SNAPPY\x00")
    batch = with_payload(plain, framed, Compression.SNAPPY)
    assert decode_batch_records(batch) == decode_batch_records(plain)


def test_truncated_xerial_snappy_is_corrupt() -> None:
    plain = build_record_batch(SAMPLE, base_timestamp_ms=0)
    framed = xerial_frame(plain[61:], 64)
    for cut in (len(framed) - 3, 18):
        with pytest.raises(CorruptRecordError):
            decode_batch_records(with_payload(plain, framed[:cut], Compression.SNAPPY))


# --- corruption -----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_corrupt_compressed_payload_raises(codec: Compression, damage: str) -> None:
    batch = build_record_batch(SAMPLE, base_timestamp_ms=0, compression=codec)
    payload = bytearray(batch[61:])
    if damage == "truncate":
        payload = payload[: len(payload) // 2]
    elif damage == "garbage":
        payload = bytearray(b"\xff" * len(payload))
    else:
        payload[len(payload) // 2] ^= 0x55
    # The CRC is made valid again, so the failure comes from decompression or record parsing.
    with pytest.raises(CorruptRecordError):
        decode_batch_records(with_payload(batch, bytes(payload)))


def test_crc_mismatch_raises_unless_skipped() -> None:
    batch = bytearray(build_record_batch(SAMPLE, base_timestamp_ms=0))
    batch[17] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch_records(bytes(batch))
    assert len(decode_batch_records(bytes(batch), verify_crc=False)) == len(SAMPLE)


def test_structural_corruption_raises() -> None:
    batch = build_record_batch(SAMPLE, base_timestamp_ms=0)
    with pytest.raises(CorruptRecordError):
        decode_batch_records(batch[:40])  # header truncated
    with pytest.raises(CorruptRecordError):
        decode_batch_records(batch[:-1])  # batch shorter than batchLength
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batch_records(bytes(bad_magic))
    with pytest.raises(CorruptRecordError, match="codec"):
        decode_batch_records(with_payload(batch, batch[61:], 5))
    with pytest.raises(CorruptRecordError, match="left after"):
        decode_batch_records(with_payload(batch, batch[61:] + b"\x00"))
    fewer = bytearray(batch)
    struct.pack_into(">i", fewer, 57, len(SAMPLE) + 1)  # one record more than present
    with pytest.raises(CorruptRecordError):
        decode_batch_records(bytes(fewer), verify_crc=False)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(61, 10_000), xor=st.integers(1, 255), codec=st.sampled_from(ALL_CODECS))
def test_damaged_records_decode_or_raise_corrupt(position: int, xor: int, codec: Compression) -> None:
    """Whatever a flipped byte does, the only exception is CorruptRecordError."""
    batch = bytearray(build_record_batch(SAMPLE, base_timestamp_ms=0, compression=codec))
    batch[61 + position % (len(batch) - 61)] ^= xor
    with contextlib.suppress(CorruptRecordError):
        decode_batch_records(bytes(batch), verify_crc=False)
