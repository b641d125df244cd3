"""Syncs off the owner's thread: rolled segments and checkpoints wait on the scheduler, never the reverse."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.log import LogConfig, LogManager, LogScheduler
from barnabas.log.checkpoint import OffsetCheckpointFile
from barnabas.log.scheduler import run_soon

from .batches import T0, make_batch, offsets
from .conftest import OpenLog


@pytest.fixture
def scheduler() -> Iterator[LogScheduler]:
    scheduler = LogScheduler()
    yield scheduler
    scheduler.close()


class Gate:
    """Holds the scheduler's thread in a job until opened: what is queued behind it waits."""

    def __init__(self, scheduler: LogScheduler, hold_s: float = 30.0) -> None:
        self._entered = threading.Event()
        self._open = threading.Event()
        self._hold_s = hold_s
        scheduler.submit(self._hold)
        assert self._entered.wait(10), "the scheduler never ran the gate"

    def _hold(self) -> None:
        self._entered.set()
        self._open.wait(self._hold_s)

    def open(self) -> None:
        self._open.set()


def test_a_roll_returns_before_its_sync_and_the_recovery_point_follows_it(
    open_log: OpenLog, scheduler: LogScheduler
) -> None:
    log = open_log()
    log.attach_scheduler(scheduler)
    log.append_as_leader(make_batch(3), 0, T0)
    gate = Gate(scheduler)
    log.roll(T0)  # returns while the scheduler is held: the sync is queued, not done
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), 0, T0)  # the new segment takes appends meanwhile
    gate.open()
    scheduler.wait()
    assert log.recovery_point == 3
    assert offsets(log.read(0, 1 << 20).records) == [0, 1, 2]


def test_a_truncation_voids_the_syncs_started_before_it(open_log: OpenLog, scheduler: LogScheduler) -> None:
    log = open_log()
    log.attach_scheduler(scheduler)
    log.append_as_leader(make_batch(3), 0, T0)
    log.roll(T0)
    scheduler.wait()
    assert log.recovery_point == 3
    log.append_as_leader(make_batch(4), 0, T0)
    gate = Gate(scheduler)
    log.roll(T0)  # a sync up to offset 7, queued
    log.truncate_to(3, T0)  # what it would vouch for is gone
    log.append_as_leader(make_batch(5), 0, T0)  # offsets 3..7 again, other data, never synced
    gate.open()
    scheduler.wait()
    assert log.recovery_point == 3


def test_close_syncs_what_the_scheduler_has_not_yet(open_log: OpenLog, scheduler: LogScheduler) -> None:
    log = open_log()
    log.attach_scheduler(scheduler)
    log.append_as_leader(make_batch(3), 0, T0)
    gate = Gate(scheduler)
    log.roll(T0)
    log.append_as_leader(make_batch(2), 0, T0)
    log.close()  # a clean shutdown is durable whatever the scheduler still holds
    assert log.recovery_point == 5
    gate.open()
    scheduler.wait()
    assert log.recovery_point == 5


def test_no_queued_checkpoint_lands_after_the_final_one(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "data"], LogConfig(), 1, "c1", high_watermark_checkpoint_interval_ms=100)
    manager.load_all(T0)
    log = manager.create("t", 0, None, LogConfig(), T0)
    log.append_as_leader(make_batch(5), 0, T0)
    log.hw_follows_log_end = False
    log.high_watermark = 2
    assert manager._scheduler is not None
    # The gate lets go by itself: a close that wrote its checkpoints before draining the scheduler
    # would see this older write land after them.
    Gate(manager._scheduler, hold_s=0.2)
    manager.maintain(T0 + 100)  # queues a replication-offset-checkpoint saying 2
    log.high_watermark = 4
    manager.close()
    path = tmp_path / "data" / "replication-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {("t", 0): 4}


def test_run_soon_queues_on_a_scheduler_and_runs_here_without_one() -> None:
    ran_on: list[str] = []

    def job() -> None:
        ran_on.append(threading.current_thread().name)

    assert run_soon(None, job) is None
    scheduler = LogScheduler(name="scheduler-under-test")
    gate = Gate(scheduler)
    queued = run_soon(scheduler, job)
    assert queued is not None and not queued.done(), "it waits behind the gate on the scheduler's thread"
    gate.open()
    queued.result(10)
    scheduler.close()
    assert run_soon(scheduler, job) is None, "a closed scheduler's jobs run here"
    here = threading.current_thread().name
    assert ran_on[0] == here and ran_on[1].startswith("scheduler-under-test") and ran_on[2] == here
