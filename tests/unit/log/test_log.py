from __future__ import annotations

import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from barnabas.log import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidRecordError,
    InvalidTxnStateError,
    LogConfig,
    LogError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from barnabas.protocol import parse_batch_header

from .batches import T0, decode, idempotent_batch, make_batch, offsets, set_attribute_bits
from .conftest import OpenLog


def append_batches(log: PartitionLog, sizes: list[int], epoch: int = 0, **kwargs: object) -> None:
    for count in sizes:
        log.append_as_leader(make_batch(count, **kwargs), epoch, T0)  # type: ignore[arg-type]


# --- appending ---------------------------------------------------------------------------------


def test_append_assigns_consecutive_offsets(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(make_batch(3, timestamp=T0 + 5), 0, T0)
    second = log.append_as_leader(make_batch(2), 0, T0)
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert first.log_append_time_ms == -1
    assert first.max_timestamp == T0 + 5
    assert first.log_start_offset == 0
    assert (log.log_end_offset, log.high_watermark) == (5, 5)


def test_appended_batch_carries_its_offset_and_leader_epoch(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(2), 0, T0)
    log.append_as_leader(make_batch(2), 7, T0)
    batches = decode(log.read(0, 1 << 20).records)
    assert [(b.base_offset, b.leader_epoch, b.crc_ok) for b in batches] == [(0, 0, True), (2, 7, True)]
    assert [r.offset for r in batches[1].records] == [2, 3]


def test_log_append_time_is_stamped_and_the_crc_stays_valid(open_log: OpenLog) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    now = T0 + 123_456
    result = log.append_as_leader(make_batch(3, timestamp=T0), 0, now)
    assert result.log_append_time_ms == now
    assert result.max_timestamp == now
    (batch,) = decode(log.read(0, 1 << 20).records)
    assert batch.crc_ok  # kafka-python recomputes the CRC-32C independently
    assert batch.timestamp_type == 1  # LogAppendTime
    assert batch.max_timestamp == now
    assert [r.timestamp for r in batch.records] == [now] * 3  # consumers see the broker's time


def test_two_batches_in_one_produce_are_rejected(open_log: OpenLog) -> None:
    log = open_log()
    with pytest.raises(InvalidRecordError, match="exactly one record batch"):
        log.append_as_leader(make_batch(1) + make_batch(1), 0, T0)
    assert log.log_end_offset == 0


@pytest.mark.parametrize(
    ("records", "error", "fragment"),
    [
        # Kafka's ProduceRequest.validateRecords: no complete batch is INVALID_RECORD.
        (bytearray(), InvalidRecordError, "at least one record batch"),
        (make_batch(2)[:-5], InvalidRecordError, "at least one record batch"),
        (make_batch(2)[:30], InvalidRecordError, "at least one record batch"),
        (
            make_batch(2)[:8] + (13).to_bytes(4, "big") + make_batch(2)[12:],
            CorruptRecordError,
            "minimum record overhead",
        ),
        (set_attribute_bits(make_batch(1), 0x20), InvalidRecordError, "control"),
        (set_attribute_bits(idempotent_batch(1, 0, 0), 0x10), InvalidTxnStateError, "transactional"),
    ],
)
def test_invalid_produce_records_are_rejected(
    open_log: OpenLog, records: bytearray, error: type[Exception], fragment: str
) -> None:
    log = open_log()
    with pytest.raises(error, match=fragment):
        log.append_as_leader(records, 0, T0)
    assert log.size_bytes == 0


def test_a_bad_crc_is_corrupt_message(open_log: OpenLog) -> None:
    batch = make_batch(2)
    batch[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        open_log().append_as_leader(batch, 0, T0)
    assert info.value.error_code == 2  # CORRUPT_MESSAGE


def test_base_offset_must_be_zero_from_a_client(open_log: OpenLog) -> None:
    batch = make_batch(1)
    struct.pack_into(">q", batch, 0, 5)  # not under the CRC
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        open_log().append_as_leader(batch, 0, T0)


def test_a_batch_above_max_message_bytes_is_message_too_large(open_log: OpenLog) -> None:
    batch = make_batch(4, value_size=100)
    log = open_log(LogConfig(max_message_bytes=len(batch) - 1))
    with pytest.raises(RecordTooLargeError) as info:
        log.append_as_leader(batch, 0, T0)
    assert info.value.error_code == 10  # MESSAGE_TOO_LARGE
    log.update_config(LogConfig(max_message_bytes=len(batch)))
    assert log.append_as_leader(batch, 0, T0).base_offset == 0


def test_a_batch_above_segment_bytes_is_record_list_too_large(open_log: OpenLog) -> None:
    batch = make_batch(4, value_size=100)
    with pytest.raises(RecordBatchTooLargeError):
        open_log(LogConfig(segment_bytes=len(batch) - 1)).append_as_leader(batch, 0, T0)


def test_an_older_leader_epoch_is_a_caller_bug(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(1), 5, T0)
    with pytest.raises(ValueError, match="older"):
        log.append_as_leader(make_batch(1), 4, T0)


# --- rolling -----------------------------------------------------------------------------------


def test_roll_by_size(open_log: OpenLog) -> None:
    size = len(make_batch(1))
    log = open_log(LogConfig(segment_bytes=3 * size))
    append_batches(log, [1] * 7)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert all(s.size <= 3 * size for s in log.segments)


def test_roll_by_time_follows_the_batch_timestamps(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    for ts in [T0, T0 + 500, T0 + 1000, T0 + 1001, T0 + 1500, T0 + 2002]:
        log.append_as_leader(make_batch(1, timestamp=ts), 0, T0)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_roll_by_full_offset_index(open_log: OpenLog) -> None:
    # index.interval.bytes=0: an entry for every batch after the first; 24 bytes: 3 offset entries.
    # Equal timestamps add a single time index entry, so only the offset index fills up.
    log = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    append_batches(log, [1] * 7, timestamp=T0)
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_roll_by_full_time_index(open_log: OpenLog) -> None:
    # 24 bytes hold 2 time index entries; growing timestamps add one per indexed batch.
    log = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    for i in range(7):
        log.append_as_leader(make_batch(1, timestamp=T0 + i), 0, T0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]


def test_roll_syncs_the_old_segment_and_moves_the_recovery_point(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    append_batches(log, [2, 2])
    assert log.recovery_point == 0
    log.roll(T0)
    assert log.recovery_point == 4
    assert (log_dir / "00000000000000000004.snapshot").exists()
    assert log.roll(T0) is log.active_segment  # an empty active segment does not roll
    assert log.segment_count == 2


# --- reading -----------------------------------------------------------------------------------


@pytest.fixture
def filled(open_log: OpenLog) -> PartitionLog:
    """Batches of 3 records at offsets 0, 3, 6, 9, 12."""
    log = open_log()
    append_batches(log, [3] * 5)
    return log


def test_read_from_an_offset_inside_a_batch_returns_the_whole_batch(filled: PartitionLog) -> None:
    result = filled.read(4, 1 << 20)
    assert decode(result.records)[0].base_offset == 3
    assert offsets(result.records) == list(range(3, 15))
    assert result.next_offset == 15
    assert (result.high_watermark, result.log_start_offset, result.log_end_offset) == (15, 0, 15)


def test_read_returns_only_whole_batches_within_max_bytes(filled: PartitionLog) -> None:
    size = len(make_batch(3))
    result = filled.read(0, 2 * size + size // 2)
    assert offsets(result.records) == list(range(6))
    assert len(result.records) == 2 * size
    assert result.next_offset == 6


def test_first_batch_is_returned_even_if_larger_than_max_bytes(filled: PartitionLog) -> None:
    result = filled.read(3, 10)
    assert offsets(result.records) == [3, 4, 5]
    empty = filled.read(3, 10, min_one_batch=False)
    assert (empty.records, empty.next_offset) == (b"", 3)


def test_read_stops_below_max_offset(filled: PartitionLog) -> None:
    assert offsets(filled.read(0, 1 << 20, max_offset=9).records) == list(range(9))
    # a batch that straddles max_offset is not returned
    assert offsets(filled.read(0, 1 << 20, max_offset=8).records) == list(range(6))
    assert filled.read(9, 1 << 20, max_offset=9).records == b""
    assert filled.read(12, 1 << 20, max_offset=9).records == b""


def test_read_at_the_log_end_is_empty(filled: PartitionLog) -> None:
    result = filled.read(15, 1 << 20)
    assert (result.records, result.next_offset) == (b"", 15)


def test_read_past_the_log_end_is_out_of_range(filled: PartitionLog) -> None:
    with pytest.raises(OffsetOutOfRangeError) as info:
        filled.read(16, 1 << 20)
    assert info.value.error_code == 1


def test_read_below_the_log_start_is_out_of_range(filled: PartitionLog) -> None:
    filled.delete_records_before(6)
    with pytest.raises(OffsetOutOfRangeError):
        filled.read(5, 1 << 20)
    assert offsets(filled.read(6, 1 << 20).records)[0] == 6


def test_read_never_spans_segments(open_log: OpenLog) -> None:
    size = len(make_batch(2))
    log = open_log(LogConfig(segment_bytes=2 * size))
    append_batches(log, [2] * 5)  # segments at 0, 4, 8
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert offsets(log.read(0, 1 << 20).records) == [0, 1, 2, 3]
    assert offsets(log.read(3, 1 << 20).records) == [2, 3]
    # an offset at a segment's end is served from the next segment
    assert offsets(log.read(4, 1 << 20).records) == [4, 5, 6, 7]
    assert offsets(log.read(9, 1 << 20).records) == [8, 9]


# --- timestamps and epochs ---------------------------------------------------------------------


def test_offset_for_timestamp_at_batch_granularity(open_log: OpenLog) -> None:
    size = len(make_batch(2))
    log = open_log(LogConfig(segment_bytes=2 * size, index_interval_bytes=0))
    for i, ts in enumerate([T0 + 10, T0 + 5, T0 + 30, T0 + 20, T0 + 40]):
        log.append_as_leader(make_batch(2, timestamps=[ts - 1 - i, ts]), 0, T0)
    assert log.offset_for_timestamp(T0) == (0, T0 + 10)
    assert log.offset_for_timestamp(T0 + 11) == (4, T0 + 30)
    assert log.offset_for_timestamp(T0 + 30) == (4, T0 + 30)
    assert log.offset_for_timestamp(T0 + 31) == (8, T0 + 40)
    assert log.offset_for_timestamp(T0 + 41) is None


def test_offset_for_timestamp_never_answers_below_the_log_start(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(4, timestamp=T0), 0, T0)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(T0) == (2, T0)


def test_epochs_are_recorded_on_append(open_log: OpenLog) -> None:
    log = open_log()
    append_batches(log, [2, 2], epoch=0)
    append_batches(log, [3], epoch=2)
    assert log.latest_epoch == 2
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(1) == (0, 4)
    assert log.end_offset_for_epoch(2) == (2, 7)
    assert log.end_offset_for_epoch(3) == (-1, -1)


# --- log start offset --------------------------------------------------------------------------


def test_delete_records_before_moves_the_log_start(filled: PartitionLog) -> None:
    assert filled.delete_records_before(7) == 7
    assert filled.log_start_offset == 7
    assert filled.delete_records_before(5) == 7  # never moves back
    assert filled.delete_records_before(-1) == 15  # -1: up to the high watermark


def test_delete_records_beyond_the_high_watermark_is_out_of_range(filled: PartitionLog) -> None:
    filled.hw_follows_log_end = False
    filled.high_watermark = 9
    with pytest.raises(OffsetOutOfRangeError, match="high watermark is 9"):
        filled.delete_records_before(10)
    assert filled.delete_records_before(9) == 9


def test_high_watermark_is_clamped_to_the_log(filled: PartitionLog) -> None:
    filled.hw_follows_log_end = False
    filled.high_watermark = 100
    assert filled.high_watermark == 15
    filled.delete_records_before(3)
    filled.high_watermark = 0
    assert filled.high_watermark == 3
    filled.append_as_leader(make_batch(1), 0, T0)
    assert filled.high_watermark == 3  # replication drives it now


# --- flushing ----------------------------------------------------------------------------------


def test_flush_messages_moves_the_recovery_point(open_log: OpenLog) -> None:
    log = open_log(LogConfig(flush_messages=5))
    append_batches(log, [2, 2])
    assert log.recovery_point == 0
    append_batches(log, [2])
    assert log.recovery_point == 6


def test_flush_ms_flushes_in_maintain(open_log: OpenLog) -> None:
    log = open_log(LogConfig(flush_ms=1000), now_ms=T0)
    append_batches(log, [2])
    assert not log.maintain(T0 + 999).flushed
    assert log.recovery_point == 0
    assert log.maintain(T0 + 1000).flushed
    assert log.recovery_point == 2
    assert not log.maintain(T0 + 2000).flushed  # nothing new to flush


# --- lifecycle ---------------------------------------------------------------------------------


def test_close_and_reopen_keeps_everything(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=3 * len(make_batch(2))))
    append_batches(log, [2] * 7, epoch=3)
    log.delete_records_before(3)
    before = log.read(3, 1 << 20).records
    log.close()
    reopened = open_log(log_start_offset=log.log_start_offset, recovery_point=log.recovery_point)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 14)
    assert reopened.segment_count == log.segment_count
    assert reopened.read(3, 1 << 20).records == before
    assert reopened.latest_epoch == 3
    assert reopened.load_report.truncated_bytes == 0
    assert reopened.append_as_leader(make_batch(1), 3, T0).base_offset == 14


def test_a_closed_log_refuses_work(open_log: OpenLog) -> None:
    log = open_log()
    log.close()
    with pytest.raises(LogError, match="closed"):
        log.append_as_leader(make_batch(1), 0, T0)
    with pytest.raises(LogError, match="closed"):
        log.read(0, 100)


def test_truncate_to_cuts_the_log_back(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=2 * len(make_batch(2))))
    append_batches(log, [2, 2], epoch=1)
    append_batches(log, [2, 2, 2], epoch=2)  # segments at 0, 4, 8
    assert log.truncate_to(6, T0)
    assert log.log_end_offset == 6
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert offsets(log.read(4, 1 << 20).records) == [4, 5]
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 4)]
    assert log.append_as_leader(make_batch(1), 3, T0).base_offset == 6
    assert not log.truncate_to(100, T0)


def test_delete_removes_the_directory(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    append_batches(log, [1])
    log.delete()
    assert not log_dir.exists()
    assert list(log_dir.parent.iterdir()) == []


def test_append_result_of_a_real_header(open_log: OpenLog) -> None:
    batch = make_batch(5)
    result = open_log().append_as_leader(batch, 0, T0)
    header = parse_batch_header(batch)  # the caller's buffer was patched in place
    assert (header.base_offset, header.last_offset) == (result.base_offset, result.last_offset)


def test_max_timestamp_batch(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=2 * len(make_batch(2))))
    assert log.max_timestamp_batch() is None
    for ts in [T0 + 10, T0 + 50, T0 + 20, T0 + 50, T0 + 30]:
        log.append_as_leader(make_batch(2, timestamp=ts), 0, T0)
    assert log.max_timestamp_batch() == (2, T0 + 50)  # the first batch reaching the maximum


def test_a_failed_write_leaves_no_partial_batch(tmp_path: Path) -> None:
    # A real short write: RLIMIT_FSIZE stops the file mid-batch (EFBIG), in a child process so
    # the limit does not touch the test runner.
    script = f"""
import errno, resource, signal
from pathlib import Path
from barnabas.log import LogConfig, PartitionLog
from tests.unit.log.batches import T0, make_batch, offsets

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
log = PartitionLog.open(Path({str(tmp_path / "t-0")!r}), LogConfig(), 0)
batch = make_batch(5, value_size=200)
log.append_as_leader(make_batch(5, value_size=200), 0, T0)
size = log.active_segment.size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + len(batch) // 2, resource.RLIM_INFINITY))
try:
    log.append_as_leader(batch, 0, T0)
except OSError as exc:
    assert exc.errno == errno.EFBIG, exc
else:
    raise AssertionError("the write should have failed")
assert log.log_end_offset == 5
assert log.active_segment.size == size == log.active_segment.path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
assert log.append_as_leader(make_batch(5, value_size=200), 0, T0).base_offset == 5
assert offsets(log.read(0, 1 << 20).records) == list(range(10))
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


def test_partition_metadata_pins_the_topic_id(open_log: OpenLog, log_dir: Path) -> None:
    topic_id = uuid.uuid4()
    open_log(topic_id=topic_id).close()
    reopened = open_log()
    assert reopened.topic_id == topic_id  # read back when not given
    reopened.close()
    with pytest.raises(InconsistentTopicIdError):
        open_log(topic_id=uuid.uuid4())
    assert open_log(topic_id=topic_id).topic_id == topic_id


# --- offsets version ---------------------------------------------------------------------------


def test_every_move_of_the_log_offsets_bumps_the_offsets_version(open_log: OpenLog) -> None:
    """A fetch session skips a partition while its log's offsets_version is what it was (broker.fetch_sessions):
    each way the log start, log end or high watermark moves, and closing, must bump it."""
    size = len(make_batch(3))
    log = open_log(LogConfig(segment_bytes=2 * size, retention_bytes=2 * size, file_delete_delay_ms=0))
    seen = [log.offsets_version]

    def moved() -> bool:
        seen.append(log.offsets_version)
        return seen[-1] != seen[-2]

    append_batches(log, [3])
    assert moved() and log.log_end_offset == 3, "a leader append"
    log.hw_follows_log_end = False
    append_batches(log, [3] * 4)
    assert moved()
    log.high_watermark = 9
    assert moved(), "the high watermark set"
    assert log.delete_records_before(3) == 3
    assert moved(), "DeleteRecords"
    log.high_watermark = 15
    moved()
    assert log.maintain(T0 + 1).deleted_segments
    assert moved() and log.log_start_offset > 3, "retention"
    assert log.truncate_to(12, T0)
    assert moved() and log.log_end_offset == 12, "a truncation"
    log.truncate_fully_and_start_at(20, T0)
    assert moved(), "a full truncation"
    log.close()
    assert moved(), "closing"


def test_a_next_move_callback_is_called_once_at_the_next_move(open_log: OpenLog) -> None:
    """A fetch session that left a partition quiet is woken by its log's next move, once (broker.quiet_marks)."""
    log = open_log()
    calls: list[str] = []
    log.on_next_move("a", lambda: calls.append("first"))
    log.on_next_move("a", lambda: calls.append("a"))  # replaces the one under the same key
    log.on_next_move("b", lambda: calls.append("b"))
    log.on_next_move("c", lambda: calls.append("c"))
    log.drop_on_next_move("c")
    assert log.next_move_callbacks == 2
    append_batches(log, [1])
    assert sorted(calls) == ["a", "b"]
    assert log.next_move_callbacks == 0
    append_batches(log, [1])
    assert sorted(calls) == ["a", "b"], "called again at a later move"
    log.on_next_move("a", lambda: calls.append("closed"))
    log.close()
    assert calls[-1] == "closed"
