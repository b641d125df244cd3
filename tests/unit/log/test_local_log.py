"""LocalLog on its own: the segment list, its floor lookup and the segment files, on real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.log import LogConfig
from barnabas.log.local_log import LocalLog
from barnabas.log.segment import LogSegment
from barnabas.protocol import build_record_batch, parse_batch_header

from .batches import T0

CONFIG = LogConfig()
DELAY = 1_000


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalLog]:
    """A log of three segments at 0, 10 and 20, each holding two 5-record batches."""
    directory = tmp_path / "orders-0"
    directory.mkdir()
    log = LocalLog(directory, [_segment(directory, 0)])
    fill(log.active, 0)
    for base in (10, 20):
        log.roll(base, CONFIG, T0)
        fill(log.active, base)
    yield log
    log.close()


def _segment(directory: Path, base_offset: int) -> LogSegment:
    return LogSegment.create(
        directory,
        base_offset,
        index_interval_bytes=CONFIG.index_interval_bytes,
        max_index_bytes=CONFIG.segment_index_bytes,
        now_ms=T0,
    )


def fill(segment: LogSegment, base_offset: int) -> None:
    for first in (base_offset, base_offset + 5):
        batch = build_record_batch([(None, b"v")] * 5, base_timestamp_ms=T0, base_offset=first)
        segment.append(batch, parse_batch_header(batch))


def bases(log: LocalLog) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_roll_appends_a_new_active_segment_at_the_base_offset(local: LocalLog) -> None:
    assert bases(local) == [0, 10, 20]
    old = local.active
    assert old.time_index.entries == 0  # small batches: no index entry yet
    segment = local.roll(30, CONFIG, T0)
    assert local.active is segment
    # The old segment's max timestamp went into its time index, as Kafka does before a roll: every
    # record has T0, so it is the last offset of the first batch that reached it (20-24).
    assert (old.time_index.entries, old.time_index.last_entry) == (1, (T0, 24))
    assert (segment.base_offset, segment.size) == (30, 0)
    assert local.floor_index(30) == 3


@pytest.mark.parametrize(("offset", "index"), [(0, 0), (9, 0), (10, 1), (19, 1), (20, 2), (1_000, 2)])
def test_floor_index_finds_the_segment_holding_an_offset(local: LocalLog, offset: int, index: int) -> None:
    assert local.floor_index(offset) == index


def test_floor_index_below_the_first_segment_is_the_first(tmp_path: Path) -> None:
    log = LocalLog(tmp_path, [_segment(tmp_path, 50)])
    try:
        assert log.floor_index(3) == 0
    finally:
        log.close()


def test_deleted_segments_leave_the_list_and_their_files_go_after_the_delay(local: LocalLog) -> None:
    first_log = local.segments[0].path
    local.delete_segments([0, 10], T0, DELAY)
    assert bases(local) == [20]
    assert local.floor_index(15) == 0  # the bases moved with the list
    assert not first_log.exists()
    assert local.remove_due_files(T0 + DELAY - 1, None) == []
    removed = local.remove_due_files(T0 + DELAY, None)
    assert len(removed) == 6  # .log, .index and .timeindex of each, renamed .deleted
    assert all(p.name.endswith(".deleted") and not p.exists() for p in removed)
    assert local.remove_due_files(T0 + 10 * DELAY, None) == []


def test_truncate_to_drops_later_segments_and_cuts_the_one_holding_the_offset(local: LocalLog) -> None:
    later = local.segments[2].path
    local.truncate_to(15)
    assert bases(local) == [0, 10]
    assert not later.exists()
    assert local.active.read_next_offset() == 15
    assert local.floor_index(100) == 1


def test_reset_at_leaves_one_empty_segment(local: LocalLog) -> None:
    local.reset_at(42, CONFIG, T0)
    assert bases(local) == [42]
    assert local.floor_index(100) == 0
    assert local.active.size == 0
    assert sorted(p.name for p in local.directory.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_replaced_range_accepts_consecutive_closed_segments(local: LocalLog) -> None:
    new = _segment(local.directory, 100)
    try:
        assert local.replaced_range([new], local.segments[0:2]) == range(0, 2)
        assert local.replaced_range([new], local.segments[1:2]) == range(1, 2)
    finally:
        new.close()


def test_replaced_range_refuses_what_is_not_consecutive_closed_segments(local: LocalLog) -> None:
    local.roll(30, CONFIG, T0)
    new = _segment(local.directory, 100)
    segments = local.segments
    try:
        # The active segment, a gap between closed ones, a segment not in the log.
        for old in ([segments[3]], [segments[0], segments[2]], [new]):
            with pytest.raises(ValueError, match="consecutive closed segments"):
                local.replaced_range([new], old)
        with pytest.raises(ValueError):
            local.replaced_range([], [segments[0]])
    finally:
        new.close()


def test_replace_segments_swaps_cleaned_files_in(local: LocalLog) -> None:
    cleaned = LogSegment.create(
        local.directory,
        0,
        index_interval_bytes=CONFIG.index_interval_bytes,
        max_index_bytes=CONFIG.segment_index_bytes,
        now_ms=T0,
        file_suffix=".cleaned",
    )
    fill(cleaned, 0)
    old = local.segments[0:2]
    local.replace_segments([cleaned], old, local.replaced_range([cleaned], old), T0, DELAY)
    assert local.segments[0] is cleaned
    assert bases(local) == [0, 20]
    assert local.floor_index(15) == 0
    assert cleaned.path.name == "00000000000000000000.log"
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in local.directory.iterdir())
    assert len(local.remove_due_files(T0 + DELAY, None)) == 6
