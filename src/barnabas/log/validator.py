"""The checks a batch passes before the log appends it (Kafka's LogValidator, at batch granularity).

Rules this module keeps:

- Pure functions of what they are given: the batch bytes, the topic's :class:`LogConfig`, the
  time (``now_ms``) and, for a follower, the log end offset. Nothing here holds a log, reads a
  clock or writes a file, so each rule is testable on its own.
- Batches stay opaque: only the v2 header is read (``validate_batch`` checks magic, sizes and
  CRC-32C). The one exception is a compacted topic's client batch, whose records are read
  (:func:`check_records`) with the parser the cleaner reads them with (``scan_record_keys``), under
  the same bound on what they may decompress to (``LogConfig.max_records_bytes``): a batch the
  cleaner could not read would stop compaction of its partition, so it is refused here, as Kafka's
  LogValidator refuses a record it cannot iterate. Nothing is decompressed anywhere else.
- A client's batch (``validate_client_batch``) is checked in Kafka's order,
  UnifiedLog.analyzeAndValidateRecords then LogValidator: size, CRC, then the rules for client
  batches. Its timestamps are checked separately (:func:`check_timestamps`), and under
  LogAppendTime are overwritten instead (:func:`stamp_log_append_time`).
- A follower's batches (:func:`check_follower_batches`) carry the leader's offsets and epochs:
  each passes its CRC and offset checks, none of the client rules. Offsets must increase but may
  skip (a compacted leader's log has gaps); going back is refused, as in UnifiedLog.
- A topic whose ``compression.type`` names a codec stores client batches in it
  (:func:`convert_compression`, LogValidator's non-in-place path): a batch in another codec has its
  records section decompressed (under ``LogConfig.max_records_bytes``) and compressed again, the
  records themselves left as they are, and the new batch must still fit max.message.bytes and
  segment.bytes. Only such a batch is copied; every other check and patch is in place.
- The append path calls these once per batch, never per record.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from barnabas.protocol import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchHeader,
    RecordKey,
    parse_batch_header,
    recompress_batch,
    scan_record_keys,
    set_log_append_time,
    validate_batch,
)

from .config import LogConfig
from .errors import (
    InvalidTimestampError,
    InvalidTxnStateError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)

__all__ = [
    "check_follower_batches",
    "check_keys",
    "check_records",
    "check_timestamps",
    "convert_compression",
    "stamp_log_append_time",
    "validate_client_batch",
    "whole_batches",
]

_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD


def validate_client_batch(
    records: bytearray | memoryview, config: LogConfig, topic_partition: str
) -> RecordBatchHeader:
    """Check a produced batch against the topic's rules (LogValidator for AppendOrigin.CLIENT); return its header.

    Args:
        records: exactly one whole v2 batch, as ``validate_produce_records`` left it.
        config: the topic's log config (max.message.bytes, segment.bytes, cleanup.policy).
        topic_partition: ``<topic>-<partition>``, named in the keyless-record errors.

    Raises:
        RecordTooLargeError: the batch exceeds max.message.bytes.
        CorruptRecordError: bad magic, bad CRC-32C, or sizes that run past the records.
        InvalidRecordError: baseOffset not 0, a control batch, a count that contradicts the
            offset delta, or (compacted topics) records the cleaner could not read, or a record
            without a key.
        InvalidTxnStateError: a transactional batch.
        RecordBatchTooLargeError: the batch exceeds segment.bytes.
    """
    header = parse_batch_header(records)
    if header.size > config.max_message_bytes:
        raise RecordTooLargeError(header.size, config.max_message_bytes)
    header = validate_batch(records)
    if header.base_offset != 0:
        raise InvalidRecordError(f"the baseOffset of a produced batch must be 0, not {header.base_offset}")
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control batches")
    if header.is_transactional:
        raise InvalidTxnStateError("transactional batches are not supported (no transaction coordinator)")
    if header.size > config.segment_bytes:
        raise RecordBatchTooLargeError(header.size, config.segment_bytes)
    if config.compact:
        check_records(records, topic_partition, config.max_records_bytes)
    return header


def convert_compression(
    records: bytearray | memoryview, header: RecordBatchHeader, config: LogConfig
) -> tuple[bytearray | memoryview, RecordBatchHeader]:
    """The batch in the topic's compression.type: the same bytes when it already is (or is ``producer``).

    Kafka's LogValidator recompresses when source and target codecs differ, then UnifiedLog
    checks the new batch's size against max.message.bytes again (messageSizeMaybeChanged).

    Raises:
        CorruptRecordError: the records do not decompress, or to more than max_records_bytes.
        RecordTooLargeError: the recompressed batch exceeds max.message.bytes.
        RecordBatchTooLargeError: it exceeds segment.bytes.
    """
    target = config.target_compression
    if target is None or target[0] == header.compression:
        return records, header
    codec, level = target
    converted = recompress_batch(records, header, codec, level, config.max_records_bytes)
    header = parse_batch_header(converted)
    if header.size > config.max_message_bytes:
        raise RecordTooLargeError(header.size, config.max_message_bytes)
    if header.size > config.segment_bytes:
        raise RecordBatchTooLargeError(header.size, config.segment_bytes)
    return converted, header


def check_records(records: bytearray | memoryview, topic_partition: str, max_records_bytes: int) -> None:
    """A compacted topic's batch: every record readable as the cleaner reads it, and keyed.

    The records are read once, by ``scan_record_keys``, the cleaner's own parser: fields, headers,
    offset deltas rising within the batch's lastOffsetDelta, nothing left over, at most
    ``max_records_bytes`` decompressed. Kafka's record iterators throw InvalidRecordException for
    what they cannot read ("Found invalid record structure", "Incorrect declared batch size"), so
    the batch is refused with INVALID_RECORD and no record errors; then keys are checked
    (:func:`check_keys`).

    Raises:
        InvalidRecordError: the records do not read, or some record has a null key.
    """
    try:
        keys = scan_record_keys(records, verify_crc=False, max_records_bytes=max_records_bytes)
    except CorruptRecordError as exc:
        raise InvalidRecordError(f"{exc} in topic partition {topic_partition}") from exc
    check_keys(keys, topic_partition)


def check_keys(keys: Sequence[RecordKey], topic_partition: str) -> None:
    """LogValidator.validateKey: a compacted topic refuses records without a key.

    The message and the per-record errors are Kafka's (RecordValidationException), so Produce
    v8+ clients see the same text.

    Raises:
        InvalidRecordError: some record has a null key; ``errors`` lists each (batch index, message).
    """
    errors: list[tuple[int, str | None]] = [
        (index, f"Compacted topic cannot accept message without key in topic partition {topic_partition}")
        for index, record in enumerate(keys)
        if record.key is None
    ]
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise InvalidRecordError(
            f"One or more records have been rejected due to {len(errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]",
            errors,
        )


def check_timestamps(header: RecordBatchHeader, config: LogConfig, now_ms: int) -> None:
    """LogValidator.validateTimestamp at batch granularity: the first and the largest timestamp.

    Batches stay opaque, so the earliest record is taken to be the first (baseTimestamp).
    LogAppendTime topics overwrite timestamps and skip the check, as Kafka does.

    Raises:
        InvalidTimestampError: maxTimestamp is more than message.timestamp.after.max.ms ahead of
            ``now_ms``, or a non-negative baseTimestamp more than message.timestamp.before.max.ms
            behind it.
    """
    if config.log_append_time:
        return
    if header.max_timestamp > now_ms + config.message_timestamp_after_max_ms:
        raise InvalidTimestampError(
            f"timestamp {header.max_timestamp} is more than {config.message_timestamp_after_max_ms} ms "
            "ahead of the broker's clock (message.timestamp.after.max.ms)"
        )
    if 0 <= header.base_timestamp < now_ms - config.message_timestamp_before_max_ms:
        raise InvalidTimestampError(
            f"timestamp {header.base_timestamp} is more than {config.message_timestamp_before_max_ms} ms "
            "older than the broker's clock (message.timestamp.before.max.ms)"
        )


def stamp_log_append_time(
    records: bytearray | memoryview, header: RecordBatchHeader, config: LogConfig, now_ms: int
) -> int:
    """Under LogAppendTime, stamp the batch with ``now_ms`` in place (re-CRCed); return it, else -1.

    Kafka's LogValidator.assignOffsetsNonCompressed: the timestamp-type bit and maxTimestamp are
    rewritten; CreateTime batches are left untouched.
    """
    if not config.log_append_time:
        return -1
    set_log_append_time(records, 0, header.size, now_ms)
    return now_ms


def check_follower_batches(
    records: bytes | bytearray | memoryview, log_end_offset: int
) -> tuple[list[tuple[int, RecordBatchHeader]], int]:
    """Check a leader's Fetch records before a follower appends any (UnifiedLog.appendAsFollower's checks).

    Leading batches that end below ``log_end_offset`` are already in the log (a re-fetch
    overlap) and skipped unchecked. Every later batch must pass its CRC and offset checks
    (``validate_batch(..., from_client=False)``) and start at or after the end of the one before
    it: a compacted leader's log has gaps where whole batches were cleaned away, but going back
    (or overlapping) is refused. A partial batch at the end is ignored.

    Args:
        records: the Fetch response's records for the partition.
        log_end_offset: the follower's log end offset.

    Returns:
        (position, header) of each batch to append, and how many leading batches were skipped.

    Raises:
        CorruptRecordError: a bad CRC-32C, magic or batch length.
        InvalidRecordError: a negative record count or offset delta.
        UnexpectedAppendOffsetError: a batch starts below the log end offset or its predecessor's end.
    """
    expected = log_end_offset
    accepted: list[tuple[int, RecordBatchHeader]] = []
    skipped = 0
    for position, header in whole_batches(records):
        if not accepted and header.last_offset < expected:
            skipped += 1
            continue
        validate_batch(records, position, from_client=False)
        if header.base_offset < expected:
            raise UnexpectedAppendOffsetError(expected, header.base_offset, header.last_offset)
        accepted.append((position, header))
        expected = header.next_offset
    return accepted, skipped


def whole_batches(records: bytes | bytearray | memoryview) -> Iterator[tuple[int, RecordBatchHeader]]:
    """(position, header) of each whole batch, stopping at a partial one (ByteBufferLogInputStream).

    Raises:
        CorruptRecordError: a batchLength too small for a v2 header.
    """
    position, end = 0, len(records)
    while end - position >= LOG_OVERHEAD:
        length = int.from_bytes(records[position + 8 : position + LOG_OVERHEAD], "big", signed=True)
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {length} at byte {position} is too small")
        if position + LOG_OVERHEAD + length > end:
            return
        yield position, parse_batch_header(records, position)
        position += LOG_OVERHEAD + length
