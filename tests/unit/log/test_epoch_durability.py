"""A leader epoch started at a leadership change, or by a follower's first batch of it, is written at once
and made durable before the recovery point passes it: by a flush, or with the sync of a rolled segment.

Thousands of partitions changing leader (a restart, a creation) would otherwise wait on two fsyncs each on
the event loop. Records above the recovery point are recovered after a crash, and recovery assigns their
epochs again, so only entries below it must be on disk.
"""

from __future__ import annotations

import threading
from pathlib import Path

from barnabas.log import LeaderEpochCache
from barnabas.log.checkpoint import LEADER_EPOCH_CHECKPOINT, EpochEntry
from barnabas.log.scheduler import LogScheduler

from .batches import T0, make_batch
from .conftest import OpenLog, crash


def checkpoint_syncs(fsyncs: list[tuple[str, Path]], log_dir: Path) -> list[str]:
    """The threads that fsynced the checkpoint (or the temporary file it is written as)."""
    return [t for t, path in fsyncs if path.parent == log_dir and path.name.startswith(LEADER_EPOCH_CHECKPOINT)]


def test_a_deferred_epoch_is_written_at_once_without_a_sync(
    open_log: OpenLog, log_dir: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    log = open_log()
    fsyncs.clear()
    assert log.leader_epoch_cache.assign(3, 0, sync=False)
    assert LeaderEpochCache.load(log_dir).entries == [EpochEntry(3, 0)]
    assert checkpoint_syncs(fsyncs, log_dir) == []


def test_a_flush_syncs_a_deferred_epoch_before_moving_the_recovery_point(
    open_log: OpenLog, log_dir: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    log = open_log()
    log.leader_epoch_cache.assign(3, 0, sync=False)
    log.append_as_leader(make_batch(2), 3, T0)
    fsyncs.clear()
    log.flush()
    assert checkpoint_syncs(fsyncs, log_dir) == [threading.current_thread().name]
    fsyncs.clear()
    log.append_as_leader(make_batch(2), 3, T0)
    log.flush()
    assert checkpoint_syncs(fsyncs, log_dir) == [], "synced once is enough"


def test_a_flush_leaves_a_deferred_epoch_with_no_record_below_the_recovery_point_unsynced(
    open_log: OpenLog, log_dir: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    """An empty log led and then closed (10,000 of them at a clean stop): the epoch starts at the end."""
    log = open_log()
    log.append_as_leader(make_batch(2), 0, T0)
    log.flush()
    log.leader_epoch_cache.assign(3, 2, sync=False)
    fsyncs.clear()
    log.close()
    assert checkpoint_syncs(fsyncs, log_dir) == [], "no record of epoch 3 is at or below the recovery point"
    assert LeaderEpochCache.load(log_dir).entries == [EpochEntry(0, 0), EpochEntry(3, 2)]


def test_a_roll_syncs_a_deferred_epoch_with_the_rolled_segment(
    open_log: OpenLog, log_dir: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    scheduler = LogScheduler(name="epoch-test-scheduler")
    try:
        log = open_log()
        log.attach_scheduler(scheduler)
        log.leader_epoch_cache.assign(3, 0, sync=False)
        log.append_as_leader(make_batch(2), 3, T0)
        fsyncs.clear()
        log.roll(T0)
        scheduler.wait()
        assert [t for t in checkpoint_syncs(fsyncs, log_dir) if t.startswith("epoch-test-scheduler")]
    finally:
        scheduler.close()


def test_a_crash_before_the_sync_recovers_the_epoch_from_the_records(open_log: OpenLog, log_dir: Path) -> None:
    """Even with the checkpoint's new content lost, recovery assigns the records' epoch again."""
    log = open_log()
    log.append_as_leader(make_batch(2), 0, T0)
    log.flush()
    log.leader_epoch_cache.assign(4, 2, sync=False)
    log.append_as_leader(make_batch(3), 4, T0)
    crash(log)
    (log_dir / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n0 0\n")  # as if the deferred write never landed
    reopened = open_log()
    assert reopened.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(4, 2)]
    assert reopened.log_end_offset == 5


def test_a_followers_new_epoch_is_deferred_and_synced_by_the_next_flush(
    open_log: OpenLog, log_dir: Path, fsyncs: list[tuple[str, Path]]
) -> None:
    """A follower's first batch of an epoch records the epoch as a leadership change does: written at once,
    synced before the recovery point passes it, not on the request path."""
    leader = open_log(directory=log_dir.with_name("leader-0"))
    leader.append_as_leader(make_batch(2), 5, T0)
    records = leader.read(0, 1 << 20).records
    follower = open_log()
    fsyncs.clear()
    assert follower.append_as_follower(records, T0).appended
    assert LeaderEpochCache.load(log_dir).entries == [EpochEntry(5, 0)]
    assert checkpoint_syncs(fsyncs, log_dir) == []
    follower.flush()
    assert checkpoint_syncs(fsyncs, log_dir) == [threading.current_thread().name]
