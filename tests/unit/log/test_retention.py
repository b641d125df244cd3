from __future__ import annotations

from pathlib import Path

from barnabas.log import LogConfig, PartitionLog
from barnabas.log.retention import SegmentStats, plan_retention

from .batches import T0, make_batch, offsets
from .conftest import OpenLog

DAY = 86_400_000
BATCH = len(make_batch(2))


def plan(segments: list[SegmentStats], config: LogConfig, **kwargs: int) -> list[tuple[int, str]]:
    args = {"log_start_offset": 0, "high_watermark": 1000, "log_end_offset": 1000, "now_ms": T0} | kwargs
    return list(plan_retention(segments, config=config, **args).deletions)


# --- pure decisions ----------------------------------------------------------------------------

SEGMENTS = [
    SegmentStats(0, 100, T0 - 3 * DAY),
    SegmentStats(10, 100, T0 - 2 * DAY),
    SegmentStats(20, 100, T0 - 1 * DAY),
    SegmentStats(30, 50, T0),
]


def test_time_retention_deletes_segments_older_than_retention_ms() -> None:
    assert plan(SEGMENTS, LogConfig(retention_ms=2 * DAY - 1)) == [(0, "retention_ms"), (10, "retention_ms")]
    assert plan(SEGMENTS, LogConfig(retention_ms=2 * DAY)) == [(0, "retention_ms")]
    assert plan(SEGMENTS, LogConfig(retention_ms=-1)) == []


def test_time_retention_stops_at_the_first_young_segment() -> None:
    segments = [SegmentStats(0, 1, T0), SegmentStats(10, 1, T0 - 5 * DAY), SegmentStats(20, 1, T0)]
    assert plan(segments, LogConfig(retention_ms=DAY)) == []


def test_size_retention_keeps_at_least_retention_bytes() -> None:
    # 350 bytes in all: deleting 0 and 10 leaves 150 >= 150
    assert plan(SEGMENTS, LogConfig(retention_bytes=150)) == [(0, "retention_bytes"), (10, "retention_bytes")]
    assert plan(SEGMENTS, LogConfig(retention_bytes=151)) == [(0, "retention_bytes")]
    assert plan(SEGMENTS, LogConfig(retention_bytes=351)) == []
    assert plan(SEGMENTS, LogConfig(retention_bytes=-1)) == []


def test_log_start_retention_deletes_segments_wholly_below_it() -> None:
    assert plan(SEGMENTS, LogConfig(), log_start_offset=19) == [(0, "log_start_offset")]
    assert plan(SEGMENTS, LogConfig(), log_start_offset=20) == [
        (0, "log_start_offset"),
        (10, "log_start_offset"),
    ]


def test_log_start_retention_applies_to_compacted_topics_only_rule() -> None:
    config = LogConfig(cleanup_policy="compact", retention_ms=0, retention_bytes=0)
    assert plan(SEGMENTS, config, log_start_offset=10) == [(0, "log_start_offset")]


def test_rules_apply_in_kafkas_order() -> None:
    deletions = plan(SEGMENTS, LogConfig(retention_bytes=150, retention_ms=DAY - 1), log_start_offset=10)
    assert deletions == [(0, "log_start_offset"), (10, "retention_bytes"), (20, "retention_ms")]


def test_nothing_at_or_above_the_high_watermark_is_deleted() -> None:
    assert plan(SEGMENTS, LogConfig(retention_ms=0), high_watermark=19) == [(0, "retention_ms")]


def test_the_active_segment_is_deleted_only_by_rolling_first() -> None:
    result = plan_retention(
        SEGMENTS,
        config=LogConfig(retention_ms=0),
        log_start_offset=0,
        high_watermark=40,
        log_end_offset=40,
        now_ms=T0 + 1,
    )
    assert result.base_offsets == [0, 10, 20, 30]
    assert result.roll_first


def test_an_empty_active_segment_is_never_deleted() -> None:
    segments = [SegmentStats(0, 100, T0 - DAY), SegmentStats(10, 0, -1)]
    result = plan_retention(
        segments,
        config=LogConfig(retention_ms=0),
        log_start_offset=0,
        high_watermark=10,
        log_end_offset=10,
        now_ms=T0,
    )
    assert result.base_offsets == [0]
    assert not result.roll_first


# --- applied to a log --------------------------------------------------------------------------


def fill(log: PartitionLog, timestamps: list[int]) -> None:
    for ts in timestamps:
        log.append_as_leader(make_batch(2, timestamp=ts), 0, T0)


def test_time_retention_on_a_log(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH, retention_ms=DAY, file_delete_delay_ms=0))
    fill(log, [T0 - 3 * DAY, T0 - 3 * DAY, T0 - 2 * DAY, T0, T0, T0])  # segments 0, 4, 8
    result = log.maintain(T0)
    assert result.deleted_segments == [(0, "retention_ms")]
    assert log.log_start_offset == 4
    assert [s.base_offset for s in log.segments] == [4, 8]
    assert not list(log_dir.glob("00000000000000000000.*"))
    assert offsets(log.read(4, 1 << 20).records) == [4, 5, 6, 7]


def test_size_retention_on_a_log(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH, retention_bytes=3 * BATCH, file_delete_delay_ms=0))
    fill(log, [T0] * 7)  # segments 0, 4, 8, 12 holding 2, 2, 2, 1 batches
    result = log.maintain(T0)
    assert result.deleted_segments == [(0, "retention_bytes"), (4, "retention_bytes")]
    assert log.size_bytes == 3 * BATCH
    assert log.log_start_offset == 8


def test_log_start_retention_after_delete_records(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH, retention_ms=-1, file_delete_delay_ms=0))
    fill(log, [T0] * 6)  # segments 0, 4, 8
    log.delete_records_before(9)
    assert log.segment_count == 3  # deleted by maintenance, not by DeleteRecords itself
    assert log.maintain(T0).deleted_segments == [(0, "log_start_offset"), (4, "log_start_offset")]
    assert log.log_start_offset == 9
    assert offsets(log.read(9, 1 << 20).records) == [8, 9, 10, 11]


def test_an_expired_active_segment_is_rolled_then_deleted(open_log: OpenLog) -> None:
    log = open_log(LogConfig(retention_ms=DAY, file_delete_delay_ms=0))
    fill(log, [T0 - 2 * DAY] * 3)
    result = log.maintain(T0)
    assert result.rolled
    assert result.deleted_segments == [(0, "retention_ms")]
    assert [s.base_offset for s in log.segments] == [6]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (6, 6, 0)
    assert log.append_as_leader(make_batch(1), 0, T0).base_offset == 6


def test_files_are_removed_after_file_delete_delay(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH, retention_ms=DAY, file_delete_delay_ms=60_000))
    fill(log, [T0 - 2 * DAY] * 2 + [T0] * 2)
    first = log.maintain(T0)
    assert first.deleted_segments == [(0, "retention_ms")]
    deleted = sorted(p.name for p in log_dir.glob("*.deleted"))
    assert deleted == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert log.maintain(T0 + 59_999).removed_files == []
    assert sorted(p.name for p in log.maintain(T0 + 60_000).removed_files) == deleted
    assert not list(log_dir.glob("*.deleted"))


def test_old_producer_snapshots_go_with_their_segments(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH, retention_ms=DAY, file_delete_delay_ms=0))
    fill(log, [T0 - 2 * DAY] * 4 + [T0] * 2)  # rolls at 4 and 8 write snapshots
    assert sorted(p.name for p in log_dir.glob("*.snapshot")) == [
        "00000000000000000004.snapshot",
        "00000000000000000008.snapshot",
    ]
    log.maintain(T0)
    assert sorted(p.name for p in log_dir.glob("*.snapshot")) == ["00000000000000000008.snapshot"]
