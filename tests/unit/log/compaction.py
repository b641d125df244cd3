"""Helpers for the compaction tests: keyed batches in, decoded records out, and a reference model."""

from __future__ import annotations

from collections.abc import Sequence

from barnabas.log import PartitionLog
from barnabas.protocol import (
    Compression,
    NewRecord,
    Record,
    RecordBatchHeader,
    build_record_batch,
    decode_batch_records,
    iter_batch_headers,
)

from .batches import T0

KeyValue = tuple[bytes | None, bytes | None]


def produce(
    log: PartitionLog,
    records: Sequence[KeyValue],
    *,
    now_ms: int = T0,
    timestamp: int | None = None,
    compression: int = Compression.NONE,
    producer: tuple[int, int, int] | None = None,
    leader_epoch: int = 0,
) -> int:
    """Append one client batch of (key, value) records as the leader; return its base offset."""
    pid, epoch, sequence = producer if producer is not None else (-1, -1, -1)
    stamp = now_ms if timestamp is None else timestamp
    batch = build_record_batch(
        [NewRecord(k, v, (), stamp) for k, v in records],
        base_timestamp_ms=stamp,
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    return log.append_as_leader(bytearray(batch), leader_epoch, now_ms).base_offset


def read_batches(log: PartitionLog) -> list[tuple[RecordBatchHeader, bytes]]:
    """Every batch from the log start to the log end, following gaps as a consumer would."""
    found: list[tuple[RecordBatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        data = bytes(result.records)
        if not data:
            break
        for position, header in iter_batch_headers(data):
            found.append((header, data[position : position + header.size]))
        offset = result.next_offset
    return found


def read_records(log: PartitionLog) -> list[Record]:
    """Every record in the log, decoded (CRC-checked) by the codec."""
    return [record for _, batch in read_batches(log) for record in decode_batch_records(batch)]


def triples(records: Sequence[Record]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records]


def latest_per_key(
    records: Sequence[tuple[int, bytes | None, bytes | None]], end_offset: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """The reference model of one pass from offset 0: below ``end_offset`` only each key's last record."""
    last: dict[bytes | None, int] = {}
    for offset, key, _ in records:
        if offset < end_offset:
            last[key] = offset
    return [r for r in records if r[0] >= end_offset or (r[1] is not None and last[r[1]] == r[0])]
