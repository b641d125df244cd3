"""RecordBatch validation and the record decoders, on a Produce's or a follower's records.

Input: one byte of flags, two bytes of a follower's log end offset, then the records bytes.
Flag bit 0 recomputes the CRC-32C of every whole batch first, so mutations reach what the CRC
guards. The records go through the header checks (``validate_batch`` both ways, the produce and
follower checks of ``validator``, ``iter_batch_headers``) and through both record decoders:

- ``scan_record_keys`` (compaction's offset map and the compacted-topic checks) and
  ``decode_batch_records`` (compaction's rebuild) must accept exactly the same batches and agree on
  every record: a batch the scan reads and the decode refuses stops compaction of its partition;
- the records of a batch re-encoded under its header (``rebuild_batch``, what compaction writes)
  must decode to the same records; the decoders only return records within their batch's offsets,
  so every decoded batch can be rebuilt.

Documented: CorruptRecordError and InvalidRecordError (KafkaRecordError) from every check and
decoder, and UnexpectedAppendOffsetError from the follower check.
"""

from __future__ import annotations

import struct

import crc32c

from barnabas.log.errors import UnexpectedAppendOffsetError
from barnabas.log.validator import check_follower_batches, whole_batches
from barnabas.protocol import (
    KafkaRecordError,
    Record,
    decode_batch_records,
    iter_batch_headers,
    parse_batch_header,
    rebuild_batch,
    scan_record_keys,
    validate_batch,
    validate_produce_records,
)
from tests.fuzz.harness import Target, attempt

_LENGTH = struct.Struct(">i")


def fix_crcs(records: bytearray) -> None:
    """Recompute the CRC-32C of every whole batch in ``records`` (by their batchLength fields)."""
    pos = 0
    while len(records) - pos >= 61:
        (length,) = _LENGTH.unpack_from(records, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(records):
            return
        struct.pack_into(">I", records, pos + 17, crc32c.crc32c(bytes(records[pos + 21 : end])))
        pos = end


def check_decoders(batch: bytes | bytearray | memoryview) -> list[Record] | None:
    """Both decoders on the batch at the start of ``batch``; the records, or None if refused."""
    keys = attempt(lambda: scan_record_keys(batch), KafkaRecordError)
    records = attempt(lambda: decode_batch_records(batch), KafkaRecordError)
    assert (keys is None) == (records is None), (
        f"only {'scan_record_keys' if records is None else 'decode_batch_records'} reads this batch"
    )
    if records is None or keys is None:
        return None
    assert [(k.offset, k.key, k.has_value) for k in keys] == [
        (r.offset, r.key, r.value is not None) for r in records
    ], "scan_record_keys and decode_batch_records read different records"
    return records


def check_rebuild(batch: bytes | bytearray | memoryview, records: list[Record]) -> None:
    header = parse_batch_header(batch)
    if not records:
        return
    rebuilt = rebuild_batch(header, records, delete_horizon_ms=None)
    assert decode_batch_records(rebuilt) == records, "a rebuilt batch decodes to other records"


def run(data: bytes) -> None:
    if len(data) < 3:
        return
    records = bytearray(data[3:])
    if data[0] & 1:
        fix_crcs(records)
    log_end_offset = int.from_bytes(data[1:3], "big")
    for _ in iter_batch_headers(records):
        pass
    attempt(lambda: list(whole_batches(records)), KafkaRecordError)
    attempt(lambda: check_follower_batches(records, log_end_offset), KafkaRecordError, UnexpectedAppendOffsetError)
    attempt(lambda: validate_produce_records(records), KafkaRecordError)
    for from_client in (True, False):
        attempt(lambda: validate_batch(records, from_client=from_client), KafkaRecordError)  # noqa: B023
    decoded = check_decoders(records)
    if decoded is not None:
        check_rebuild(records, decoded)


TARGET = Target("record_batch", run, __doc__ or "", max_len=8192)
