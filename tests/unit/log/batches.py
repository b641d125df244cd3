"""Real RecordBatch v2 bytes for the log tests, built by kafka-python as an independent oracle."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

#: A plausible "now" for tests: 2023-11-14T22:13:20Z.
T0 = 1_700_000_000_000

_ATTRIBUTES_OFFSET = 21
_CRC_OFFSET = 17


def make_batch(
    count: int = 1,
    *,
    timestamp: int = T0,
    timestamps: list[int] | None = None,
    value_size: int = 16,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    tag: str = "",
) -> bytearray:
    """A produce-ready batch of ``count`` records (baseOffset 0, as a client sends it)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    stamps = timestamps if timestamps is not None else [timestamp] * count
    assert len(stamps) == count
    for i, ts in enumerate(stamps):
        value = f"{tag}{i}".encode().ljust(value_size, b".")
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytearray(builder.build())


def idempotent_batch(producer_id: int, epoch: int, sequence: int, count: int = 1, *, timestamp: int = T0) -> bytearray:
    """A batch from an idempotent producer."""
    return make_batch(count, timestamp=timestamp, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def set_attribute_bits(batch: bytearray, bits: int) -> bytearray:
    """Set attribute bits (e.g. the control flag) and recompute the CRC-32C, so the batch stays valid."""
    (attributes,) = struct.unpack_from(">h", batch, _ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, _ATTRIBUTES_OFFSET, attributes | bits)
    struct.pack_into(">I", batch, _CRC_OFFSET, crc32c.crc32c(bytes(batch[_ATTRIBUTES_OFFSET:])))
    return batch


@dataclass(frozen=True)
class DecodedRecord:
    offset: int
    timestamp: int
    value: bytes


@dataclass(frozen=True)
class DecodedBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    max_timestamp: int
    timestamp_type: int
    crc_ok: bool
    records: list[DecodedRecord]


def decode(data: bytes) -> list[DecodedBatch]:
    """Every whole batch in ``data``, decoded by kafka-python (checks our framing and CRCs)."""
    result = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        crc_ok = batch.validate_crc()
        decoded = [DecodedRecord(r.offset, r.timestamp, bytes(r.value)) for r in batch]
        result.append(
            DecodedBatch(
                base_offset=batch.base_offset,
                last_offset=batch.base_offset + batch.last_offset_delta,
                leader_epoch=batch.leader_epoch,
                max_timestamp=batch.max_timestamp,
                timestamp_type=batch.timestamp_type,
                crc_ok=crc_ok,
                records=decoded,
            )
        )
    return result


def offsets(data: bytes) -> list[int]:
    """Every record offset in ``data``."""
    return [r.offset for b in decode(data) for r in b.records]
