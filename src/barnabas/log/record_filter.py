"""What compaction keeps of one batch (Kafka's Cleaner.cleanInto filter over MemoryRecords.filterTo).

Rules this module keeps, in Kafka's words where it has them:

- A record above the offset map's ``latest_offset`` is past the mapped section and is kept.
- A keyless record below it is invalid in a compacted log and is dropped.
- Otherwise a record is kept when it holds the latest offset for its key, and either has a value
  or is a tombstone whose batch has no delete horizon yet or one still in the future (KIP-534).
- A batch whose records are all kept is copied byte for byte, unless it holds a tombstone and
  has no delete horizon: then it is rebuilt with horizon ``now + delete.retention.ms`` so the
  tombstone lives that long after this first clean and goes in a later one.
- A batch that lost some records is rebuilt with the same codec and header fields, keeping
  baseOffset and lastOffsetDelta (``protocol.rebuild_batch``).
- A batch that lost every record is dropped, except an idempotent producer's last batch (its
  lastOffset is the producer's last offset) and the batch ending at the round's upper bound: those
  stay as empty batches (BatchRetention.RETAIN_EMPTY), so producer sequences and the log's last
  offset survive.
- Control batches are kept unchanged: barnabas writes no transaction markers, and a marker must
  outlive its transaction's records, which only Kafka's transaction bookkeeping could tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from barnabas.protocol import (
    MAX_RECORDS_BYTES,
    RecordBatchHeader,
    build_empty_batch,
    decode_batch_records,
    rebuild_batch,
    scan_record_keys,
)

from .offset_map import OffsetMap

__all__ = ["CleanerFilter", "FilterStats", "filter_batch"]


@dataclass(frozen=True, slots=True)
class CleanerFilter:
    """The inputs of one cleaning round's retention decisions."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    #: Producer id -> the last offset of its last batch, for every producer the log still tracks.
    active_producers: Mapping[int, int]
    #: The first uncleanable offset: the batch ending there is kept even when emptied.
    upper_bound_offset: int
    #: The most a batch's records may decompress to (LogConfig.max_records_bytes).
    max_records_bytes: int = MAX_RECORDS_BYTES


@dataclass(slots=True)
class FilterStats:
    """Counts for the cleaner's log line and for tests (CleanerStats)."""

    messages_read: int = 0
    messages_retained: int = 0
    bytes_read: int = 0
    bytes_retained: int = 0
    invalid_messages: int = 0
    batches_rebuilt: int = 0


def filter_batch(
    batch: bytes | memoryview, header: RecordBatchHeader, rules: CleanerFilter, stats: FilterStats
) -> bytes | memoryview | None:
    """What the cleaned segment gets for ``batch``: the same bytes, a rebuilt batch, or None.

    The caller has checked the batch's CRC-32C.

    Raises:
        CorruptRecordError: the records do not decode within ``rules.max_records_bytes`` (offsets
            outside the batch's range included); the scan and the decode refuse the same batches, so
            a batch whose keys were read is never refused half-way through its rebuild.
    """
    stats.bytes_read += header.size
    if header.is_control:
        stats.messages_read += header.records_count
        stats.messages_retained += header.records_count
        stats.bytes_retained += header.size
        return batch
    keys = scan_record_keys(batch, verify_crc=False, max_records_bytes=rules.max_records_bytes)
    stats.messages_read += len(keys)
    offset_map = rules.offset_map
    latest_mapped = offset_map.latest_offset
    horizon = header.delete_horizon_ms
    retain_deletes = horizon is None or rules.now_ms < horizon
    kept: list[bool] = []
    contains_tombstones = False
    for record in keys:
        if record.offset > latest_mapped:
            keep = True
        elif record.key is None:
            stats.invalid_messages += 1
            keep = False
        else:
            keep = record.offset >= offset_map.get(record.key) and (record.has_value or retain_deletes)
        kept.append(keep)
        if keep and not record.has_value:
            contains_tombstones = True
    retained = sum(kept)
    stats.messages_retained += retained

    if retained:
        set_horizon = contains_tombstones and horizon is None
        if retained == len(keys) and not set_horizon:
            stats.bytes_retained += header.size
            return batch
        records = decode_batch_records(batch, verify_crc=False, max_records_bytes=rules.max_records_bytes)
        new_horizon = rules.now_ms + rules.delete_retention_ms if set_horizon else horizon
        rebuilt = rebuild_batch(
            header, [r for r, keep in zip(records, kept, strict=True) if keep], delete_horizon_ms=new_horizon
        )
        stats.batches_rebuilt += 1
        stats.bytes_retained += len(rebuilt)
        return rebuilt
    last_of_producer = header.has_producer_id and rules.active_producers.get(header.producer_id) == header.last_offset
    if last_of_producer or header.next_offset == rules.upper_bound_offset:
        empty = build_empty_batch(header)
        stats.batches_rebuilt += 1
        stats.bytes_retained += len(empty)
        return empty
    return None
