from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from barnabas.log import LogConfig, PartitionLog

from .batches import T0, decode, make_batch, offsets
from .conftest import OpenLog, crash

BATCH = len(make_batch(2))


def fill(log: PartitionLog, batches: int, epoch: int = 0) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(2), epoch, T0)


@pytest.fixture
def config() -> LogConfig:
    # three 2-record batches per segment, an index entry for nearly every batch
    return LogConfig(segment_bytes=3 * BATCH, index_interval_bytes=0)


def segment_file(log_dir: Path, base: int, suffix: str = ".log") -> Path:
    return log_dir / f"{base:020d}{suffix}"


def flip_byte(path: Path, position: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        value = f.read(1)[0]
        f.seek(position)
        f.write(bytes([value ^ 0x5A]))


def test_truncation_in_the_middle_of_a_batch(open_log: OpenLog, log_dir: Path, config: LogConfig) -> None:
    log = open_log(config)
    fill(log, 8)  # segments 0, 6, 12; the active one holds offsets 12-15
    crash(log)
    active = segment_file(log_dir, 12)
    os.truncate(active, BATCH + BATCH // 2)
    reopened = open_log(config)
    assert reopened.log_end_offset == 14
    assert reopened.load_report.truncated_bytes == BATCH // 2
    assert reopened.load_report.recovered_segments == [12]
    assert active.stat().st_size == BATCH
    assert offsets(reopened.read(12, 1 << 20).records) == [12, 13]
    assert reopened.append_as_leader(make_batch(2), 0, T0).base_offset == 14
    assert offsets(reopened.read(12, 1 << 20).records) == [12, 13, 14, 15]


def test_a_flipped_byte_in_the_tail_batch_fails_its_crc(open_log: OpenLog, log_dir: Path, config: LogConfig) -> None:
    log = open_log(config)
    fill(log, 8)
    crash(log)
    flip_byte(segment_file(log_dir, 12), 2 * BATCH - 5)  # inside the second batch's records
    reopened = open_log(config)
    assert reopened.log_end_offset == 14
    assert all(b.crc_ok for b in decode(reopened.read(0, 1 << 20).records))


def test_a_zero_filled_tail_is_cut(open_log: OpenLog, log_dir: Path, config: LogConfig) -> None:
    log = open_log(config)
    fill(log, 2)
    crash(log)
    with segment_file(log_dir, 0).open("ab") as f:
        f.write(b"\x00" * 1000)
    reopened = open_log(config)
    assert reopened.log_end_offset == 4
    assert reopened.load_report.truncated_bytes == 1000


def test_corruption_above_the_recovery_point_drops_later_segments(
    open_log: OpenLog, log_dir: Path, config: LogConfig
) -> None:
    log = open_log(config)
    fill(log, 8)
    crash(log)
    flip_byte(segment_file(log_dir, 6), BATCH + 30)  # the second batch of the middle segment
    reopened = open_log(config, recovery_point=6)
    assert reopened.load_report.recovered_segments == [6]
    assert reopened.load_report.deleted_segments == [12]
    assert reopened.log_end_offset == 8
    assert not segment_file(log_dir, 12).exists()
    assert [s.base_offset for s in reopened.segments] == [0, 6]


def test_only_segments_from_the_recovery_point_are_recovered(
    open_log: OpenLog, log_dir: Path, config: LogConfig
) -> None:
    log = open_log(config)
    fill(log, 8)
    log.close()
    assert open_log(config).load_report.recovered_segments == [12]
    assert open_log(config, recovery_point=7).load_report.recovered_segments == [6, 12]
    assert open_log(config, recovery_point=0).load_report.recovered_segments == [0, 6, 12]


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_deleted_index_is_rebuilt(open_log: OpenLog, log_dir: Path, config: LogConfig, suffix: str) -> None:
    log = open_log(config)
    fill(log, 8)
    log.close()
    index = segment_file(log_dir, 6, suffix)
    original = index.read_bytes()
    assert original
    index.unlink()
    reopened = open_log(config)
    assert reopened.load_report.rebuilt_indexes == [6]
    assert index.read_bytes() == original
    assert offsets(reopened.read(9, 1 << 20).records) == [8, 9, 10, 11]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x01\x02\x03",  # not a whole entry
        struct.pack(">iiii", 5, 100, 3, 200),  # offsets go backwards
        struct.pack(">ii", 1, 1 << 30),  # position past the segment
    ],
)
def test_a_corrupt_offset_index_is_rebuilt(open_log: OpenLog, log_dir: Path, config: LogConfig, garbage: bytes) -> None:
    log = open_log(config)
    fill(log, 8)
    log.close()
    index = segment_file(log_dir, 0, ".index")
    original = index.read_bytes()
    index.write_bytes(garbage)
    reopened = open_log(config)
    assert reopened.load_report.rebuilt_indexes == [0]
    assert index.read_bytes() == original
    assert offsets(reopened.read(3, 1 << 20).records) == [2, 3, 4, 5]


def test_stray_files_are_removed(open_log: OpenLog, log_dir: Path, config: LogConfig) -> None:
    log = open_log(config)
    fill(log, 2)
    log.close()
    strays = [
        "00000000000000000099.log.deleted",
        "00000000000000000099.index.swap",
        "00000000000000000099.log.cleaned",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000500.index",  # its .log is gone
        "00000000000000000500.timeindex",
    ]
    for name in strays:
        (log_dir / name).write_bytes(b"x")
    reopened = open_log(config)
    assert sorted(p.name for p in reopened.load_report.removed_files) == sorted(strays)
    assert not any((log_dir / name).exists() for name in strays)
    assert reopened.log_end_offset == 4


def test_log_start_checkpoint_beyond_the_log_end_drops_everything(
    open_log: OpenLog, log_dir: Path, config: LogConfig
) -> None:
    log = open_log(config)
    fill(log, 4)
    crash(log)
    reopened = open_log(config, log_start_offset=100)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 100)
    assert [s.base_offset for s in reopened.segments] == [100]
    assert reopened.append_as_leader(make_batch(1), 0, T0).base_offset == 100


def test_the_epoch_cache_is_cut_with_the_log(open_log: OpenLog, log_dir: Path, config: LogConfig) -> None:
    log = open_log(config)
    fill(log, 7, epoch=1)
    fill(log, 1, epoch=2)  # the last batch, offsets 14-15, is the only one of epoch 2
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 14)]
    crash(log)
    os.truncate(segment_file(log_dir, 12), BATCH + 10)
    reopened = open_log(config)
    assert reopened.log_end_offset == 14
    assert reopened.leader_epoch_cache.entries == [(1, 0)]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_a_lost_epoch_checkpoint_is_rebuilt_from_batch_headers(
    open_log: OpenLog, log_dir: Path, config: LogConfig, damage: str
) -> None:
    log = open_log(config)
    fill(log, 3, epoch=1)
    fill(log, 4, epoch=4)
    log.close()
    checkpoint = log_dir / "leader-epoch-checkpoint"
    if damage == "delete":
        checkpoint.unlink()
    else:
        checkpoint.write_text("0\n5\ngarbage\n")
    reopened = open_log(config)
    assert reopened.leader_epoch_cache.entries == [(1, 0), (4, 6)]
    assert checkpoint.read_text() == "0\n2\n1 0\n4 6\n"


def test_an_empty_dir_becomes_an_empty_log(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (0, 0, 1)
    assert sorted(p.name for p in log_dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]


def test_a_clean_shutdown_skips_recovery_and_keeps_the_active_segments_stats(open_log: OpenLog) -> None:
    """Kafka's LogLoader trusts a clean shutdown: nothing is recovered, and what recovery would
    have rebuilt (the log end, the max timestamp, the indexes) is read back as it was closed."""
    config = LogConfig(segment_bytes=3 * BATCH, index_interval_bytes=1 << 20)  # no index entry until close
    log = open_log(config)
    for i in range(8):
        log.append_as_leader(make_batch(2, timestamp=T0 + 10 * i), 0, T0)
    before = (log.log_end_offset, log.active_segment.max_timestamp, log.active_segment.offset_of_max_timestamp)
    log.close()
    reopened = open_log(config, recovery_point=16, clean_shutdown=True)
    assert reopened.load_report.recovered_segments == []
    active = reopened.active_segment
    assert (reopened.log_end_offset, active.max_timestamp, active.offset_of_max_timestamp) == before
    assert reopened.append_as_leader(make_batch(2), 0, T0).base_offset == 16
    assert offsets(reopened.read(12, 1 << 20).records) == [12, 13, 14, 15, 16, 17]


@pytest.fixture
def sparse_config() -> LogConfig:
    """One segment; an index entry about every fourth batch, so a tail follows the last entry."""
    return LogConfig(segment_bytes=1 << 20, index_interval_bytes=3 * BATCH)


def closed_cleanly_with(open_log: OpenLog, config: LogConfig, batches: int) -> PartitionLog:
    log = open_log(config)
    for i in range(batches):
        log.append_as_leader(make_batch(2, timestamp=T0 + 10 * i), 0, T0)
    assert 0 < log.active_segment.offset_index.entries < batches
    log.close()
    return log


def test_a_clean_shutdown_still_cuts_a_flipped_bit_in_the_last_batch(
    open_log: OpenLog, log_dir: Path, sparse_config: LogConfig
) -> None:
    closed_cleanly_with(open_log, sparse_config, 10)  # offsets 0-19
    flip_byte(segment_file(log_dir, 0), 10 * BATCH - 5)
    reopened = open_log(sparse_config, recovery_point=20, clean_shutdown=True)
    report = reopened.load_report
    assert (reopened.log_end_offset, report.truncated_bytes, report.recovered_segments) == (18, BATCH, [])
    assert segment_file(log_dir, 0).stat().st_size == 9 * BATCH
    active = reopened.active_segment
    assert (active.max_timestamp, active.offset_of_max_timestamp) == (T0 + 80, 17), "the cut batch's time is gone"
    assert reopened.active_segment.offset_index.last_offset < 18
    assert offsets(reopened.read(14, 1 << 20).records) == [14, 15, 16, 17]
    assert reopened.append_as_leader(make_batch(2), 0, T0).base_offset == 18


def test_a_clean_shutdown_still_cuts_garbage_after_the_last_batch(
    open_log: OpenLog, log_dir: Path, sparse_config: LogConfig
) -> None:
    closed_cleanly_with(open_log, sparse_config, 10)
    with segment_file(log_dir, 0).open("ab") as f:
        f.write(b"\x00" * 100)
    reopened = open_log(sparse_config, recovery_point=20, clean_shutdown=True)
    assert (reopened.log_end_offset, reopened.load_report.truncated_bytes) == (20, 100)
    assert reopened.active_segment.max_timestamp == T0 + 90
    assert offsets(reopened.read(16, 1 << 20).records) == [16, 17, 18, 19]


def test_a_clean_shutdown_with_a_bad_batch_at_the_last_index_entry_recovers_the_segment(
    open_log: OpenLog, log_dir: Path, sparse_config: LogConfig
) -> None:
    log = closed_cleanly_with(open_log, sparse_config, 10)
    last_entry = log.active_segment.offset_index.entry(-1)
    flip_byte(segment_file(log_dir, 0), last_entry.position + BATCH - 5)
    reopened = open_log(sparse_config, recovery_point=20, clean_shutdown=True)
    cut = last_entry.offset - 1  # the entry holds its batch's last offset; the batch starts one lower
    assert reopened.log_end_offset == cut
    assert reopened.load_report.truncated_bytes == 10 * BATCH - last_entry.position
    active = reopened.active_segment
    assert active.offset_index.entries > 0 and active.offset_index.last_offset < cut, "the index is rebuilt"
    assert (active.max_timestamp, active.offset_of_max_timestamp) == (T0 + 10 * (cut // 2 - 1), cut - 1)
    assert offsets(reopened.read(0, 1 << 20).records) == list(range(cut))
    assert reopened.append_as_leader(make_batch(2), 0, T0).base_offset == cut


def test_a_clean_reload_that_changes_nothing_syncs_nothing(
    open_log: OpenLog, log_dir: Path, config: LogConfig, fsyncs: list[tuple[str, Path]]
) -> None:
    """A clean restart of 10,000 partitions fsynced 10,000 dirs it had not changed."""
    log = open_log(config)
    fill(log, 2)
    log.close()
    fsyncs.clear()
    reopened = open_log(config, recovery_point=log.log_end_offset, clean_shutdown=True)
    assert reopened.log_end_offset == 4
    assert fsyncs == []


def test_a_reload_that_removes_files_syncs_the_dir(
    open_log: OpenLog, log_dir: Path, config: LogConfig, fsyncs: list[tuple[str, Path]]
) -> None:
    log = open_log(config)
    fill(log, 2)
    log.close()
    (log_dir / "00000000000000000099.log.deleted").write_bytes(b"x")
    fsyncs.clear()
    open_log(config, recovery_point=log.log_end_offset, clean_shutdown=True)
    assert log_dir in [path for _, path in fsyncs]


def test_an_empty_log_reloaded_cuts_its_epoch_entry_without_waiting_for_the_disk(
    open_log: OpenLog, log_dir: Path, config: LogConfig, fsyncs: list[tuple[str, Path]]
) -> None:
    """Its entry at offset 0 starts at the log end: the load cuts it (as Kafka's, asynchronously flushed)."""
    log = open_log(config)
    log.leader_epoch_cache.assign(3, 0)
    log.close()
    fsyncs.clear()
    reopened = open_log(config, recovery_point=0, clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == []
    assert fsyncs == []
    reopened.flush()
    assert fsyncs == [], "lost in a crash, the cut is made again by the next load: a flush need not wait for it"
    reopened.leader_epoch_cache.assign(4, 0, sync=False)
    reopened.append_as_leader(make_batch(2), 4, T0)
    reopened.flush()  # before the recovery point passes a record of epoch 4, its entry is made durable
    assert [p for _, p in fsyncs if p.name.startswith("leader-epoch-checkpoint")]
