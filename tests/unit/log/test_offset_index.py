from __future__ import annotations

import struct
from pathlib import Path

import pytest

from barnabas.log.errors import CorruptIndexError
from barnabas.log.offset_index import OffsetIndex, OffsetPosition

BASE = 1000


def make_index(path: Path, entries: list[tuple[int, int]], max_bytes: int = 1024) -> OffsetIndex:
    index = OffsetIndex.create(path, BASE, max_bytes)
    for offset, position in entries:
        index.append(offset, position)
    return index


@pytest.fixture
def index(tmp_path: Path) -> OffsetIndex:
    # Entries map the last offset of a batch to where that batch starts, as Kafka writes them.
    return make_index(tmp_path / "00000000000000001000.index", [(1010, 100), (1020, 200), (1030, 300)])


def test_lookup_exact_entry(index: OffsetIndex) -> None:
    assert index.lookup(1020) == OffsetPosition(1020, 200)


def test_lookup_between_entries_returns_the_lower_one(index: OffsetIndex) -> None:
    assert index.lookup(1025) == OffsetPosition(1020, 200)
    assert index.lookup(1029) == OffsetPosition(1020, 200)


def test_lookup_before_the_first_entry_returns_the_segment_start(index: OffsetIndex) -> None:
    assert index.lookup(1005) == OffsetPosition(BASE, 0)
    assert index.lookup(5) == OffsetPosition(BASE, 0)


def test_lookup_past_the_last_entry_returns_the_last(index: OffsetIndex) -> None:
    assert index.lookup(10**12) == OffsetPosition(1030, 300)


def test_empty_index_lookup(tmp_path: Path) -> None:
    assert make_index(tmp_path / "i", []).lookup(5000) == OffsetPosition(BASE, 0)


def test_file_holds_big_endian_relative_entries(index: OffsetIndex) -> None:
    data = index.path.read_bytes()
    assert list(struct.iter_unpack(">ii", data)) == [(10, 100), (20, 200), (30, 300)]


def test_load_reads_back_the_entries(index: OffsetIndex) -> None:
    index.close()
    loaded = OffsetIndex.load(index.path, BASE, 1024, segment_size=400)
    assert [loaded.entry(i) for i in range(loaded.entries)] == [(1010, 100), (1020, 200), (1030, 300)]
    assert loaded.lookup(1031) == OffsetPosition(1030, 300)


def test_truncate_to_removes_entries_at_and_above(index: OffsetIndex) -> None:
    index.truncate_to(1020)
    assert index.entries == 1
    assert index.lookup(1030) == OffsetPosition(1010, 100)
    assert index.path.stat().st_size == 8
    index.append(1015, 150)  # appending continues after truncation
    assert index.lookup(1016) == OffsetPosition(1015, 150)


def test_truncate_to_between_entries_keeps_the_lower(index: OffsetIndex) -> None:
    index.truncate_to(1025)
    assert index.entries == 2


def test_append_must_increase(index: OffsetIndex) -> None:
    with pytest.raises(ValueError, match="does not follow"):
        index.append(1030, 400)
    with pytest.raises(ValueError, match="does not follow"):
        index.append(1040, 250)


def test_is_full_at_segment_index_bytes(tmp_path: Path) -> None:
    index = make_index(tmp_path / "i", [(1001, 10), (1002, 20)], max_bytes=20)  # room for 2 entries
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(1003, 30)


def test_size_not_a_multiple_of_eight_is_corrupt(index: OffsetIndex) -> None:
    with index.path.open("ab") as f:
        f.write(b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex.load(index.path, BASE, 1024, segment_size=400)


def test_decreasing_offsets_are_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(struct.pack(">iiii", 20, 100, 10, 200))
    with pytest.raises(CorruptIndexError, match="does not increase"):
        OffsetIndex.load(path, BASE, 1024, segment_size=400)


def test_decreasing_positions_are_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(struct.pack(">iiii", 10, 200, 20, 100))
    with pytest.raises(CorruptIndexError, match="below"):
        OffsetIndex.load(path, BASE, 1024, segment_size=400)


def test_position_past_the_segment_is_corrupt(index: OffsetIndex) -> None:
    with pytest.raises(CorruptIndexError, match="past the segment"):
        OffsetIndex.load(index.path, BASE, 1024, segment_size=300)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex.load(tmp_path / "absent.index", BASE, 1024, segment_size=0)
