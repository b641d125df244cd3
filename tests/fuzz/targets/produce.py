"""A Produce body through the broker's checks: the hand-written decoder, then each partition's records.

Input: one byte picks the version (3-11), one byte of flags, then the body after the request header.
Each partition's records go through what the Produce handler and the log run before appending:
``validate_produce_records`` (one whole magic-2 batch), ``validate_client_batch`` for a plain and a
compacted topic (size, CRC, client rules, records the cleaner can read, keyless records),
``check_timestamps`` and, under LogAppendTime, ``stamp_log_append_time``, after which the batch must
still pass its CRC. A batch a compacted topic accepts must then read with both of the cleaner's
parsers (``scan_record_keys`` for its offset map, ``decode_batch_records`` to rebuild it), under the
topic's bound: a client batch that one of them refuses would stop compaction of its partition.

Flag bit 0 recomputes each batch's CRC-32C first, so mutations reach the rules behind the CRC.

Documented: RemoteProtocolError from the decoder; KafkaRecordError (CorruptRecordError,
InvalidRecordError) and the log's LogError leaves (RecordTooLargeError, RecordBatchTooLargeError,
InvalidTxnStateError, InvalidTimestampError) from the checks.
"""

from __future__ import annotations

import struct

import crc32c

from barnabas.log import LogConfig
from barnabas.log.errors import LogError
from barnabas.log.validator import check_timestamps, stamp_log_append_time, validate_client_batch
from barnabas.protocol import (
    KafkaRecordError,
    RemoteProtocolError,
    decode_batch_records,
    scan_record_keys,
    validate_batch,
    validate_produce_records,
)
from barnabas.protocol._produce_request import decode_produce_request
from tests.fuzz.harness import Target, attempt

_NOW_MS = 1_700_000_000_000
_PLAIN = LogConfig(segment_bytes=1 << 20)
_COMPACT = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", message_timestamp_type="LogAppendTime")


def fix_crc(batch: bytearray) -> None:
    """Recompute the CRC-32C of the batch at the start of ``batch``, when its header is whole."""
    if len(batch) >= 61:
        (length,) = struct.unpack_from(">i", batch, 8)
        end = min(len(batch), max(length + 12, 21))
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:end])))


def _check_records(records: memoryview, fix: bool) -> None:
    batch = bytearray(records)
    if fix:
        fix_crc(batch)
    size = attempt(lambda: validate_produce_records(batch), KafkaRecordError)
    if size is None:
        return
    for config in (_PLAIN, _COMPACT):
        _append_checks(bytearray(batch[:size]), config)


def _append_checks(batch: bytearray, config: LogConfig) -> None:
    """What the log checks before it appends a client's batch, and its LogAppendTime stamp."""
    header = attempt(lambda: validate_client_batch(batch, config, "t-0"), KafkaRecordError, LogError)
    if header is None:
        return
    if config.compact:  # what the cleaner will read, it can read
        keys = scan_record_keys(batch, verify_crc=False, max_records_bytes=config.max_records_bytes)
        records = decode_batch_records(batch, verify_crc=False, max_records_bytes=config.max_records_bytes)
        assert [k.offset for k in keys] == [r.offset for r in records] == list(range(header.records_count))
    if attempt(lambda: check_timestamps(header, config, _NOW_MS), LogError) is None and not config.log_append_time:
        return
    stamp_log_append_time(batch, header, config, _NOW_MS)
    validate_batch(batch)  # a stamped batch must still be a valid one


def run(data: bytes) -> None:
    if len(data) < 2:
        return
    version, fix = 3 + data[0] % 9, bool(data[1] & 1)
    body = attempt(lambda: decode_produce_request(data, 2, version), RemoteProtocolError)
    if body is None:
        return
    for topic in body.topic_data:
        for partition in topic.partition_data:
            if partition.records is not None:
                _check_records(partition.records, fix)


TARGET = Target("produce", run, __doc__ or "", max_len=8192)
