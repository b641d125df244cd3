"""RecordBatch v2 (magic 2) as an opaque byte range: read the header, validate, patch.

Rules this module keeps (Kafka's DefaultRecordBatch.java is the reference):

- The broker never decodes individual records here. Only the fixed 61-byte header is read.
- CRC-32C covers bytes [21, end of batch). baseOffset (bytes 0-8) and partitionLeaderEpoch
  (bytes 12-16) are outside it, so patching them never needs a new CRC.
- Setting LogAppendTime rewrites attributes and maxTimestamp, which are under the CRC, so that
  one path recomputes it.
- A client's batch must hold exactly lastOffsetDelta + 1 records. Batches the log wrote itself
  (compaction keeps a batch's offset range while dropping records, and may keep a producer's
  last batch with none, as Kafka's MemoryRecords.filterTo does) only need a count and a delta
  that are not negative: ``validate_batch(..., from_client=False)``, Kafka's non-CLIENT origins.
- Every function takes a buffer and an offset; none copies the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from ._errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "BATCH_HEADER_SIZE",
    "DELETE_HORIZON_FLAG",
    "LOG_OVERHEAD",
    "RecordBatchHeader",
    "batch_crc",
    "iter_batch_headers",
    "parse_batch_header",
    "patch_batch",
    "set_codec",
    "set_log_append_time",
    "validate_batch",
    "validate_produce_records",
]

#: Bytes before the records array: everything up to and including recordsCount.
BATCH_HEADER_SIZE = 61
#: baseOffset (8) + batchLength (4): the bytes not counted by batchLength.
LOG_OVERHEAD = 12
_CRC_START = 21
_MAGIC_OFFSET = 16

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
#: KIP-534: baseTimestamp holds the time after which the cleaner may drop the batch's tombstones.
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1

#: Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batchLength any magic allows.
MIN_BATCH_LENGTH = 14
#: Bytes up to and including the magic byte.
HEADER_SIZE_UP_TO_MAGIC = 17

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_TIMESTAMP = struct.Struct(">q")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_LENGTH = struct.Struct(">i")


class RecordBatchHeader(NamedTuple):
    """The fixed fields of a v2 batch, in wire order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the batch occupies on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534's delete horizon (the baseTimestamp when the flag is set), else None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def has_producer_id(self) -> bool:
        # aiokafka sends baseSequence 0 and kafkajs epoch 0 with pid -1, so the pid alone
        # decides whether a batch is idempotent (protocol.md, RecordBatch table).
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record, wrapping at INT32_MAX as Kafka does."""
        if self.base_sequence < 0:
            return self.base_sequence
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_batch_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> RecordBatchHeader:
    """Read the 61-byte header at ``offset``.

    Raises:
        CorruptRecordError: fewer than 61 bytes remain.
    """
    if len(buf) - offset < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch header is truncated")
    return RecordBatchHeader._make(_HEADER.unpack_from(buf, offset))


def batch_crc(buf: bytes | bytearray | memoryview, offset: int, size: int) -> int:
    """CRC-32C over the CRC-covered part of the batch at ``offset`` of ``size`` bytes."""
    view = memoryview(buf)
    return int(crc32c.crc32c(view[offset + _CRC_START : offset + size]))


def validate_batch(
    buf: bytes | bytearray | memoryview, offset: int = 0, *, from_client: bool = True
) -> RecordBatchHeader:
    """Check one batch as a leader must before appending it; return its header.

    Checks magic, sizes, CRC-32C and the count/delta relation. It does not check producer
    state or the baseOffset a client must send (the caller knows whether it is a leader).

    Args:
        buf: the buffer holding the batch.
        offset: where the batch starts in ``buf``.
        from_client: require recordsCount == lastOffsetDelta + 1 > 0 (LogValidator's CLIENT
            rule); False for replicated or recovered batches, which compaction may have thinned.

    Raises:
        CorruptRecordError: bad CRC, bad magic, or the batch runs past the buffer.
        InvalidRecordError: the header contradicts itself (count vs delta, control batch).
    """
    header = parse_batch_header(buf, offset)
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    if offset + header.size > len(buf):
        raise CorruptRecordError("record batch runs past the end of the records")
    if batch_crc(buf, offset, header.size) != header.crc:
        raise CorruptRecordError("record batch CRC-32C mismatch")
    if not from_client:
        if header.records_count < 0 or header.last_offset_delta < 0:
            raise InvalidRecordError(
                f"record count {header.records_count} or last offset delta {header.last_offset_delta} is negative"
            )
    elif header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise InvalidRecordError(
            f"record count {header.records_count} does not match last offset delta {header.last_offset_delta}"
        )
    return header


def _next_batch_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Size of the complete batch at ``pos``, or None if there is none (Kafka's ByteBufferLogInputStream).

    Raises:
        CorruptRecordError: a batchLength below 14 or a magic outside 0..2.
    """
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _LENGTH.unpack_from(buf, pos + 8)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record size {length} is less than the minimum record overhead ({MIN_BATCH_LENGTH})")
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = int.from_bytes(buf[pos + _MAGIC_OFFSET : pos + _MAGIC_OFFSET + 1], "big", signed=True)
    if not 0 <= magic <= 2:
        raise CorruptRecordError(f"invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    return size if remaining >= size else None


def validate_produce_records(buf: bytes | bytearray | memoryview) -> int:
    """Check a Produce partition's records as Kafka's ProduceRequest.validateRecords does; return the batch size.

    The records must hold exactly one complete magic-2 batch. Trailing bytes too short to be a
    batch are ignored (Kafka's batch iterator never yields them); the caller appends only the
    returned number of bytes.

    Raises:
        InvalidRecordError: no complete batch, a magic other than 2, or more than one batch.
        CorruptRecordError: a batchLength below 14 or a magic outside 0..2.
    """
    size = _next_batch_size(buf, 0)
    if size is None:
        raise InvalidRecordError("produce requests must have at least one record batch per partition")
    if buf[_MAGIC_OFFSET] != 2:
        raise InvalidRecordError("produce requests are only allowed to contain record batches with magic version 2")
    if _next_batch_size(buf, size) is not None:
        raise InvalidRecordError("produce requests are only allowed to contain exactly one record batch per partition")
    return size


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield (position, header) for each complete batch in ``buf[offset:end]``.

    Stops at the first incomplete batch; does not check CRCs (use validate_batch for that).
    """
    limit = len(buf) if end is None else end
    pos = offset
    while limit - pos >= BATCH_HEADER_SIZE:
        header = parse_batch_header(buf, pos)
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + header.size > limit:
            return
        yield pos, header
        pos += header.size


def patch_batch(buf: bytearray | memoryview, offset: int, base_offset: int, leader_epoch: int) -> None:
    """Write the broker-assigned baseOffset and partitionLeaderEpoch (neither under the CRC)."""
    _BASE_OFFSET.pack_into(buf, offset, base_offset)
    _EPOCH.pack_into(buf, offset + 12, leader_epoch)


def set_codec(buf: bytearray | memoryview, codec: int) -> None:
    """Mark the batch filling ``buf`` as compressed with ``codec``: its codec bits and batchLength, then re-CRC.

    For a batch whose records section was just compressed again (a topic's compression.type).
    """
    (attributes,) = _ATTRIBUTES.unpack_from(buf, _CRC_START)
    _ATTRIBUTES.pack_into(buf, _CRC_START, (attributes & ~COMPRESSION_MASK) | codec)
    _LENGTH.pack_into(buf, 8, len(buf) - LOG_OVERHEAD)
    _CRC.pack_into(buf, 17, batch_crc(buf, 0, len(buf)))


def set_log_append_time(buf: bytearray | memoryview, offset: int, size: int, now_ms: int) -> None:
    """Stamp a batch with LogAppendTime: set the timestamp-type bit and maxTimestamp, then re-CRC.

    Kafka (LogValidator.assignOffsetsNonCompressed) writes only maxTimestamp; consumers use it as
    every record's timestamp when the bit is set.
    """
    (attributes,) = _ATTRIBUTES.unpack_from(buf, offset + 21)
    _ATTRIBUTES.pack_into(buf, offset + 21, attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(buf, offset + 35, now_ms)
    _CRC.pack_into(buf, offset + 17, batch_crc(buf, offset, size))
