"""The batch checks on their own (barnabas.log.validator, Kafka's LogValidator): no log, no files."""

from __future__ import annotations

import struct

import pytest

from barnabas.log import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    LogConfig,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from barnabas.log.validator import (
    check_follower_batches,
    check_records,
    check_timestamps,
    stamp_log_append_time,
    validate_client_batch,
    whole_batches,
)
from barnabas.protocol import (
    NewRecord,
    RecordBatchHeader,
    batch_crc,
    build_record_batch,
    parse_batch_header,
    validate_batch,
)
from tests.support.raw_records import expanding_batch, raw_batch, raw_record

from .batches import T0

TP = "orders-0"
# Byte offsets of the v2 header fields the tests rewrite (DefaultRecordBatch's layout).
_LENGTH = 8
_MAGIC = 16
_CRC = 17
_ATTRIBUTES = 21
_RECORDS_COUNT = 57
_CONTROL_FLAG = 0x20


def client_batch(
    count: int = 1,
    *,
    keys: list[bytes | None] | None = None,
    timestamps: list[int] | None = None,
    base_timestamp: int = T0,
    base_offset: int = 0,
    producer_id: int = -1,
    transactional: bool = False,
) -> bytearray:
    """A batch as a producer sends it (baseOffset 0 unless asked), built by the project's own encoder."""
    if keys is None:
        keys = [f"k{i}".encode() for i in range(len(timestamps) if timestamps is not None else count)]
    stamps = timestamps if timestamps is not None else [base_timestamp] * len(keys)
    records = [NewRecord(key, b"value", (), ts) for key, ts in zip(keys, stamps, strict=True)]
    return bytearray(
        build_record_batch(
            records,
            base_timestamp_ms=base_timestamp,
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=0 if producer_id >= 0 else -1,
            is_transactional=transactional,
        )
    )


def leader_batch(base_offset: int, count: int = 1) -> bytearray:
    """A batch as a leader stores it: its offset assigned, its records keyless."""
    records = [(None, f"v{base_offset + i}".encode()) for i in range(count)]
    return bytearray(
        build_record_batch(records, base_timestamp_ms=T0, base_offset=base_offset, partition_leader_epoch=3)
    )


def rewrite(batch: bytearray, fmt: str, offset: int, value: int, *, recrc: bool = True) -> bytearray:
    """Overwrite one header field; with ``recrc`` the CRC-32C is recomputed, so only that field is wrong."""
    struct.pack_into(fmt, batch, offset, value)
    if recrc:
        struct.pack_into(">I", batch, _CRC, batch_crc(batch, 0, len(batch)))
    return batch


def header_of(batch: bytearray) -> RecordBatchHeader:
    return parse_batch_header(batch)


# --- client batches: validate_client_batch -------------------------------------------------------


def test_a_valid_client_batch_is_accepted_and_its_header_returned() -> None:
    batch = client_batch(3)
    header = validate_client_batch(batch, LogConfig(), TP)
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (0, 3, 2)
    assert header.size == len(batch)


def test_a_corrupt_crc_is_rejected() -> None:
    batch = client_batch(2)
    batch[-1] ^= 0xFF  # a record byte, under the CRC
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_client_batch(batch, LogConfig(), TP)


def test_a_bad_magic_is_rejected() -> None:
    batch = rewrite(client_batch(), ">b", _MAGIC, 1, recrc=False)  # magic is outside the CRC
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_client_batch(batch, LogConfig(), TP)


def test_a_client_batch_must_start_at_offset_zero() -> None:
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        validate_client_batch(client_batch(base_offset=7), LogConfig(), TP)


def test_a_client_may_not_write_a_control_batch() -> None:
    batch = rewrite(client_batch(), ">h", _ATTRIBUTES, _CONTROL_FLAG)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_client_batch(batch, LogConfig(), TP)


def test_a_transactional_batch_is_refused() -> None:
    batch = client_batch(producer_id=5, transactional=True)
    with pytest.raises(InvalidTxnStateError):
        validate_client_batch(batch, LogConfig(), TP)


def test_a_record_count_that_contradicts_the_offset_delta_is_rejected() -> None:
    batch = rewrite(client_batch(3), ">i", _RECORDS_COUNT, 2)
    with pytest.raises(InvalidRecordError, match="record count 2"):
        validate_client_batch(batch, LogConfig(), TP)


def test_max_message_bytes_bounds_the_batch() -> None:
    batch = client_batch(2)
    validate_client_batch(batch, LogConfig(max_message_bytes=len(batch)), TP)
    with pytest.raises(RecordTooLargeError) as caught:
        validate_client_batch(batch, LogConfig(max_message_bytes=len(batch) - 1), TP)
    assert (caught.value.size, caught.value.limit) == (len(batch), len(batch) - 1)


def test_size_is_checked_before_the_crc_as_kafka_does() -> None:
    batch = client_batch(2)
    batch[-1] ^= 0xFF
    with pytest.raises(RecordTooLargeError):
        validate_client_batch(batch, LogConfig(max_message_bytes=len(batch) - 1), TP)


def test_a_batch_larger_than_a_segment_is_record_list_too_large() -> None:
    batch = client_batch(2)
    validate_client_batch(batch, LogConfig(segment_bytes=len(batch)), TP)
    with pytest.raises(RecordBatchTooLargeError) as caught:
        validate_client_batch(batch, LogConfig(segment_bytes=len(batch) - 1), TP)
    assert caught.value.limit == len(batch) - 1


# --- compacted topics: keys ------------------------------------------------------------------


def test_a_compacted_topic_refuses_keyless_records_naming_each_one() -> None:
    batch = client_batch(keys=[None, b"k1", None])
    with pytest.raises(InvalidRecordError) as caught:
        validate_client_batch(batch, LogConfig(cleanup_policy="compact"), TP)
    message = f"Compacted topic cannot accept message without key in topic partition {TP}"
    assert caught.value.record_errors == ((0, message), (2, message))
    assert "due to 2 record errors in total" in str(caught.value)


def test_a_compacted_topic_accepts_keyed_records() -> None:
    header = validate_client_batch(client_batch(keys=[b"a", b"b"]), LogConfig(cleanup_policy="compact,delete"), TP)
    assert header.records_count == 2


def test_a_deleting_topic_accepts_keyless_records() -> None:
    header = validate_client_batch(client_batch(keys=[None, None]), LogConfig(cleanup_policy="delete"), TP)
    assert header.records_count == 2


def test_check_records_shows_at_most_three_key_errors_but_counts_all() -> None:
    with pytest.raises(InvalidRecordError) as caught:
        check_records(client_batch(keys=[None] * 5), TP, LogConfig().max_records_bytes)
    assert len(caught.value.record_errors) == 5
    assert "due to 5 record errors in total" in str(caught.value)
    assert str(caught.value).count("RecordError(batchIndex=") == 3


# --- compacted topics: what the cleaner must be able to read ---------------------------------

COMPACTED = LogConfig(cleanup_policy="compact")


@pytest.mark.parametrize("codec", [0, 4])
def test_a_compacted_topic_refuses_records_outside_the_batch_offsets(codec: int) -> None:
    # Count and lastOffsetDelta agree (2 records, delta 1), but the second record claims delta 5.
    batch = bytearray(raw_batch([raw_record(0, b"a", b"1"), raw_record(5, b"b", b"2")], codec=codec))
    with pytest.raises(InvalidRecordError, match=f"offset delta 5 .* in topic partition {TP}") as caught:
        validate_client_batch(batch, COMPACTED, TP)
    assert caught.value.record_errors == ()
    assert validate_client_batch(batch, LogConfig(), TP).records_count == 2  # other topics keep batches opaque


def test_a_compacted_topic_refuses_a_malformed_record_as_invalid() -> None:
    record = bytearray(raw_record(0, b"k", b"v", [(b"h", b"x")]))
    record[-4] = 0x03  # the header key's length: -2
    with pytest.raises(InvalidRecordError, match="header key length"):
        validate_client_batch(bytearray(raw_batch([bytes(record)])), COMPACTED, TP)


def test_a_compacted_topic_takes_a_header_key_that_is_not_utf8_as_kafka_does() -> None:
    batch = bytearray(raw_batch([raw_record(0, b"k", b"v", [(b"\xff\xfe", b"x")])]))
    assert validate_client_batch(batch, COMPACTED, TP).records_count == 1


def test_a_compacted_topic_refuses_records_decompressing_past_its_bound() -> None:
    config = LogConfig(cleanup_policy="compact", max_message_bytes=16_384)
    assert config.max_records_bytes == 64 * 16_384
    fits = bytearray(expanding_batch(4, config.max_records_bytes - 100))
    assert validate_client_batch(fits, config, TP).records_count == 1
    bomb = bytearray(expanding_batch(4, 64 << 20))
    with pytest.raises(InvalidRecordError, match=f"at most {config.max_records_bytes} bytes"):
        validate_client_batch(bomb, config, TP)


# --- timestamps: message.timestamp.after.max.ms / before.max.ms ------------------------------

BOUNDED = LogConfig(message_timestamp_after_max_ms=1_000, message_timestamp_before_max_ms=5_000)


def test_timestamps_within_both_bounds_are_accepted() -> None:
    check_timestamps(
        header_of(client_batch(timestamps=[T0 - 5_000, T0 + 1_000], base_timestamp=T0 - 5_000)), BOUNDED, T0
    )


def test_a_timestamp_too_far_ahead_is_rejected() -> None:
    header = header_of(client_batch(base_timestamp=T0 + 1_001))
    with pytest.raises(InvalidTimestampError, match=r"message\.timestamp\.after\.max\.ms"):
        check_timestamps(header, BOUNDED, T0)


def test_the_largest_timestamp_is_the_one_checked_ahead() -> None:
    header = header_of(client_batch(timestamps=[T0, T0 + 1_001]))
    assert header.base_timestamp == T0
    with pytest.raises(InvalidTimestampError, match="after"):
        check_timestamps(header, BOUNDED, T0)


def test_a_timestamp_too_far_behind_is_rejected() -> None:
    header = header_of(client_batch(base_timestamp=T0 - 5_001))
    with pytest.raises(InvalidTimestampError, match=r"message\.timestamp\.before\.max\.ms"):
        check_timestamps(header, BOUNDED, T0)


def test_a_batch_without_timestamps_is_not_too_old() -> None:
    header = header_of(client_batch(base_timestamp=-1))
    assert header.base_timestamp == -1
    check_timestamps(header, BOUNDED, T0)


def test_log_append_time_topics_skip_the_timestamp_checks() -> None:
    config = LogConfig(
        message_timestamp_type="LogAppendTime",
        message_timestamp_after_max_ms=1_000,
        message_timestamp_before_max_ms=5_000,
    )
    check_timestamps(header_of(client_batch(base_timestamp=T0 + 10_000)), config, T0)
    check_timestamps(header_of(client_batch(base_timestamp=T0 - 10_000)), config, T0)


# --- LogAppendTime: stamp_log_append_time ----------------------------------------------------


def test_log_append_time_rewrites_the_max_timestamp_and_re_crcs() -> None:
    batch = client_batch(2, base_timestamp=T0 - 60_000)
    now = T0 + 5
    assert stamp_log_append_time(batch, header_of(batch), LogConfig(message_timestamp_type="LogAppendTime"), now) == now
    header = validate_batch(batch)  # the CRC was recomputed
    assert header.is_log_append_time
    assert header.max_timestamp == now
    assert header.base_timestamp == T0 - 60_000  # Kafka writes only maxTimestamp


def test_create_time_leaves_the_batch_untouched() -> None:
    batch = client_batch(2)
    before = bytes(batch)
    assert stamp_log_append_time(batch, header_of(batch), LogConfig(), T0 + 5) == -1
    assert bytes(batch) == before


# --- follower batches: check_follower_batches ------------------------------------------------


def test_follower_batches_continuing_the_log_are_accepted_in_order() -> None:
    first, second = leader_batch(10, 2), leader_batch(12, 3)
    accepted, skipped = check_follower_batches(first + second, log_end_offset=10)
    assert [(position, header.base_offset) for position, header in accepted] == [(0, 10), (len(first), 12)]
    assert skipped == 0


def test_leading_batches_already_in_the_log_are_skipped() -> None:
    records = leader_batch(0, 2) + leader_batch(2, 2) + leader_batch(4, 2)
    accepted, skipped = check_follower_batches(records, log_end_offset=4)
    assert [header.base_offset for _, header in accepted] == [4]
    assert skipped == 2


def test_skipped_batches_are_not_checked() -> None:
    old = leader_batch(0, 2)
    old[-1] ^= 0xFF  # corrupt, but below the log end: never appended
    accepted, skipped = check_follower_batches(old + leader_batch(2), log_end_offset=2)
    assert [header.base_offset for _, header in accepted] == [2]
    assert skipped == 1


def test_gaps_left_by_a_compacted_leader_are_accepted() -> None:
    accepted, _ = check_follower_batches(leader_batch(5) + leader_batch(9), log_end_offset=3)
    assert [header.base_offset for _, header in accepted] == [5, 9]


def test_a_batch_overlapping_the_log_end_is_refused() -> None:
    with pytest.raises(UnexpectedAppendOffsetError) as caught:
        check_follower_batches(leader_batch(3, 4), log_end_offset=5)
    assert (caught.value.expected_offset, caught.value.first_offset, caught.value.last_offset) == (5, 3, 6)


def test_a_later_batch_going_back_is_refused() -> None:
    with pytest.raises(UnexpectedAppendOffsetError) as caught:
        check_follower_batches(leader_batch(5, 3) + leader_batch(6), log_end_offset=5)
    assert (caught.value.expected_offset, caught.value.first_offset) == (8, 6)


def test_a_corrupt_crc_in_any_follower_batch_is_rejected() -> None:
    second = leader_batch(1)
    second[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        check_follower_batches(leader_batch(0) + second, log_end_offset=0)


def test_a_follower_batch_with_a_bad_magic_is_rejected() -> None:
    with pytest.raises(CorruptRecordError, match="magic"):
        check_follower_batches(rewrite(leader_batch(0), ">b", _MAGIC, 1, recrc=False), log_end_offset=0)


def test_a_batch_length_too_small_for_a_header_is_corrupt_even_below_the_log_end() -> None:
    # Framing is checked before the skip: a bad length means nothing after it can be trusted.
    with pytest.raises(CorruptRecordError, match="length 20 at byte 0 is too small"):
        check_follower_batches(rewrite(leader_batch(0), ">i", _LENGTH, 20, recrc=False), log_end_offset=5)


def test_a_negative_record_count_is_rejected_from_a_leader() -> None:
    with pytest.raises(InvalidRecordError, match="negative"):
        check_follower_batches(rewrite(leader_batch(0, 3), ">i", _RECORDS_COUNT, -1), log_end_offset=0)


def test_client_rules_do_not_apply_to_follower_batches() -> None:
    thinned = rewrite(leader_batch(0, 3), ">i", _RECORDS_COUNT, 1)  # compaction kept one record of three
    control = rewrite(leader_batch(3), ">h", _ATTRIBUTES, _CONTROL_FLAG)
    accepted, _ = check_follower_batches(thinned + control, log_end_offset=0)
    assert [(header.base_offset, header.records_count, header.is_control) for _, header in accepted] == [
        (0, 1, False),
        (3, 1, True),
    ]
    with pytest.raises(InvalidRecordError):
        validate_client_batch(rewrite(client_batch(3), ">i", _RECORDS_COUNT, 1), LogConfig(), TP)


@pytest.mark.parametrize("cut", [1, 11, 12, 60, 61])
def test_a_partial_batch_at_the_end_is_ignored(cut: int) -> None:
    whole = leader_batch(0, 2)
    accepted, _ = check_follower_batches(whole + leader_batch(2)[:cut], log_end_offset=0)
    assert [header.base_offset for _, header in accepted] == [0]


def test_empty_records_append_nothing() -> None:
    assert check_follower_batches(b"", log_end_offset=4) == ([], 0)


# --- framing: whole_batches ------------------------------------------------------------------


def test_whole_batches_yields_each_position_and_header_of_any_buffer_type() -> None:
    first, second = leader_batch(0, 2), leader_batch(2)
    for records in (bytes(first + second), first + second, memoryview(first + second)):
        assert [(p, h.base_offset, h.size) for p, h in whole_batches(records)] == [
            (0, 0, len(first)),
            (len(first), 2, len(second)),
        ]


def test_whole_batches_refuses_a_length_too_small_for_a_header() -> None:
    records = leader_batch(0) + rewrite(leader_batch(1), ">i", _LENGTH, 48, recrc=False)
    batches = whole_batches(records)
    assert next(batches)[1].base_offset == 0
    with pytest.raises(CorruptRecordError, match=f"length 48 at byte {len(leader_batch(0))} is too small"):
        next(batches)
