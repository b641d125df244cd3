from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.log import InvalidProducerEpochError, LogConfig, OutOfOrderSequenceError, PartitionLog
from barnabas.log.producer_state import BatchMetadata, ProducerStateManager
from barnabas.protocol import parse_batch_header, patch_batch

from .batches import T0, idempotent_batch, make_batch, offsets
from .conftest import OpenLog, crash

PID = 4000


def send(
    log: PartitionLog, epoch: int, sequence: int, count: int = 2, *, pid: int = PID, now: int = T0
) -> tuple[int, int]:
    result = log.append_as_leader(idempotent_batch(pid, epoch, sequence, count, timestamp=now), 0, now)
    return result.base_offset, result.last_offset


def test_in_order_sequences_are_appended(open_log: OpenLog) -> None:
    log = open_log()
    assert [send(log, 0, seq) for seq in (0, 2, 4)] == [(0, 1), (2, 3), (4, 5)]
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and (entry.producer_epoch, entry.last_seq, entry.last_offset) == (0, 5, 5)


def test_a_retry_of_each_of_the_last_five_batches_gets_its_original_offsets(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(3), 0, T0)  # someone else's data first: offsets differ from sequences
    originals = [send(log, 0, seq) for seq in range(0, 14, 2)]  # seven batches
    end = log.log_end_offset
    for i in range(2, 7):  # the last five
        result = log.append_as_leader(idempotent_batch(PID, 0, 2 * i, 2), 0, T0)
        assert result.duplicate
        assert (result.base_offset, result.last_offset) == originals[i]
    assert log.log_end_offset == end  # nothing was appended
    assert offsets(log.read(0, 1 << 20).records) == list(range(end))


def test_the_sixth_oldest_batch_is_not_remembered(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(0, 12, 2):  # six batches: seq 0 is now forgotten
        send(log, 0, seq)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 0, 0)
    assert send(log, 0, 2) == (2, 3)  # still remembered: a duplicate


def test_a_sequence_gap_is_out_of_order(open_log: OpenLog) -> None:
    log = open_log()
    send(log, 0, 0)
    with pytest.raises(OutOfOrderSequenceError) as info:
        send(log, 0, 3)
    assert info.value.error_code == 45
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 0, 1, count=3)  # overlaps the last batch without matching it
    assert log.log_end_offset == 2


def test_a_stale_epoch_is_fenced(open_log: OpenLog) -> None:
    log = open_log()
    send(log, 3, 0)
    with pytest.raises(InvalidProducerEpochError) as info:
        send(log, 2, 2)
    assert info.value.error_code == 47


def test_a_new_epoch_must_start_at_sequence_zero(open_log: OpenLog) -> None:
    log = open_log()
    send(log, 0, 0)
    send(log, 0, 2)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        send(log, 1, 4)
    assert send(log, 1, 0) == (4, 5)
    # the old epoch's batches are forgotten with the epoch
    with pytest.raises(InvalidProducerEpochError):
        send(log, 0, 2)


def test_an_unknown_producer_may_start_at_any_sequence(open_log: OpenLog) -> None:
    log = open_log()
    assert send(log, 5, 1234) == (0, 1)
    assert send(log, 5, 1236) == (2, 3)


def test_sequences_wrap_after_int32_max(open_log: OpenLog) -> None:
    log = open_log()
    send(log, 0, 2**31 - 2, count=1)
    send(log, 0, 2**31 - 1, count=1)
    assert send(log, 0, 0, count=1) == (2, 2)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 0


def test_a_batch_spanning_the_wrap_is_recognised_as_a_duplicate(open_log: OpenLog) -> None:
    log = open_log()
    send(log, 0, 2**31 - 2, count=4)  # sequences 2^31-2, 2^31-1, 0, 1
    result = log.append_as_leader(idempotent_batch(PID, 0, 2**31 - 2, 4), 0, T0)
    assert result.duplicate and (result.base_offset, result.last_offset) == (0, 3)
    assert send(log, 0, 2) == (4, 5)


def test_batches_without_a_producer_id_are_not_tracked(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(2), 0, T0)
    log.append_as_leader(make_batch(2), 0, T0)  # identical bytes: not a duplicate
    assert log.log_end_offset == 4
    assert log.producer_state.producers == {}


def test_state_survives_close_and_reopen(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    originals = [send(log, 0, seq) for seq in range(0, 10, 2)]
    log.close()
    assert (log_dir / "00000000000000000010.snapshot").exists()
    reopened = open_log()
    for seq, original in zip(range(0, 10, 2), originals, strict=True):
        assert send(reopened, 0, seq) == original
    assert send(reopened, 0, 10) == (10, 11)


def test_state_survives_a_crash(open_log: OpenLog, log_dir: Path) -> None:
    config = LogConfig(segment_bytes=3 * len(idempotent_batch(PID, 0, 0, 2)))
    log = open_log(config)
    originals = [send(log, 0, seq) for seq in range(0, 14, 2)]  # rolls at 6 and 12
    crash(log)  # no close: state after the last roll comes from replaying the log
    assert sorted(p.name for p in log_dir.glob("*.snapshot")) == [
        "00000000000000000006.snapshot",
        "00000000000000000012.snapshot",
    ]
    reopened = open_log(config)
    for seq, original in zip(range(4, 14, 2), originals[2:], strict=True):
        result = reopened.append_as_leader(idempotent_batch(PID, 0, seq, 2), 0, T0)
        assert result.duplicate and (result.base_offset, result.last_offset) == original
    with pytest.raises(OutOfOrderSequenceError):
        send(reopened, 0, 20)
    assert send(reopened, 0, 14) == (14, 15)


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_a_lost_snapshot_is_rebuilt_from_the_log(open_log: OpenLog, log_dir: Path, damage: str) -> None:
    log = open_log()
    originals = [send(log, 2, seq) for seq in range(0, 6, 2)]
    send(log, 0, 0, pid=PID + 1)
    log.close()
    snapshot = log_dir / "00000000000000000008.snapshot"
    if damage == "delete":
        snapshot.unlink()
    else:
        data = bytearray(snapshot.read_bytes())
        data[-3] ^= 0xFF
        snapshot.write_bytes(bytes(data))
    reopened = open_log()
    assert sorted(reopened.producer_state.producers) == [PID, PID + 1]
    assert send(reopened, 2, 4) == originals[2]
    assert send(reopened, 2, 6) == (8, 9)
    assert snapshot.exists()  # a fresh snapshot replaces the lost one


def test_idle_producers_expire(open_log: OpenLog) -> None:
    log = open_log(LogConfig(producer_id_expiration_ms=1000))
    send(log, 0, 0, pid=1, now=T0)
    send(log, 0, 0, pid=2, now=T0 + 500)
    assert log.maintain(T0 + 999).expired_producers == []
    assert log.maintain(T0 + 1000).expired_producers == [1]
    assert sorted(log.producer_state.producers) == [2]
    assert send(log, 0, 77, pid=1, now=T0 + 1000) == (4, 5)  # unknown again: any sequence


def test_expired_producers_are_not_loaded_from_a_snapshot(open_log: OpenLog) -> None:
    log = open_log(LogConfig(producer_id_expiration_ms=1000))
    send(log, 0, 0, now=T0)
    log.close()
    assert open_log(LogConfig(producer_id_expiration_ms=1000), now_ms=T0 + 5000).producer_state.producers == {}


def test_snapshot_round_trip_keeps_five_batches(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path, 10**9)
    for i in range(7):
        batch = idempotent_batch(9, 1, 3 * i, 3, timestamp=T0 + i)
        patch_batch(batch, 0, 100 + 3 * i, 0)
        manager.update(parse_batch_header(batch))
    manager.take_snapshot()
    loaded = ProducerStateManager(tmp_path, 10**9)
    assert loaded.truncate_and_reload(0, 121, T0) == 121
    entry = loaded.last_entry(9)
    assert entry is not None and entry.producer_epoch == 1 and entry.last_timestamp == T0 + 6
    assert list(entry.batches) == [BatchMetadata(3 * i + 2, 100 + 3 * i + 2, 2, T0 + i) for i in range(2, 7)]
    assert entry.batches[0].first_seq == 6 and entry.batches[0].first_offset == 106


def test_snapshots_outside_the_log_are_deleted(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path, 10**9)
    for offset in (5, 10, 20):
        manager.update_map_end_offset(offset)
        manager.take_snapshot()
    assert manager.truncate_and_reload(log_start_offset=8, log_end_offset=15, now_ms=T0) == 10
    assert manager.snapshot_offsets() == [10]


def test_closing_an_empty_log_writes_no_snapshot(open_log: OpenLog, log_dir: Path) -> None:
    open_log().close()
    assert list(log_dir.glob("*.snapshot")) == [], "an empty state over an empty log: a load replays nothing"
    reopened = open_log()
    assert reopened.producer_state.producers == {}
    assert send(reopened, 0, 0) == (0, 1)


def test_closing_writes_no_snapshot_over_one_already_at_the_log_end(open_log: OpenLog, log_dir: Path) -> None:
    config = LogConfig(segment_bytes=2 * len(idempotent_batch(PID, 0, 0, 2)))
    log = open_log(config)
    originals = [send(log, 0, seq) for seq in range(0, 8, 2)]
    log.roll(T0)  # a snapshot at the log end, 8
    snapshot = log_dir / "00000000000000000008.snapshot"
    written = snapshot.stat().st_mtime_ns
    log.close()
    assert snapshot.stat().st_mtime_ns == written, "the snapshot at the log end was written again"
    reopened = open_log(config)
    assert send(reopened, 0, 6) == originals[3]  # a retry of the last batch is still known
    assert send(reopened, 0, 8) == (8, 9)


def test_closing_a_log_whose_producers_left_after_its_data_snapshots_the_empty_state(
    open_log: OpenLog, log_dir: Path
) -> None:
    log = open_log(LogConfig(producer_id_expiration_ms=1000))
    send(log, 0, 0, now=T0)
    log.maintain(T0 + 1000)  # expired: the state is empty, the log is not
    log.close()
    assert (log_dir / "00000000000000000002.snapshot").exists(), "without it a load replays the whole log"
