"""Leader appends written on the AppendWriter thread: ordering, visibility, failures, rolls and recovery.

Most tests attach the writer with ``inline_max_bytes=0`` so that every batch, however small, goes
through it; the inline path for a quiet log's small batches has tests of its own.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import wait
from pathlib import Path

import pytest

from barnabas.log import AppendWriter, LogConfig, LogError, LogManager, PartitionLog, PendingAppend
from barnabas.log.append_writer import WriteState
from barnabas.log.log import INLINE_APPEND_MAX_BYTES

from .batches import T0, idempotent_batch, make_batch, offsets
from .conftest import OpenLog, crash


@pytest.fixture
def writer() -> Iterator[AppendWriter]:
    writer = AppendWriter()
    yield writer
    writer.close()


def landed(*appends: PendingAppend) -> None:
    wait([a.landed for a in appends if a.landed is not None])


def test_appends_become_visible_only_when_completed(open_log: OpenLog, writer: AppendWriter) -> None:
    log = open_log()
    log.attach_writer(writer, inline_max_bytes=0)
    appends = [log.begin_append_as_leader(make_batch(n), 0, T0) for n in (3, 2, 4)]
    assert [a.result.base_offset for a in appends] == [0, 3, 5]
    assert log.appends_in_flight == 3
    landed(*appends)
    # Written, but not completed: nobody (consumer, follower, acks) may see them yet.
    assert log.log_end_offset == log.high_watermark == 0
    assert log.read(0, 1 << 20).records == b""
    assert not any(a.done for a in appends)
    log.complete_appends(T0)
    assert all(a.done and a.error is None for a in appends)
    assert log.log_end_offset == log.high_watermark == 9
    assert offsets(log.read(0, 1 << 20).records) == list(range(9))
    assert log.appends_in_flight == 0


def test_synchronous_append_waits_for_earlier_writes(open_log: OpenLog, writer: AppendWriter) -> None:
    log = open_log()
    log.attach_writer(writer, inline_max_bytes=0)
    first = log.begin_append_as_leader(make_batch(2), 0, T0)
    result = log.append_as_leader(make_batch(3), 0, T0)
    assert first.done and first.error is None
    assert result.base_offset == 2
    assert log.log_end_offset == 5
    assert offsets(log.read(0, 1 << 20).records) == list(range(5))


def test_roll_waits_for_the_writes_in_flight(open_log: OpenLog, writer: AppendWriter) -> None:
    batch_size = len(make_batch(2))
    log = open_log(LogConfig(segment_bytes=3 * batch_size))
    log.attach_writer(writer, inline_max_bytes=0)
    appends = [log.begin_append_as_leader(make_batch(2), 0, T0) for _ in range(7)]
    landed(*appends)
    log.complete_appends(T0)
    assert [a.result.base_offset for a in appends] == list(range(0, 14, 2))
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert all(s.size == s.path.stat().st_size for s in log.segments)
    got: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20)
        got += offsets(read.records)
        offset = read.next_offset
    assert got == list(range(14))


def test_idempotent_batches_see_the_appends_before_them(open_log: OpenLog, writer: AppendWriter) -> None:
    log = open_log()
    log.attach_writer(writer, inline_max_bytes=0)
    log.begin_append_as_leader(idempotent_batch(7, 0, 0, 2), 0, T0)
    second = log.begin_append_as_leader(idempotent_batch(7, 0, 2, 2), 0, T0)
    retry = log.begin_append_as_leader(idempotent_batch(7, 0, 2, 2), 0, T0)
    landed(second)
    log.complete_appends(T0)
    assert retry.done and retry.result.duplicate
    assert retry.result.base_offset == second.result.base_offset == 2
    assert log.log_end_offset == 4


def test_written_but_uncompleted_appends_survive_a_crash(open_log: OpenLog, writer: AppendWriter) -> None:
    log = open_log()
    log.attach_writer(writer, inline_max_bytes=0)
    log.append_as_leader(make_batch(3), 0, T0)
    appends = [log.begin_append_as_leader(make_batch(2), 0, T0) for _ in range(3)]
    landed(*appends)
    crash(log)  # before completion: the bytes are in the file, the acks were never sent
    reopened = open_log()
    assert reopened.log_end_offset == 9
    assert offsets(reopened.read(0, 1 << 20).records) == list(range(9))


def test_log_manager_writes_on_its_thread_and_stops_it(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "data"], LogConfig(), 0, "cluster")
    log = manager.create("orders", 0, None, LogConfig(), T0)
    pending = log.begin_append_as_leader(make_batch(4, value_size=INLINE_APPEND_MAX_BYTES // 2), 0, T0)
    assert pending.landed is not None  # the manager attached its writer (and the batch is not small)
    landed(pending)
    log.complete_appends(T0)
    manager.close()
    reopened = LogManager([tmp_path / "data"], LogConfig(), 0, "cluster")
    reopened.load_all(T0)
    log = reopened.get("orders", 0)
    assert log is not None and log.log_end_offset == 4
    reopened.close()


def test_a_failed_write_fails_the_appends_after_it_and_cuts_the_segment_back(tmp_path: Path) -> None:
    # A real short write: RLIMIT_FSIZE stops the file mid-batch (EFBIG), in a child process so
    # the limit does not touch the test runner.
    script = f"""
import errno, resource, signal
from concurrent.futures import wait
from pathlib import Path
from barnabas.log import AppendWriter, LogConfig, PartitionLog
from tests.unit.log.batches import T0, make_batch, offsets

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
writer = AppendWriter()
log = PartitionLog.open(Path({str(tmp_path / "t-0")!r}), LogConfig(), 0)
log.attach_writer(writer, inline_max_bytes=0)
log.append_as_leader(make_batch(5, value_size=200), 0, T0)
size = log.active_segment.size
batch = make_batch(5, value_size=200)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + len(batch) + len(batch) // 2, resource.RLIM_INFINITY))
appends = [log.begin_append_as_leader(make_batch(5, value_size=200), 0, T0) for _ in range(3)]
wait([a.landed for a in appends])
log.complete_appends(T0)
assert appends[0].error is None, appends[0].error
assert isinstance(appends[1].error, OSError) and appends[1].error.errno == errno.EFBIG, appends[1].error
assert isinstance(appends[2].error, OSError), appends[2].error  # its offsets followed the failed batch
assert log.log_end_offset == 10
assert log.active_segment.size == size + len(batch) == log.active_segment.path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
later = log.begin_append_as_leader(make_batch(5, value_size=200), 0, T0)
assert later.result.base_offset == 10
wait([later.landed])
log.complete_appends(T0)
assert offsets(log.read(0, 1 << 20).records) == list(range(15))
log.close()
writer.close()
reopened = PartitionLog.open(Path({str(tmp_path / "t-0")!r}), LogConfig(), 0)
assert offsets(reopened.read(0, 1 << 20).records) == list(range(15))
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[3],
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_without_a_writer_appends_are_done_at_once(open_log: OpenLog) -> None:
    log: PartitionLog = open_log()
    pending = log.begin_append_as_leader(make_batch(2), 0, T0)
    assert pending.done and pending.landed is None
    assert log.log_end_offset == 2


class _BlockingSegment:
    """Stands in for a segment whose write holds the writer thread until released."""

    path = Path("blocking.log")

    def __init__(self) -> None:
        self.writing = threading.Event()
        self.release = threading.Event()

    def write_reserved(self, batch: object, position: int) -> None:
        self.writing.set()
        assert self.release.wait(30), "never released"


class _BrokenSegment:
    """A segment whose write fails in a way the writer does not expect."""

    path = Path("broken.log")

    def write_reserved(self, batch: object, position: int) -> None:
        raise SystemExit("not an OSError")


def test_an_append_cancelled_before_its_write_is_cut_back_and_the_writer_goes_on(
    open_log: OpenLog, writer: AppendWriter
) -> None:
    log = open_log()
    log.attach_writer(writer, inline_max_bytes=0)
    blocking = _BlockingSegment()
    held = writer.submit(blocking, b"", 0, WriteState())  # type: ignore[arg-type]
    assert blocking.writing.wait(30)
    cancelled = log.begin_append_as_leader(make_batch(2), 0, T0)
    after = log.begin_append_as_leader(make_batch(3), 0, T0)
    assert cancelled.landed is not None and cancelled.landed.cancel()  # e.g. its produce task was cancelled
    blocking.release.set()
    held.result(30)
    log.wait_for_appends()
    assert isinstance(cancelled.error, LogError)
    assert after.error is not None, "its offsets followed the batch that was not written"
    assert log.log_end_offset == 0
    # The writer thread lives on and the log takes appends again from where it was cut back.
    assert log.append_as_leader(make_batch(4), 0, T0).base_offset == 0
    assert offsets(log.read(0, 1 << 20).records) == list(range(4))


def test_an_unexpected_error_fails_that_write_and_the_writer_goes_on(writer: AppendWriter, tmp_path: Path) -> None:
    state = WriteState()
    broken = writer.submit(_BrokenSegment(), b"", 0, state)  # type: ignore[arg-type]
    with pytest.raises(SystemExit):
        broken.result(30)
    assert isinstance(state.failure, SystemExit), "the writes of that log after it must fail too"
    fine = _BlockingSegment()
    fine.release.set()
    assert writer.submit(fine, b"", 0, WriteState()).result(30) is None  # type: ignore[arg-type]


def test_a_small_batch_for_a_quiet_log_is_written_on_the_callers_thread(
    open_log: OpenLog, writer: AppendWriter
) -> None:
    log = open_log()
    log.attach_writer(writer)
    pending = log.begin_append_as_leader(make_batch(2), 0, T0)
    assert pending.done and pending.landed is None, "no hop to the writer thread and back"
    assert (log.log_end_offset, log.high_watermark) == (2, 2)
    assert offsets(log.read(0, 1 << 20).records) == [0, 1]


def test_a_large_batch_and_any_batch_behind_a_write_in_flight_go_to_the_writer(
    open_log: OpenLog, writer: AppendWriter
) -> None:
    log = open_log()
    log.attach_writer(writer)
    large = log.begin_append_as_leader(make_batch(3, value_size=INLINE_APPEND_MAX_BYTES // 2), 0, T0)
    small = log.begin_append_as_leader(make_batch(2), 0, T0)
    assert large.landed is not None and small.landed is not None, "the small one must not overtake the large one"
    assert log.log_end_offset == 0
    landed(large, small)
    log.complete_appends(T0)
    assert (large.result.base_offset, small.result.base_offset, log.log_end_offset) == (0, 3, 5)
    assert offsets(log.read(0, 1 << 22).records) == list(range(5))
    after = log.begin_append_as_leader(make_batch(1), 0, T0)
    assert after.done and after.landed is None, "quiet again: inline"
    assert log.log_end_offset == 6
