"""Which log the cleaner picks and over what range (LogCleanerManager), and its checkpoint file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.log import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogConfig, LogManager, PartitionLog, TopicPartition
from barnabas.log.checkpoint import OffsetCheckpointFile
from barnabas.log.cleaner_manager import cleanable_offsets, log_to_clean, max_compaction_delay

from .batches import T0
from .compaction import produce

MINUTE = 60_000


def config(**overrides: object) -> LogConfig:
    values: dict[str, object] = {
        "cleanup_policy": "compact",
        "segment_bytes": 1024,
        "min_cleanable_dirty_ratio": 0.0,
        "file_delete_delay_ms": 0,
    }
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def manager(data_dir: Path) -> Iterator[LogManager]:
    logs = LogManager([data_dir], LogConfig(), 0, "c1")
    logs.load_all(T0)
    yield logs
    logs.close()


def fill(log: PartitionLog, count: int, *, timestamp: int = T0, keys: int = 4) -> None:
    for i in range(count):
        produce(log, [(f"k{i % keys}".encode(), f"v{i}".encode())], timestamp=timestamp, now_ms=timestamp)


def test_the_dirty_section_ends_at_the_active_segment_and_the_high_watermark(manager: LogManager) -> None:
    log = manager.create("orders", 0, None, config(), T0)
    fill(log, 40)
    bases = [s.base_offset for s in log.segments]
    assert cleanable_offsets(log, None, T0) == (0, bases[-1], False)
    log.hw_follows_log_end = False
    log.high_watermark = bases[1] + 2
    first_dirty, uncleanable, _ = cleanable_offsets(log, None, T0)
    assert (first_dirty, uncleanable) == (0, bases[1] + 2)
    assert log_to_clean(TopicPartition("orders", 0), log, None, T0).first_uncleanable_offset == bases[1]


def test_a_checkpoint_outside_the_log_restarts_at_the_log_start(manager: LogManager) -> None:
    log = manager.create("orders", 0, None, config(), T0)
    fill(log, 40)
    assert cleanable_offsets(log, 10, T0)[0::2] == (10, False)
    assert cleanable_offsets(log, 1000, T0)[0::2] == (0, True)  # past the log end
    log.delete_records_before(5)
    assert cleanable_offsets(log, 2, T0)[0::2] == (5, True)  # below the log start


def test_min_compaction_lag_keeps_young_segments_dirty(manager: LogManager) -> None:
    log = manager.create("orders", 0, None, config(min_compaction_lag_ms=10 * MINUTE), T0)
    fill(log, 15, timestamp=T0)
    old_end = log.log_end_offset
    fill(log, 30, timestamp=T0 + 5 * MINUTE)
    young = next(s.base_offset for s in log.segments if s.largest_timestamp > T0 + MINUTE)
    assert cleanable_offsets(log, None, T0 + 11 * MINUTE)[1] == young
    assert young <= old_end + 12  # the first segment holding young records
    job = manager.begin_cleaning(T0 + 11 * MINUTE)
    assert job is not None and job.first_uncleanable_offset == young
    manager.cleaner.abandon(job)
    assert cleanable_offsets(log, None, T0 + 16 * MINUTE)[1] == log.active_segment.base_offset


def test_the_dirtiest_log_above_its_ratio_goes_first(manager: LogManager, data_dir: Path) -> None:
    calm = manager.create("calm", 0, None, config(min_cleanable_dirty_ratio=0.5), T0)
    busy = manager.create("busy", 0, None, config(min_cleanable_dirty_ratio=0.5), T0)
    fill(calm, 40, keys=40)  # every record stays: a big clean section
    fill(busy, 40)
    assert manager.clean_once(T0)
    assert manager.clean_once(T0)
    assert not manager.clean_once(T0)  # both clean now: ratio 0
    fill(calm, 4, keys=40)  # a little dirt: under the ratio
    fill(busy, 60)  # a lot
    calm.roll(T0)
    job = manager.begin_cleaning(T0)
    assert job is not None and job.topic_partition == TopicPartition("busy", 0)
    assert manager.begin_cleaning(T0) is None  # one pass at a time
    result = manager.cleaner.clean(job)
    assert manager.cleaner.finish(result, T0)
    assert manager.begin_cleaning(T0) is None  # calm's dirty ratio is below 0.5
    checkpoints = OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT).read()
    assert checkpoints == {
        TopicPartition("busy", 0): busy.active_segment.base_offset,
        TopicPartition("calm", 0): checkpoints[TopicPartition("calm", 0)],
    }


def test_max_compaction_lag_forces_a_pass_below_the_ratio(manager: LogManager) -> None:
    log = manager.create("orders", 0, None, config(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=MINUTE), T0)
    fill(log, 40)
    assert max_compaction_delay(log, 0, T0) == 0
    assert manager.begin_cleaning(T0) is None  # a ratio of 1.0 is never exceeded
    assert max_compaction_delay(log, 0, T0 + 2 * MINUTE) == MINUTE
    assert manager.clean_once(T0 + 2 * MINUTE)


def test_the_cleaner_can_be_disabled(data_dir: Path) -> None:
    logs = LogManager([data_dir], LogConfig(), 0, "c1", cleaner_config=CleanerConfig(enable=False))
    try:
        logs.load_all(T0)
        fill(logs.create("orders", 0, None, config(), T0), 40)
        assert not logs.clean_once(T0)
    finally:
        logs.close()


def test_a_truncation_lowers_the_checkpoint(manager: LogManager, data_dir: Path) -> None:
    log = manager.create("orders", 0, None, config(), T0)
    fill(log, 40)
    assert manager.clean_once(T0)
    tp = TopicPartition("orders", 0)
    assert manager.cleaner.checkpoints(data_dir)[tp] == log.active_segment.base_offset
    log.truncate_to(10, T0)
    manager.begin_cleaning(T0)  # the cleaner looks at the log again
    assert manager.cleaner.checkpoints(data_dir)[tp] == log.active_segment.base_offset <= 10


def test_checkpoints_survive_a_restart_and_go_with_their_topic(data_dir: Path) -> None:
    logs = LogManager([data_dir], LogConfig(), 0, "c1")
    logs.load_all(T0)
    fill(logs.create("orders", 0, None, config(), T0), 40)
    assert logs.clean_once(T0)
    end = logs.cleaner.checkpoints(data_dir)[TopicPartition("orders", 0)]
    logs.close()

    logs = LogManager([data_dir], LogConfig(), 0, "c1")
    try:
        logs.load_all(T0, {"orders": config()})
        assert logs.cleaner.checkpoints(data_dir) == {TopicPartition("orders", 0): end}
        assert not logs.clean_once(T0)  # nothing dirty since
        logs.delete_topic_partition("orders", 0)
        assert OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT).read() == {}
    finally:
        logs.close()
