"""What both record decoders refuse alike, and the bound on what a batch may decompress to.

``scan_record_keys`` (the keyless check, the cleaner's offset map) and ``decode_batch_records`` (the
cleaner's rebuild) must accept exactly the same batches: a batch the lighter scan lets through and
the full decode refuses stops compaction of its partition. The batches here come from
``tests/support/raw_records.py``, byte by byte, since the project's encoder never writes them.
"""

from __future__ import annotations

import pytest

from barnabas.protocol import CorruptRecordError, parse_batch_header
from barnabas.protocol._records import Compression, decode_batch_records, rebuild_batch, scan_record_keys
from tests.support.peak_memory import measure_peak
from tests.support.raw_records import compressed, expanding_batch, raw_batch, raw_record

MIB = 1 << 20


def both_refuse(batch: bytes, match: str, **limit: int) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        scan_record_keys(batch, **limit)
    with pytest.raises(CorruptRecordError, match=match):
        decode_batch_records(batch, **limit)


@pytest.mark.parametrize(
    ("deltas", "last_offset_delta"),
    [([0, 3], 1), ([1, 0], 1), ([0, 0], 1), ([-1, 0], 1), ([0, 1], 0)],
    ids=["past-the-last-offset", "going-back", "repeated", "negative", "last-past-the-header"],
)
def test_a_record_outside_its_batch_offsets_is_refused_by_both(deltas: list[int], last_offset_delta: int) -> None:
    records = [raw_record(delta, f"k{i}".encode(), b"v") for i, delta in enumerate(deltas)]
    for codec in (Compression.NONE, Compression.ZSTD):
        both_refuse(raw_batch(records, last_offset_delta=last_offset_delta, codec=codec), "offset delta")


def test_a_gap_between_offsets_is_a_batch_compaction_wrote() -> None:
    kept = raw_batch([raw_record(0, b"a", b"1"), raw_record(2, b"c", b"3")], last_offset_delta=2)
    assert [k.offset for k in scan_record_keys(kept)] == [r.offset for r in decode_batch_records(kept)] == [0, 2]


def test_a_malformed_header_is_refused_by_the_scan_too() -> None:
    record = bytearray(raw_record(0, b"k", b"v", [(b"h", b"x")]))
    record[-4] = 0x03  # the header key's length: -2
    both_refuse(raw_batch([bytes(record)]), "header key length")


def test_a_header_key_that_is_not_utf8_decodes_and_is_rebuilt_byte_for_byte() -> None:
    key = b"\xff\xfe-not-utf8"
    batch = raw_batch([raw_record(0, b"k", b"v", [(key, b"x")]), raw_record(1, b"k2", b"w")])
    records = decode_batch_records(batch)
    assert [k.key for k in scan_record_keys(batch)] == [b"k", b"k2"]
    rebuilt = rebuild_batch(parse_batch_header(batch), records[:1], delete_horizon_ms=None)
    assert key in rebuilt
    assert decode_batch_records(rebuilt) == records[:1]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_a_decompression_bomb_is_refused_within_the_bound(codec: Compression) -> None:
    bomb = expanding_batch(codec, 64 * MIB)
    assert len(bomb) < MIB // 2
    with measure_peak() as peak:
        both_refuse(bomb, "at most 1048576 bytes", max_records_bytes=MIB)
    assert peak.growth < 8 * MIB, f"refusing a bomb took {peak.growth / MIB:.0f} MiB"


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_a_batch_expanding_far_past_its_first_buffer_decodes_up_to_the_bound(codec: Compression) -> None:
    batch = expanding_batch(codec, 8 * MIB)  # a few hundred bytes to a few KB: far past 16 times itself
    size = len(raw_record(0, b"key", bytes(8 * MIB)))
    (record,) = decode_batch_records(batch, max_records_bytes=size)
    assert record.value == bytes(8 * MIB)
    both_refuse(batch, f"at most {size - 1} bytes", max_records_bytes=size - 1)


def test_raw_snappy_declaring_more_than_the_bound_is_refused_before_allocating() -> None:
    plain = b"".join(raw_record(i, b"k", bytes(1000)) for i in range(100))
    batch = raw_batch([b""] * 100, payload=compressed(Compression.SNAPPY, plain), codec=Compression.SNAPPY)
    assert len(scan_record_keys(batch, max_records_bytes=len(plain))) == 100
    both_refuse(batch, "at most", max_records_bytes=len(plain) - 1)


def test_a_batch_within_the_bound_decodes_whatever_the_codec() -> None:
    records = [raw_record(i, f"k{i}".encode(), bytes(5000)) for i in range(10)]
    size = len(b"".join(records))
    for codec in Compression:
        batch = raw_batch(records, codec=codec)
        assert len(decode_batch_records(batch, max_records_bytes=size)) == 10
        if codec != Compression.NONE:  # an uncompressed batch is its own bound: it is already in memory
            both_refuse(batch, "at most", max_records_bytes=size - 1)
