from __future__ import annotations

import os
from pathlib import Path

from barnabas.log.segment import LogSegment
from barnabas.protocol import RecordBatchHeader, parse_batch_header, patch_batch

from .batches import T0, decode, make_batch, offsets

NOW = T0


def create(tmp_path: Path, base: int = 0, interval: int = 4096, index_bytes: int = 1 << 20) -> LogSegment:
    return LogSegment.create(tmp_path, base, index_interval_bytes=interval, max_index_bytes=index_bytes, now_ms=NOW)


def append(segment: LogSegment, base_offset: int, count: int = 1, **kwargs: object) -> RecordBatchHeader:
    batch = make_batch(count, **kwargs)  # type: ignore[arg-type]
    patch_batch(batch, 0, base_offset, 0)
    header = parse_batch_header(batch)
    segment.append(batch, header)
    return header


def fill(segment: LogSegment, batches: int, per_batch: int = 3, **kwargs: object) -> list[RecordBatchHeader]:
    headers = []
    offset = segment.base_offset
    for _ in range(batches):
        headers.append(append(segment, offset, per_batch, **kwargs))
        offset += per_batch
    return headers


def test_files_are_named_by_the_base_offset(tmp_path: Path) -> None:
    create(tmp_path, base=42)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_append_then_read_returns_the_bytes_written(tmp_path: Path) -> None:
    segment = create(tmp_path)
    headers = fill(segment, 3)
    assert segment.size == sum(h.size for h in headers)
    assert segment.path.stat().st_size == segment.size
    assert offsets(segment.read(0, segment.size)) == list(range(9))
    assert segment.read(segment.size, 100) == b""


def test_translate_offset_finds_the_batch_holding_an_offset(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0)  # an index entry for (nearly) every batch
    headers = fill(segment, 10)
    assert segment.offset_index.entries > 5
    for offset in range(30):
        found = segment.translate_offset(offset)
        assert found is not None
        assert found.header.base_offset <= offset <= found.header.last_offset
        assert found.header == headers[offset // 3]._replace(crc=found.header.crc)
    assert segment.translate_offset(30) is None


def test_index_entries_follow_index_interval_bytes(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=500)
    headers = fill(segment, 20, per_batch=1, value_size=150)
    # Kafka's rule: the next batch gets an entry once more than interval bytes were written
    # since the last entry; the entry maps the batch's last offset to its position.
    expected, since, position = [], 0, 0
    for header in headers:
        if since > 500:
            expected.append((header.last_offset, position))
            since = 0
        since += header.size
        position += header.size
    assert 3 <= len(expected) < 20
    assert [tuple(segment.offset_index.entry(i)) for i in range(segment.offset_index.entries)] == expected


def test_time_index_records_a_growing_max_timestamp(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0)
    for i, ts in enumerate([T0 + 10, T0 + 5, T0 + 30, T0 + 20, T0 + 40]):
        append(segment, i, 1, timestamp=ts)
    assert segment.max_timestamp == T0 + 40
    assert segment.offset_of_max_timestamp == 4
    entries = [segment.time_index.lookup(ts) for ts in (T0 + 10, T0 + 30)]
    assert [e.timestamp for e in entries] == [T0 + 10, T0 + 30]


def test_find_batch_by_timestamp_uses_batch_max_timestamps(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0)
    stamps = [T0 + 10, T0 + 5, T0 + 30, T0 + 20, T0 + 40]
    for i, ts in enumerate(stamps):
        append(segment, i * 2, 2, timestamps=[ts - 1, ts])
    found = segment.find_batch_by_timestamp(T0 + 25, starting_offset=0)
    assert found is not None and found.header.base_offset == 4 and found.header.max_timestamp == T0 + 30
    found = segment.find_batch_by_timestamp(T0, starting_offset=0)
    assert found is not None and found.header.base_offset == 0
    found = segment.find_batch_by_timestamp(T0, starting_offset=5)
    assert found is not None and found.header.base_offset == 4  # batch 4-5 holds offset 5
    assert segment.find_batch_by_timestamp(T0 + 41, starting_offset=0) is None


def test_should_roll_by_size(tmp_path: Path) -> None:
    segment = create(tmp_path)
    header = append(segment, 0, 1)
    common = {"max_timestamp": T0, "last_offset": 1, "now_ms": NOW, "segment_ms": 10**9}
    assert not segment.should_roll(batch_size=header.size, segment_bytes=2 * header.size, **common)
    assert segment.should_roll(batch_size=header.size, segment_bytes=2 * header.size - 1, **common)


def test_should_roll_by_time_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    segment = create(tmp_path)
    header = append(segment, 0, 1, timestamp=T0)
    common = {"batch_size": header.size, "last_offset": 1, "segment_bytes": 1 << 30, "segment_ms": 1000}
    # The incoming batch's timestamp is compared with the first batch's, not the wall clock.
    assert not segment.should_roll(max_timestamp=T0 + 1000, now_ms=NOW + 10**9, **common)
    assert segment.should_roll(max_timestamp=T0 + 1001, now_ms=NOW, **common)


def test_should_roll_by_time_falls_back_to_the_creation_time(tmp_path: Path) -> None:
    segment = create(tmp_path)
    header = append(segment, 0, 1, timestamp=-1)  # no usable timestamp in the batch
    common = {"batch_size": header.size, "last_offset": 1, "segment_bytes": 1 << 30, "segment_ms": 1000}
    assert not segment.should_roll(max_timestamp=-1, now_ms=NOW + 1000, **common)
    assert segment.should_roll(max_timestamp=-1, now_ms=NOW + 1001, **common)


def test_an_empty_segment_never_rolls_by_time(tmp_path: Path) -> None:
    segment = create(tmp_path)
    assert not segment.should_roll(
        batch_size=100,
        max_timestamp=T0,
        last_offset=0,
        now_ms=NOW + 10**12,
        segment_bytes=1 << 30,
        segment_ms=1,
    )


def test_should_roll_when_an_index_is_full(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0, index_bytes=16)  # two offset-index entries
    fill(segment, 3)
    assert segment.offset_index.is_full
    assert segment.should_roll(
        batch_size=100, max_timestamp=T0, last_offset=10, now_ms=NOW, segment_bytes=1 << 30, segment_ms=10**9
    )


def test_should_roll_when_the_relative_offset_overflows(tmp_path: Path) -> None:
    segment = create(tmp_path, base=10)
    common = {
        "batch_size": 100,
        "max_timestamp": T0,
        "now_ms": NOW,
        "segment_bytes": 1 << 30,
        "segment_ms": 10**9,
    }
    assert not segment.should_roll(last_offset=10 + 2**31 - 1, **common)
    assert segment.should_roll(last_offset=10 + 2**31, **common)


def test_recover_rebuilds_identical_indexes(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=300)
    fill(segment, 30, value_size=50)
    segment.flush()
    offset_bytes = segment.offset_index.path.read_bytes()
    segment.on_become_inactive()
    time_bytes = segment.time_index.path.read_bytes()
    assert segment.recover() == 0
    assert segment.offset_index.path.read_bytes() == offset_bytes
    assert segment.time_index.path.read_bytes() == time_bytes


def test_recover_truncates_a_torn_batch(tmp_path: Path) -> None:
    segment = create(tmp_path)
    headers = fill(segment, 3)
    os.truncate(segment.path, segment.size - 10)
    seen: list[int] = []
    truncated = segment.recover(lambda h: seen.append(h.base_offset))
    assert truncated == headers[2].size - 10
    assert seen == [0, 3]
    assert segment.size == headers[0].size + headers[1].size == segment.path.stat().st_size
    assert segment.read_next_offset() == 6


def test_recover_truncates_at_a_bad_crc(tmp_path: Path) -> None:
    segment = create(tmp_path)
    headers = fill(segment, 3)
    with segment.path.open("r+b") as f:
        f.seek(headers[0].size + headers[1].size - 3)  # inside the second batch's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert segment.recover() == headers[1].size + headers[2].size
    assert offsets(segment.read(0, 10_000)) == [0, 1, 2]


def test_recover_cuts_a_zero_filled_tail(tmp_path: Path) -> None:
    segment = create(tmp_path)
    headers = fill(segment, 2)
    with segment.path.open("ab") as f:
        f.write(b"\x00" * 4096)
    assert segment.recover() == 4096
    assert segment.size == sum(h.size for h in headers)


def test_recover_rejects_offsets_that_go_backwards(tmp_path: Path) -> None:
    segment = create(tmp_path)
    append(segment, 0, 3)
    append(segment, 1, 3)  # overlaps the first batch
    assert segment.recover() > 0
    assert segment.read_next_offset() == 3


def test_truncate_to_removes_the_batch_holding_the_offset_and_after(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0)
    headers = fill(segment, 5, timestamps=None)
    removed = segment.truncate_to(6)
    assert removed == sum(h.size for h in headers[2:])
    assert segment.read_next_offset() == 6
    assert segment.offset_index.last_offset < 6
    assert decode(segment.read(0, 10_000))[-1].last_offset == 5


def test_mark_deleted_renames_every_file(tmp_path: Path) -> None:
    segment = create(tmp_path, base=7)
    fill(segment, 1)
    renamed = segment.mark_deleted()
    assert sorted(p.name for p in renamed) == sorted(p.name for p in tmp_path.iterdir())
    assert all(p.name.endswith(".deleted") for p in tmp_path.iterdir())


def test_reopen_loads_indexes_and_max_timestamp(tmp_path: Path) -> None:
    segment = create(tmp_path, interval=0)
    for i, ts in enumerate([T0 + 1, T0 + 9, T0 + 3]):
        append(segment, i, 1, timestamp=ts)
    segment.on_become_inactive()
    segment.close()
    reopened = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_bytes=1 << 20, now_ms=NOW)
    assert reopened.max_timestamp == T0 + 9
    assert reopened.offset_of_max_timestamp == 1
    found = reopened.translate_offset(2)
    assert found is not None and found.header.base_offset == 2


def synced_files(fsyncs: list[tuple[str, Path]]) -> list[str]:
    return sorted(path.name for _, path in fsyncs)


def test_a_flush_syncs_only_the_files_written_since_the_last_one(
    tmp_path: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    segment = create(tmp_path, interval=0)
    segment.flush()
    fsyncs.clear()
    segment.flush()
    assert synced_files(fsyncs) == [], "nothing was written since the last flush"
    append(segment, 0)
    segment.flush()
    assert "00000000000000000000.log" in synced_files(fsyncs)
    fsyncs.clear()
    segment.truncate_to(0)
    segment.flush()
    assert "00000000000000000000.log" in synced_files(fsyncs), "a cut is a change to make durable too"


def test_a_recovered_segment_is_synced_at_its_next_flush(tmp_path: Path, fsyncs: list[tuple[str, Path]]) -> None:
    """What a crashed process wrote may never have left the page cache."""
    segment = create(tmp_path)
    append(segment, 0)
    segment.close()
    reopened = LogSegment.open(tmp_path, 0, index_interval_bytes=4096, max_index_bytes=1 << 20, now_ms=NOW)
    reopened.recover()
    fsyncs.clear()
    reopened.flush()
    assert "00000000000000000000.log" in synced_files(fsyncs)
