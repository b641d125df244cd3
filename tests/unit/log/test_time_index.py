from __future__ import annotations

import struct
from pathlib import Path

import pytest

from barnabas.log.errors import CorruptIndexError
from barnabas.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

BASE = 100


@pytest.fixture
def index(tmp_path: Path) -> TimeIndex:
    index = TimeIndex.create(tmp_path / "00000000000000000100.timeindex", BASE, 1200)
    for ts, offset in [(1000, 105), (2000, 110), (3000, 120)]:
        assert index.maybe_append(ts, offset)
    return index


def test_only_a_growing_timestamp_adds_an_entry(index: TimeIndex) -> None:
    assert not index.maybe_append(3000, 130)
    assert index.entries == 3
    with pytest.raises(ValueError, match="below"):
        index.maybe_append(2500, 130)
    with pytest.raises(ValueError, match="offset"):
        index.maybe_append(4000, 119)


def test_lookup_returns_the_last_entry_not_after_the_target(index: TimeIndex) -> None:
    assert index.lookup(2000) == TimestampOffset(2000, 110)
    assert index.lookup(2999) == TimestampOffset(2000, 110)
    assert index.lookup(10**15) == TimestampOffset(3000, 120)


def test_lookup_before_the_first_entry(index: TimeIndex) -> None:
    assert index.lookup(999) == TimestampOffset(NO_TIMESTAMP, BASE)


def test_last_entry(index: TimeIndex, tmp_path: Path) -> None:
    assert index.last_entry == TimestampOffset(3000, 120)
    assert TimeIndex.create(tmp_path / "e", 7, 120).last_entry == TimestampOffset(NO_TIMESTAMP, 7)


def test_file_layout_is_kafkas(index: TimeIndex) -> None:
    assert list(struct.iter_unpack(">qi", index.path.read_bytes())) == [(1000, 5), (2000, 10), (3000, 20)]


def test_truncate_to(index: TimeIndex) -> None:
    index.truncate_to(110)
    assert index.last_entry == TimestampOffset(1000, 105)
    assert index.path.stat().st_size == 12


def test_load_and_sanity_check(index: TimeIndex) -> None:
    index.close()
    loaded = TimeIndex.load(index.path, BASE, 1200)
    assert loaded.lookup(2500) == TimestampOffset(2000, 110)
    with index.path.open("ab") as f:
        f.write(struct.pack(">qi", 500, 30))  # timestamp goes backwards
    with pytest.raises(CorruptIndexError, match="does not increase"):
        TimeIndex.load(index.path, BASE, 1200)


def test_truncated_entry_is_corrupt(index: TimeIndex) -> None:
    with index.path.open("ab") as f:
        f.write(b"\x00" * 5)
    with pytest.raises(CorruptIndexError, match="multiple"):
        TimeIndex.load(index.path, BASE, 1200)


def test_full_index_refuses_entries_except_the_final_one(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "t", BASE, 24)  # two entries
    index.maybe_append(1, 100)
    index.maybe_append(2, 101)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(3, 102)
    assert index.maybe_append(3, 102, skip_full_check=True)
