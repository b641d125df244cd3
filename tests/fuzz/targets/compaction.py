"""The log cleaner's record parsing: ``filter_batch`` on one batch, as a cleaning pass runs it.

Input: one byte of flags, one byte that moves keys' latest offsets, then one batch. Flag bit 0
recomputes the batch's CRC-32C (the cleaner CRC-checks every batch before filtering it); the batch
must then pass ``validate_batch(..., from_client=False)``, the check every batch in a log passed.
The offset map is built from the batch's own keys by ``scan_record_keys``, as the cleaner's first
pass builds it, with some keys given a later offset so that their records are dropped; flags pick
whether the batch has a delete horizon due, whether its producer is still active, and where the
round's upper bound lies.

What comes back must be what a cleaned segment may hold: None, the batch itself, or a batch that
passes ``validate_batch(..., from_client=False)`` and holds a subset of the original records,
each unchanged. Documented: CorruptRecordError from ``scan_record_keys`` (the records do not
decode). Once the scan has read a batch, ``filter_batch`` may not refuse it: the scan and the
rebuild's decode accept the same batches, or one batch would stop compaction of its partition.
"""

from __future__ import annotations

from barnabas.log.offset_map import OffsetMap
from barnabas.log.record_filter import CleanerFilter, FilterStats, filter_batch
from barnabas.protocol import (
    CorruptRecordError,
    KafkaRecordError,
    decode_batch_records,
    scan_record_keys,
    validate_batch,
)
from tests.fuzz.harness import Target, attempt
from tests.fuzz.targets.produce import fix_crc

_NOW_MS = 1_700_000_000_000
_DELETE_RETENTION_MS = 86_400_000


def run(data: bytes) -> None:
    if len(data) < 2:
        return
    flags, moved = data[0], data[1]
    batch = bytearray(data[2:])
    if flags & 1:
        fix_crc(batch)
    header = attempt(lambda: validate_batch(batch, from_client=False), KafkaRecordError)
    if header is None:
        return
    batch = batch[: header.size]
    keys = attempt(lambda: scan_record_keys(batch, verify_crc=False), CorruptRecordError)
    if keys is None:
        return
    offset_map = OffsetMap(1000)
    for index, record in enumerate(keys):
        if record.key is not None:
            later = (moved >> (index % 8)) & 1  # this key is written again after the batch
            offset_map.put(record.key, record.offset + later * (header.last_offset_delta + 1))
    offset_map.update_latest_offset(header.last_offset if flags & 2 else header.base_offset)
    rules = CleanerFilter(
        offset_map,
        now_ms=_NOW_MS + (_DELETE_RETENTION_MS * 2 if flags & 4 else 0),
        delete_retention_ms=_DELETE_RETENTION_MS,
        active_producers={header.producer_id: header.last_offset} if flags & 8 else {},
        upper_bound_offset=header.next_offset if flags & 16 else header.next_offset + 1,
    )
    stats = FilterStats()
    kept = filter_batch(memoryview(batch), header, rules, stats)
    assert stats.messages_retained <= stats.messages_read and stats.bytes_retained <= stats.bytes_read + 61
    if kept is None or bytes(kept) == bytes(batch):
        return
    new_header = validate_batch(kept, from_client=False)
    assert (new_header.base_offset, new_header.last_offset) == (header.base_offset, header.last_offset)
    cleaned = [(r.offset, r.key, r.value, r.headers) for r in decode_batch_records(kept)]
    if not cleaned:
        return  # every record went: an empty batch keeps the offsets (and the producer's sequence)
    original = {(r.offset, r.key, r.value, r.headers) for r in decode_batch_records(batch, verify_crc=False)}
    assert set(cleaned) <= original, "a cleaned batch holds a record the original did not"


TARGET = Target("compaction", run, __doc__ or "", max_len=8192)
