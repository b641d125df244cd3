"""PartitionLog as a replica: append_as_follower, truncate_to, truncate_fully_and_start_at."""

from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.log import (
    CorruptRecordError,
    LogConfig,
    PartitionLog,
    UnexpectedAppendOffsetError,
)
from barnabas.protocol import build_record_batch

from .batches import T0, decode, idempotent_batch, make_batch, offsets, set_attribute_bits
from .conftest import OpenLog

_CONTROL_FLAG = 0x20


def leader_batch(
    base_offset: int,
    count: int = 1,
    epoch: int = 0,
    *,
    timestamp: int = T0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch as a leader stores it: offsets and partitionLeaderEpoch already assigned."""
    return build_record_batch(
        [(None, f"v{base_offset + i}".encode().ljust(16, b".")) for i in range(count)],
        base_timestamp_ms=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )


def leader_log(*specs: tuple[int, int]) -> list[bytes]:
    """Contiguous batches from offset 0, one per (record count, leader epoch)."""
    batches, offset = [], 0
    for count, epoch in specs:
        batches.append(leader_batch(offset, count, epoch))
        offset += count
    return batches


def state(log: PartitionLog) -> tuple[int, int, int, list[tuple[int, int]]]:
    entries = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]
    return log.log_end_offset, log.size_bytes, log.segment_count, entries


# --- appending ---------------------------------------------------------------------------------


def test_batches_are_appended_byte_for_byte(open_log: OpenLog) -> None:
    batches = leader_log((2, 0), (3, 0), (1, 2))
    records = b"".join(batches)
    log = open_log()
    result = log.append_as_follower(records, T0)
    assert (result.first_offset, result.last_offset, result.batches) == (0, 5, 3)
    assert (result.size_bytes, result.skipped_batches, result.log_end_offset) == (len(records), 0, 6)
    assert result.appended
    assert bytes(log.read(0, 1 << 20).records) == records  # nothing patched
    assert [(b.base_offset, b.leader_epoch, b.crc_ok) for b in decode(records)] == [
        (0, 0, True),
        (2, 0, True),
        (5, 2, True),
    ]
    assert log.log_end_offset == 6


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_any_buffer_type_is_accepted(open_log: OpenLog, wrap: type) -> None:
    records = b"".join(leader_log((2, 0), (1, 0)))
    log = open_log()
    assert log.append_as_follower(wrap(records), T0).last_offset == 2
    assert bytes(log.read(0, 1 << 20).records) == records


def test_the_high_watermark_never_moves(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(b"".join(leader_log((2, 0), (2, 0))), T0)
    assert log.high_watermark == 0  # even with hw_follows_log_end still at its default
    log.hw_follows_log_end = False
    log.high_watermark = 3
    log.append_as_follower(leader_batch(4, 2), T0)
    assert (log.high_watermark, log.log_end_offset) == (3, 6)


def test_leader_timestamp_and_size_rules_do_not_apply(open_log: OpenLog) -> None:
    log = open_log(LogConfig(max_message_bytes=100, message_timestamp_after_max_ms=0))
    far_future = leader_batch(0, 5, timestamp=T0 + 10**9)
    assert len(far_future) > 100
    assert log.append_as_follower(far_future, T0).batches == 1
    assert log.append_as_follower(leader_batch(5, timestamp=0), T0).batches == 1


def test_leader_epochs_enter_the_cache_when_newer(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    batches = [
        leader_batch(0, 2, epoch=-1),
        leader_batch(2, 2, epoch=1),
        leader_batch(4, 2, epoch=1),
        leader_batch(6, 1, epoch=3),
        leader_batch(7, 1, epoch=2),  # older than the latest: no entry, as in recovery
    ]
    log.append_as_follower(b"".join(batches), T0)
    assert log.leader_epoch_cache.entries == [(1, 2), (3, 6)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(3) == (3, 8)
    log.close()
    assert open_log().leader_epoch_cache.entries == [(1, 2), (3, 6)]  # checkpointed durably
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 2\n3 6\n"


def test_an_empty_fetch_appends_nothing(open_log: OpenLog) -> None:
    result = open_log().append_as_follower(b"", T0)
    assert not result.appended
    assert (result.first_offset, result.last_offset, result.log_end_offset) == (None, None, 0)


# --- what a fetch response may hold ------------------------------------------------------------


def test_batches_already_in_the_log_are_skipped(open_log: OpenLog) -> None:
    batches = leader_log((2, 0), (3, 0), (2, 1))
    log = open_log()
    log.append_as_follower(b"".join(batches[:2]), T0)
    again = log.append_as_follower(b"".join(batches[:2]), T0)  # a re-fetch: nothing new
    assert (again.appended, again.skipped_batches, again.first_offset, again.log_end_offset) == (False, 2, None, 5)
    result = log.append_as_follower(b"".join(batches), T0)
    assert (result.skipped_batches, result.batches, result.first_offset, result.last_offset) == (2, 1, 5, 6)
    assert bytes(log.read(0, 1 << 20).records) == b"".join(batches)


@pytest.mark.parametrize(
    ("records", "expected", "first", "last"),
    [
        pytest.param([leader_batch(1, 3)], 2, 1, 3, id="straddles-the-log-end"),
        pytest.param([leader_batch(2, 2), leader_batch(3, 2)], 4, 3, 4, id="overlap-after-the-first"),
        pytest.param([leader_batch(5, 2), leader_batch(4, 1)], 7, 4, 4, id="back-after-a-gap"),
    ],
)
def test_batches_that_go_back_into_the_log_append_nothing(
    open_log: OpenLog, records: list[bytes], expected: int, first: int, last: int
) -> None:
    log = open_log()
    log.append_as_follower(leader_batch(0, 2), T0)
    before = state(log)
    with pytest.raises(UnexpectedAppendOffsetError, match=f"at or after offset {expected}, got") as info:
        log.append_as_follower(b"".join(records), T0)
    assert (info.value.expected_offset, info.value.first_offset, info.value.last_offset) == (expected, first, last)
    assert state(log) == before  # not even a valid leading batch
    assert log.append_as_follower(leader_batch(2, 1), T0).first_offset == 2  # the log still works


def test_gaps_left_by_a_compacted_leader_are_accepted(open_log: OpenLog) -> None:
    # Kafka's follower only refuses offsets that go back: the cleaner removes whole batches.
    log = open_log()
    log.append_as_follower(leader_batch(0, 2), T0)
    result = log.append_as_follower(leader_batch(5, 2) + leader_batch(9, 1), T0)
    assert (result.batches, result.first_offset, result.last_offset, log.log_end_offset) == (2, 5, 9, 10)
    assert offsets(log.read(2, 1 << 20).records) == [5, 6, 9]  # a read inside a gap starts at the next batch
    assert offsets(log.read(7, 1 << 20).records) == [9]


def test_a_bad_crc_anywhere_appends_nothing(open_log: OpenLog) -> None:
    good, bad = leader_batch(0, 2), bytearray(leader_batch(2, 2, epoch=4))
    bad[-1] ^= 0xFF
    log = open_log()
    before = state(log)
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_follower(good + bytes(bad), T0)
    assert state(log) == before
    assert log.latest_epoch is None  # not even the epoch of the good batch


def test_a_corrupt_batch_length_is_rejected(open_log: OpenLog) -> None:
    log = open_log()
    junk = bytes(8) + (10).to_bytes(4, "big") + bytes(60)
    with pytest.raises(CorruptRecordError, match="too small"):
        log.append_as_follower(leader_batch(0) + junk, T0)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("cut", [1, 11, 12, 40, 61, -1])
def test_a_partial_batch_at_the_end_is_ignored(open_log: OpenLog, cut: int) -> None:
    whole, partial = leader_batch(0, 2), leader_batch(2, 3)
    log = open_log()
    result = log.append_as_follower(whole + partial[:cut], T0)
    assert (result.batches, result.size_bytes, log.log_end_offset) == (1, len(whole), 2)
    assert not log.append_as_follower(partial[:cut], T0).appended
    assert log.append_as_follower(partial, T0).last_offset == 4  # the next fetch brings it whole


def test_control_and_transactional_batches_are_appended(open_log: OpenLog) -> None:
    log = open_log()
    data = leader_batch(0, 2, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    marker = set_attribute_bits(
        bytearray(leader_batch(2, 1, producer_id=9, producer_epoch=0, transactional=True)), _CONTROL_FLAG
    )
    result = log.append_as_follower(data + bytes(marker), T0)
    assert (result.batches, log.log_end_offset) == (2, 3)
    entry = log.producer_state.last_entry(9)
    assert entry is not None and entry.last_offset == 1  # the marker carries no sequence
    assert log.producer_state.map_end_offset == 3


# --- producer state ----------------------------------------------------------------------------


def test_a_promoted_follower_recognises_a_retry(open_log: OpenLog) -> None:
    log = open_log()
    records = leader_batch(0, 2) + leader_batch(2, 3, producer_id=7, producer_epoch=1, base_sequence=0)
    log.append_as_follower(records, T0)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and (entry.producer_epoch, entry.last_seq, entry.last_offset) == (1, 2, 4)
    # Promoted: the client retries the batch the old leader had appended.
    retry = log.append_as_leader(idempotent_batch(7, 1, 0, count=3), 1, T0)
    assert (retry.duplicate, retry.base_offset, retry.last_offset) == (True, 2, 4)
    assert log.log_end_offset == 5
    nxt = log.append_as_leader(idempotent_batch(7, 1, 3), 1, T0)
    assert (nxt.duplicate, nxt.base_offset) == (False, 5)


def test_producer_state_after_follower_appends_survives_a_restart(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(leader_batch(0, 2, producer_id=7, producer_epoch=0, base_sequence=0), T0)
    log.close()
    reopened = open_log()
    assert reopened.append_as_leader(idempotent_batch(7, 0, 0, count=2), 0, T0).duplicate


def test_follower_producer_state_is_not_validated(open_log: OpenLog) -> None:
    # AppendOrigin.REPLICATION: the leader already checked sequences and epochs.
    log = open_log()
    log.append_as_follower(leader_batch(0, 1, producer_id=7, producer_epoch=2, base_sequence=0), T0)
    log.append_as_follower(leader_batch(1, 1, producer_id=7, producer_epoch=2, base_sequence=9), T0)
    log.append_as_follower(leader_batch(2, 1, producer_id=7, producer_epoch=1, base_sequence=0), T0)
    assert log.log_end_offset == 3


# --- rolling and flushing ----------------------------------------------------------------------


def test_follower_appends_roll_by_size(open_log: OpenLog) -> None:
    size = len(leader_batch(0))
    log = open_log(LogConfig(segment_bytes=3 * size))
    log.append_as_follower(b"".join(leader_batch(i) for i in range(7)), T0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert offsets(bytes(log.read(3, 1 << 20).records)) == [3, 4, 5]


def test_follower_appends_roll_by_time(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    stamps = [T0, T0 + 500, T0 + 1000, T0 + 1001, T0 + 1500, T0 + 2002]
    log.append_as_follower(b"".join(leader_batch(i, timestamp=ts) for i, ts in enumerate(stamps)), T0)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_follower_appends_roll_by_full_index(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    log.append_as_follower(b"".join(leader_batch(i) for i in range(7)), T0)
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_a_batch_larger_than_a_segment_gets_one_of_its_own(open_log: OpenLog) -> None:
    big = leader_batch(1, 20)
    log = open_log(LogConfig(segment_bytes=len(big) - 1))
    log.append_as_follower(leader_batch(0) + big + leader_batch(21), T0)
    assert [s.base_offset for s in log.segments] == [0, 1, 21]


def test_follower_appends_follow_the_flush_policy(open_log: OpenLog) -> None:
    log = open_log(LogConfig(flush_messages=5))
    log.append_as_follower(leader_batch(0, 4), T0)
    assert log.recovery_point == 0
    log.append_as_follower(leader_batch(4, 2), T0)
    assert log.recovery_point == 6


def test_follower_data_survives_close_and_reopen(open_log: OpenLog) -> None:
    records = b"".join(leader_log((2, 1), (2, 1), (3, 2)))
    log = open_log(LogConfig(segment_bytes=2 * len(leader_batch(0, 2))))
    log.append_as_follower(records, T0)
    log.close()
    reopened = open_log()
    assert reopened.load_report.truncated_bytes == 0
    assert bytes(reopened.read(0, 1 << 20).records) + bytes(reopened.read(4, 1 << 20).records) == records


# --- truncation --------------------------------------------------------------------------------


@pytest.fixture
def replica(open_log: OpenLog) -> PartitionLog:
    """A follower with batches [0-3] epoch 1, [4-7] and [8-9] epoch 2; segments at 0 and 8."""
    log = open_log(LogConfig(segment_bytes=2 * len(leader_batch(0, 4))))
    log.append_as_follower(
        leader_batch(0, 4, 1) + leader_batch(4, 4, 2, producer_id=5, producer_epoch=0, base_sequence=0), T0
    )
    log.append_as_follower(leader_batch(8, 2, 2), T0)
    assert [s.base_offset for s in log.segments] == [0, 8]
    return log


def test_truncating_into_a_batch_removes_the_whole_batch(replica: PartitionLog) -> None:
    assert replica.truncate_to(6, T0)
    assert replica.log_end_offset == 4  # the batch's base offset, not 6: no half batch, no gap
    assert [s.base_offset for s in replica.segments] == [0]
    assert offsets(bytes(replica.read(0, 1 << 20).records)) == [0, 1, 2, 3]
    assert replica.leader_epoch_cache.entries == [(1, 0)]
    assert replica.producer_state.last_entry(5) is None
    assert replica.append_as_follower(leader_batch(4, 2, 3), T0).first_offset == 4


def test_truncation_into_a_batch_survives_a_restart(replica: PartitionLog, open_log: OpenLog) -> None:
    replica.truncate_to(9, T0)
    assert replica.log_end_offset == 8
    replica.close()
    reopened = open_log()
    assert reopened.log_end_offset == 8
    assert reopened.leader_epoch_cache.entries == [(1, 0), (2, 4)]


def test_truncating_at_a_batch_boundary_and_beyond_the_end(replica: PartitionLog) -> None:
    assert not replica.truncate_to(10, T0)
    assert not replica.truncate_to(11, T0)
    assert replica.truncate_to(8, T0)
    assert replica.log_end_offset == 8
    assert [s.base_offset for s in replica.segments] == [0, 8]  # an empty active segment stays
    assert replica.active_segment.size == 0


def test_truncation_lowers_the_high_watermark(replica: PartitionLog) -> None:
    replica.hw_follows_log_end = False
    replica.high_watermark = 9
    replica.truncate_to(5, T0)
    assert replica.high_watermark == 4


def test_truncating_a_batch_that_starts_below_the_log_start_empties_the_log(replica: PartitionLog) -> None:
    replica.hw_follows_log_end = False
    replica.high_watermark = 10
    replica.delete_records_before(6)  # the log start is now inside the batch [4-7]
    assert replica.truncate_to(7, T0)
    assert (replica.log_start_offset, replica.log_end_offset, replica.high_watermark) == (6, 6, 6)
    # The leader's batch starts below the empty log: Kafka's recoverable UnexpectedAppendOffset.
    batch = leader_batch(4, 4, 2)
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        replica.append_as_follower(batch, T0)
    assert (info.value.first_offset, info.value.last_offset) == (4, 7)
    replica.truncate_fully_and_start_at(info.value.first_offset, T0)
    assert replica.append_as_follower(batch, T0).log_end_offset == 8


def test_truncating_below_the_log_start_restarts_the_log_there(replica: PartitionLog) -> None:
    replica.hw_follows_log_end = False
    replica.high_watermark = 10
    replica.delete_records_before(8)
    assert replica.truncate_to(2, T0)
    assert (replica.log_start_offset, replica.log_end_offset) == (2, 2)


def test_truncating_to_a_negative_offset_is_refused(replica: PartitionLog) -> None:
    with pytest.raises(ValueError, match="negative"):
        replica.truncate_to(-1, T0)


def test_truncate_fully_and_start_at(replica: PartitionLog, open_log: OpenLog, log_dir: Path) -> None:
    replica.truncate_fully_and_start_at(100, T0)
    assert (replica.log_start_offset, replica.log_end_offset) == (100, 100)
    assert (replica.recovery_point, replica.high_watermark) == (100, 100)
    assert [s.base_offset for s in replica.segments] == [100]
    assert replica.leader_epoch_cache.entries == []
    assert replica.producer_state.producers == {}
    assert list(log_dir.glob("*.snapshot")) == []
    assert sorted(p.name for p in log_dir.glob("*.log")) == ["00000000000000000100.log"]
    replica.append_as_follower(leader_batch(100, 2, 7), T0)
    replica.close()
    reopened = open_log()
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.latest_epoch) == (100, 102, 7)


def test_a_leader_append_after_follower_appends_continues_the_offsets(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(b"".join(leader_log((3, 4))), T0)
    result = log.append_as_leader(make_batch(2), 5, T0)
    assert (result.base_offset, log.log_end_offset) == (3, 5)
    assert log.leader_epoch_cache.entries == [(4, 0), (5, 3)]


def test_a_follower_append_bumps_the_offsets_version(open_log: OpenLog) -> None:
    log = open_log()
    before = log.offsets_version
    assert log.append_as_follower(b"".join(leader_log((2, 0))), T0).appended
    assert log.offsets_version != before
