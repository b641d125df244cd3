"""RecordBatch v2 records: decode a whole batch into records, and build batches.

The hot path keeps batches opaque (_record_batch.py). This module is for the few places that
must look inside one (ListOffsets by timestamp within a batch, compaction and the keyless-record
check of compacted topics) and for tests and benchmarks that need real batches. Kafka's
DefaultRecordBatch.java and DefaultRecord.java are the reference.

Rules this module keeps:

- Only magic 2. A batch is decoded whole; a failure anywhere (bad CRC, codec error, a field
  running past its bounds, a record count that does not match) raises CorruptRecordError, never
  a partial list. A record count or a record's header count that its bytes cannot hold (a record
  takes at least 7 bytes, a header 2) is refused before any record is read.
- Both decoders check the same things (the cleaner maps keys with the scan and rebuilds with the
  full decode, so a batch one accepts and the other refuses would stop compaction): every field
  and header of every record, each record ending where its length says, no bytes after the last
  record (DefaultRecordBatch's "records still remaining"), and offset deltas that rise strictly
  within ``[0, lastOffsetDelta]`` (what MemoryRecordsBuilder writes; a client batch, whose count
  is lastOffsetDelta + 1, must then number its records 0..n-1, Kafka's expectedInnerOffset).
- Record fields are zigzag varints; a length of -1 is null (keys, values, header values);
  header keys are never null. They are UTF-8 for every client Kafka ships, but Kafka reads them
  leniently (new String(bytes, UTF_8)), so any bytes are accepted and decoded with
  ``surrogateescape``: a rebuilt batch writes the same bytes back.
- A record's offset is baseOffset + offsetDelta. Its timestamp is baseTimestamp +
  timestampDelta, except that with the LogAppendTime bit every record takes maxTimestamp
  (the broker stamps only maxTimestamp, see _record_batch.set_log_append_time).
- A compressed records section may decompress to at most ``max_records_bytes`` (by default
  :data:`MAX_RECORDS_BYTES`). Kafka streams records out of the codec one at a time and stops at the
  declared count; barnabas decompresses a batch at once, into fixed buffers that grow up to the
  bound and are mapped lazily (pages are only touched as output arrives): a few KB of zstd that
  would expand to hundreds of MB cost at most the bound, and are refused.
- Codecs come from cramjam. Snappy is read both raw (librdkafka) and in xerial blocks (the Java
  client's ``\\x82SNAPPY\\x00`` framing) and written raw, which every client reads; a raw stream
  declaring more than it could expand to, or more than the bound, is refused before cramjam
  allocates for it. LZ4 is the frame format with independent blocks, because Kafka's
  Lz4BlockInputStream decompresses each block on its own. The pre-0.10 broken-checksum LZ4 framing
  (KAFKA-3160) only ever applied to magic 0/1 message sets, so it does not arise here.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Final, NamedTuple, TypeAlias

import cramjam
import crc32c

from ._errors import CorruptRecordError, LocalProtocolError
from ._record_batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    batch_crc,
    parse_batch_header,
    set_codec,
)
from ._wire import varint, varlong

__all__ = [
    "MAX_RECORDS_BYTES",
    "RECORDS_EXPANSION",
    "Compression",
    "NewRecord",
    "Record",
    "RecordHeader",
    "RecordInput",
    "RecordKey",
    "build_empty_batch",
    "build_record_batch",
    "decode_batch_records",
    "rebuild_batch",
    "recompress_batch",
    "scan_record_keys",
]

#: A record header: UTF-8 key, nullable value.
RecordHeader: TypeAlias = tuple[str, bytes | None]


class Compression(IntEnum):
    """The codec in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class Record(NamedTuple):
    """One decoded record, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...]


class NewRecord(NamedTuple):
    """A record to put in a batch; ``timestamp_ms`` None means the batch's base timestamp."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[RecordHeader] = ()
    timestamp_ms: int | None = None


#: What build_record_batch accepts per record: (key, value), (key, value, headers) or NewRecord.
RecordInput: TypeAlias = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[RecordHeader]] | NewRecord
)

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic (8) + version int32 + compatible-version int32
#: The most a snappy element expands: a copy of 64 bytes takes 3 (snappy's format_description.txt).
_SNAPPY_MAX_EXPANSION = 22
_BLOCK_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header, as in _record_batch
_MAX_VARINT_SHIFT = 63
#: Kafka's default LZ4 level, the one it compresses with lz4-java's fast compressor, and the LZ4
#: frame level of that compressor (cramjam's own default, 4, is high compression: 9 times slower).
_LZ4_FAST_LEVEL, _LZ4_FRAME_FAST = 9, 0
#: The smallest record (DefaultRecord): its length, attributes, timestamp and offset deltas, key and
#: value lengths and header count, one byte each.
_MIN_RECORD_SIZE = 7
#: The smallest record header: its key length and value length, one byte each.
_MIN_HEADER_SIZE = 2
#: How many times max.message.bytes a compressed batch's records may decompress to. Kafka sets no
#: such bound (it streams); 64 leaves room for any real data (text compresses 5-20 times) while a
#: batch of zeros, which zstd shrinks 30,000 times, is refused.
RECORDS_EXPANSION = 64
#: The bound when the caller names none: RECORDS_EXPANSION times Kafka's default max.message.bytes.
MAX_RECORDS_BYTES = RECORDS_EXPANSION * 1048588
#: A compressed batch's first decompression buffer, as a multiple of its size, and the least one.
_FIRST_GUESS = 16
_MIN_BUFFER = 1 << 16
#: How much larger each further buffer is, until the bound.
_GROWTH = 4


# --- decoding -------------------------------------------------------------------------------


def _xerial_snappy_decompress(data: memoryview, limit: int) -> bytes:
    """Undo the Java client's xerial block framing: a 16-byte header, then int32-sized blocks."""
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = _BLOCK_SIZE.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError("xerial snappy block runs past the batch")
        out += _snappy_raw(data[pos : pos + size], limit - len(out))
        pos += size
    return bytes(out)


def _snappy_raw(data: memoryview, limit: int) -> memoryview:
    """Decompress raw snappy, once its declared length is one ``data`` can hold and ``limit`` allows.

    Raw snappy starts with the uncompressed length (a varint) and cramjam allocates that much before
    reading on: 4 GiB declared in a few bytes, refused by the allocator, aborts the process. No
    snappy element expands more than 64 bytes from 3, so a valid stream never declares more than
    ``_SNAPPY_MAX_EXPANSION`` times its own size.

    Raises:
        CorruptRecordError: the declared length is out of reach, or the data does not decompress.
    """
    declared = shift = 0
    for index, byte in enumerate(data[:5]):
        declared |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if declared > _SNAPPY_MAX_EXPANSION * (len(data) - index - 1):
                raise CorruptRecordError(f"snappy data of {len(data)} bytes declares {declared} bytes uncompressed")
            if declared > limit:
                raise CorruptRecordError(
                    f"snappy records declare {declared} bytes; a batch may decompress to at most {limit} bytes"
                )
            return memoryview(cramjam.snappy.decompress_raw(data))
    raise CorruptRecordError("snappy data does not start with its length")


def _bounded(decompress_into: Callable[[memoryview, mmap.mmap], int], data: memoryview, limit: int) -> memoryview:
    """Decompress into anonymous memory that the kernel maps in only as output arrives, at most ``limit`` bytes.

    cramjam writes into a fixed buffer and fails ("failed to write whole buffer") once it is full,
    so no stream takes more than the buffer, however much it would expand to. The first buffer is
    ``_FIRST_GUESS`` times the input (one attempt for real batches); a stream that fails is tried
    again in one ``_GROWTH`` times larger, up to ``limit``, where its error stands. The address
    space reserved follows the output, not the bound, and the view returned keeps its mapping.
    """
    size = min(limit, max(len(data) * _FIRST_GUESS, _MIN_BUFFER))
    while True:
        out = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE)
        try:
            return memoryview(out)[: decompress_into(data, out)]
        except Exception:  # a full buffer, or data that does not decompress: the last attempt says which
            if size >= limit:
                raise
        out.close()
        size = min(limit, size * _GROWTH)


_STREAMS: Final[dict[int, Callable[[memoryview, mmap.mmap], int]]] = {
    Compression.GZIP: cramjam.gzip.decompress_into,
    Compression.LZ4: cramjam.lz4.decompress_into,
    Compression.ZSTD: cramjam.zstd.decompress_into,
}


def _decompress(codec: int, data: memoryview, limit: int) -> bytes | memoryview:
    """Return the uncompressed records section of a batch, at most ``limit`` bytes of it.

    Raises:
        CorruptRecordError: an unknown codec, data that does not decompress, or more than ``limit`` bytes.
    """
    if codec == Compression.NONE:
        return data
    try:
        if codec == Compression.SNAPPY:
            if data[: len(_XERIAL_MAGIC)].tobytes() == _XERIAL_MAGIC:
                return _xerial_snappy_decompress(data, limit)
            return _snappy_raw(data, limit)
        if codec in _STREAMS:
            return _bounded(_STREAMS[codec], data, limit)
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam.DecompressionError (a full buffer too), or a codec's own complaint
        raise CorruptRecordError(
            f"cannot decompress {Compression(codec).name} records to at most {limit} bytes: {exc}"
        ) from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read one zigzag varint/varlong at ``pos``; return (value, next position).

    Raises IndexError when the buffer ends inside the varint (the caller maps it).
    """
    byte = buf[pos]
    pos += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos
    raw = byte & 0x7F
    shift = 7
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise CorruptRecordError("varint is longer than 10 bytes")


def _read_nullable(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    """Read a varint-length nullable byte string (-1 = null)."""
    size, pos = _read_varint(buf, pos)
    if size < 0:
        if size != -1:
            raise CorruptRecordError(f"invalid negative length {size}")
        return None, pos
    if pos + size > end:
        raise CorruptRecordError("record field runs past the end of the batch")
    return bytes(buf[pos : pos + size]), pos + size


def _read_headers(data: bytes | memoryview, pos: int, record_end: int, into: list[RecordHeader] | None) -> int:
    """Check the header count and every header of a record from ``pos``; return where they end.

    Both decoders call this, the scan with ``into`` None (nothing is copied), so they refuse the
    same headers (DefaultRecord.readHeaders).

    Raises:
        CorruptRecordError: a negative count, more headers than the record's bytes can hold, or a
            header whose lengths run past the record.
        IndexError: the record ends inside a varint (the caller maps it).
    """
    count, pos = _read_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"invalid record header count {count}")
    if count * _MIN_HEADER_SIZE > record_end - pos:
        raise CorruptRecordError(f"a record's {record_end - pos} remaining bytes cannot hold {count} headers")
    for _ in range(count):
        key_size, pos = _read_varint(data, pos)
        if key_size < 0 or pos + key_size > record_end:
            raise CorruptRecordError(f"invalid record header key length {key_size}")
        key_start, pos = pos, pos + key_size
        value_size, pos = _read_varint(data, pos)
        if value_size < -1 or pos + max(value_size, 0) > record_end:
            raise CorruptRecordError(f"invalid record header value length {value_size}")
        if into is not None:
            value = bytes(data[pos : pos + value_size]) if value_size >= 0 else None
            into.append((bytes(data[key_start : key_start + key_size]).decode("utf-8", "surrogateescape"), value))
        pos += max(value_size, 0)
    return pos


def _check_offset_delta(offset_delta: int, previous: int, last_offset_delta: int) -> None:
    """Offset deltas rise strictly within ``[0, lastOffsetDelta]`` (see the module's rules).

    Raises:
        CorruptRecordError: this one does not.
    """
    if not previous < offset_delta <= last_offset_delta:
        raise CorruptRecordError(
            f"record offset delta {offset_delta} is not above the previous record's ({previous}) "
            f"and at most the batch's lastOffsetDelta {last_offset_delta}"
        )


def _checked_records(
    batch: bytes | bytearray | memoryview, verify_crc: bool, max_records_bytes: int
) -> tuple[RecordBatchHeader, bytes | memoryview]:
    """The header of the v2 batch at the start of ``batch`` and its records' bytes, decompressed.

    Raises:
        CorruptRecordError: a bad magic, length, CRC or record count, data that does not decompress,
            or records that decompress to more than ``max_records_bytes``.
    """
    header = parse_batch_header(batch)
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or header.size > len(batch):
        raise CorruptRecordError("record batch length does not fit the buffer")
    if verify_crc and batch_crc(batch, 0, header.size) != header.crc:
        raise CorruptRecordError("record batch CRC-32C mismatch")
    if header.records_count < 0:
        raise CorruptRecordError(f"negative record count {header.records_count}")
    codec = header.attributes & COMPRESSION_MASK
    data = _decompress(codec, memoryview(batch)[BATCH_HEADER_SIZE : header.size], max_records_bytes)
    if header.records_count * _MIN_RECORD_SIZE > len(data):
        raise CorruptRecordError(f"{len(data)} bytes cannot hold {header.records_count} records")
    return header, data


def decode_batch_records(
    batch: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_records_bytes: int = MAX_RECORDS_BYTES
) -> list[Record]:
    """Decode every record of the v2 batch at the start of ``batch``.

    Args:
        batch: one batch (trailing bytes after it are ignored).
        verify_crc: check CRC-32C first; turn off only for batches already validated.
        max_records_bytes: the most the records section may decompress to.

    Returns:
        The records in batch order, offsets and timestamps made absolute.

    Raises:
        CorruptRecordError: the batch is truncated, has a bad magic or CRC, cannot be decompressed
            within ``max_records_bytes``, its records do not parse to exactly recordsCount records,
            or their offset deltas do not rise within the batch's range.
    """
    header, data = _checked_records(batch, verify_crc, max_records_bytes)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    last_delta = header.last_offset_delta
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    end = len(data)
    pos = 0
    previous = -1
    records: list[Record] = []
    try:
        for _ in range(header.records_count):
            length, pos = _read_varint(data, pos)
            start = pos
            if length < 0 or start + length > end:
                raise CorruptRecordError("record length runs past the end of the batch")
            pos += 1  # attributes: unused in v2
            timestamp_delta, pos = _read_varint(data, pos)
            offset_delta, pos = _read_varint(data, pos)
            _check_offset_delta(offset_delta, previous, last_delta)
            previous = offset_delta
            key, pos = _read_nullable(data, pos, end)
            value, pos = _read_nullable(data, pos, end)
            if pos > start + length:
                raise CorruptRecordError("record field runs past the end of the record")
            headers: list[RecordHeader] = []
            pos = _read_headers(data, pos, start + length, headers)
            if pos - start != length:
                raise CorruptRecordError(f"record length {length} does not match its {pos - start} bytes")
            records.append(
                Record(
                    base_offset + offset_delta,
                    base_timestamp + timestamp_delta if append_time is None else append_time,
                    key,
                    value,
                    tuple(headers),
                )
            )
    except IndexError as exc:
        raise CorruptRecordError(f"malformed record: {exc}") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after {header.records_count} records")
    return records


class RecordKey(NamedTuple):
    """What compaction needs of a record: its offset, its key and whether it has a value."""

    offset: int
    key: bytes | None
    has_value: bool


def scan_record_keys(
    batch: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_records_bytes: int = MAX_RECORDS_BYTES
) -> list[RecordKey]:
    """The offset, key and value presence of every record of the v2 batch at the start of ``batch``.

    A lighter pass than :func:`decode_batch_records` for the cleaner's offset map and the
    compacted-topic checks: timestamps, values and headers are skipped, not copied, but every
    check of the full decode is made, so the two accept the same batches.

    Raises:
        CorruptRecordError: as :func:`decode_batch_records`.
    """
    header, data = _checked_records(batch, verify_crc, max_records_bytes)
    base_offset = header.base_offset
    last_delta = header.last_offset_delta
    end = len(data)
    pos = 0
    previous = -1
    keys: list[RecordKey] = []
    read = _read_varint
    try:
        for _ in range(header.records_count):
            length, pos = read(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptRecordError("record length runs past the end of the batch")
            _, pos = read(data, pos + 1)  # attributes, then the timestamp delta
            # One-byte varints (offset deltas below 64, short keys, a null value) inline.
            byte = data[pos]
            if byte < 0x80:
                offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                offset_delta, pos = read(data, pos)
            if not previous < offset_delta <= last_delta:
                _check_offset_delta(offset_delta, previous, last_delta)
            previous = offset_delta
            byte = data[pos]
            if byte < 0x80:
                key_size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                key_size, pos = read(data, pos)
            if key_size < 0:
                if key_size != -1:
                    raise CorruptRecordError(f"invalid negative length {key_size}")
                key = None
            else:
                key = bytes(data[pos : pos + key_size])
                pos += key_size
            byte = data[pos]
            if byte < 0x80:
                value_size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                value_size, pos = read(data, pos)
            if value_size < -1:
                raise CorruptRecordError(f"invalid negative length {value_size}")
            pos += max(value_size, 0)
            if pos > record_end:
                raise CorruptRecordError("record field runs past the end of the record")
            if data[pos] != 0 or pos + 1 != record_end:  # anything but "no headers, and the record ends"
                pos = _read_headers(data, pos, record_end, None)
                if pos != record_end:
                    raise CorruptRecordError(f"record length {length} does not match its fields")
            keys.append(RecordKey(base_offset + offset_delta, key, value_size >= 0))
            pos = record_end
    except IndexError as exc:
        raise CorruptRecordError(f"malformed record: {exc}") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after {header.records_count} records")
    return keys


# --- building -------------------------------------------------------------------------------


def _nullable(value: bytes | None) -> bytes:
    if value is None:
        return b"\x01"  # zigzag(-1)
    return varint(len(value)) + value


def _compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` at Kafka's ``level`` for it (None: the codec's default).

    Levels mean what Kafka's do (KIP-390): gzip 1-9 or -1 for the default; LZ4 9 is the fast
    compressor and any other level the high-compression one, as in Kafka's Lz4BlockOutputStream;
    zstd's levels are zstd's own.
    """
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=None if level == -1 else level))
    if codec == Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.LZ4:
        # Independent blocks and no content checksum: what Kafka's Lz4BlockOutputStream writes.
        lz4_level = _LZ4_FRAME_FAST if level in {None, _LZ4_FAST_LEVEL} else level
        compressor = cramjam.lz4.Compressor(level=lz4_level, block_linked=False, content_checksum=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    return bytes(data)


def recompress_batch(
    records: bytes | bytearray | memoryview, header: RecordBatchHeader, codec: int, level: int | None, limit: int
) -> bytearray:
    """The batch at the start of ``records`` with its records section in ``codec`` instead (CRC-32C renewed).

    What LogValidator does when a topic's compression.type differs from the producer's codec, with
    the records themselves left as they are: a v2 records section is the same bytes under every
    codec, so only the codec changes, with the attributes' codec bits, the batch length and the
    CRC. Every other header field (offsets, timestamps, producer id, epoch and sequence) stays.

    Args:
        records: a whole v2 batch (its CRC already checked), possibly followed by other bytes.
        header: its parsed header.
        codec: the Compression to write.
        level: Kafka's compression level for ``codec`` (None for the default).
        limit: the most the records section may decompress to.

    Raises:
        CorruptRecordError: the records do not decompress, or to more than ``limit`` bytes.
    """
    section = memoryview(records)[BATCH_HEADER_SIZE : header.size]
    if header.records_count > 0:
        section = memoryview(_compress(codec, _decompress(header.compression, section, limit), level))
    out = bytearray(BATCH_HEADER_SIZE + len(section))
    out[:BATCH_HEADER_SIZE] = memoryview(records)[:BATCH_HEADER_SIZE]
    out[BATCH_HEADER_SIZE:] = section
    set_codec(out, codec)
    return out


def _encode_record(  # noqa: PLR0917 - a record's own fields, in wire order
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[RecordHeader],
) -> None:
    """Append one length-prefixed v2 record (DefaultRecord.writeTo) to ``out``."""
    record = bytearray(b"\x00")  # attributes
    record += varlong(timestamp_delta)
    record += varint(offset_delta)
    record += _nullable(key)
    record += _nullable(value)
    record += varint(len(headers))
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8", "surrogateescape")
        record += varint(len(encoded_key))
        record += encoded_key
        record += _nullable(header_value)
    out += varint(len(record))
    out += record


def _assemble(  # noqa: PLR0917 - the batch header's own fields, in wire order
    body: bytes,
    compression: int,
    attributes: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    records_count: int,
) -> bytes:
    """Compress ``body`` and put the 61-byte header with its CRC-32C in front."""
    payload = _compress(compression, body) if records_count else body
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        2,  # magic
        0,  # CRC, written below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


def build_record_batch(
    records: Sequence[RecordInput],
    *,
    base_timestamp_ms: int,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    timestamp_type_log_append: bool = False,
) -> bytes:
    """Build one v2 batch with a correct CRC-32C, compressed as asked.

    Offset deltas run 0..n-1. Each record's timestamp is its NewRecord.timestamp_ms or
    ``base_timestamp_ms``; maxTimestamp is the largest of them.

    Args:
        records: (key, value), (key, value, headers) or NewRecord items, at least one.
        base_timestamp_ms: baseTimestamp; deltas are relative to it.
        base_offset: baseOffset (clients send 0; the leader assigns the real one).
        compression: a Compression value.
        producer_id, producer_epoch, base_sequence: idempotence fields (-1 = none).
        partition_leader_epoch: written as is (-1 = unknown).
        is_transactional: set the transactional attribute bit.
        timestamp_type_log_append: set the LogAppendTime attribute bit.

    Returns:
        The batch bytes.

    Raises:
        LocalProtocolError: no records, or an unknown codec.
    """
    if not records:
        raise LocalProtocolError("a record batch needs at least one record")
    if not 0 <= compression <= Compression.ZSTD:
        raise LocalProtocolError(f"unknown compression codec {compression}")
    body = bytearray()
    max_timestamp = base_timestamp_ms
    for offset_delta, item in enumerate(records):
        key, value = item[0], item[1]
        headers: Sequence[RecordHeader] = item[2] if len(item) > 2 else ()
        timestamp: int | None = item[3] if len(item) > 3 else None
        if timestamp is None:
            timestamp = base_timestamp_ms
        if offset_delta == 0 or timestamp > max_timestamp:
            max_timestamp = timestamp
        _encode_record(body, offset_delta, timestamp - base_timestamp_ms, key, value, headers)

    attributes = compression
    if timestamp_type_log_append:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    return _assemble(
        bytes(body),
        compression,
        attributes,
        base_offset,
        len(records) - 1,
        base_timestamp_ms,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
        len(records),
    )


def rebuild_batch(header: RecordBatchHeader, records: Sequence[Record], *, delete_horizon_ms: int | None) -> bytes:
    """Re-encode the records a compaction kept under their batch's header (MemoryRecords.buildRetainedRecordsInto).

    The new batch keeps the original's baseOffset and lastOffsetDelta (so the producer's last
    sequence survives), codec, timestamp type, transactional and control bits, producer id,
    epoch, base sequence and partitionLeaderEpoch. Every record keeps its offset, timestamp,
    key, value and headers. As in Kafka's MemoryRecordsBuilder, baseTimestamp is the delete
    horizon when there is one (KIP-534, with the DELETE_HORIZON bit set), else the first
    record's timestamp; maxTimestamp is the largest record timestamp, or for LogAppendTime the
    original maxTimestamp.

    Args:
        header: the original batch's header.
        records: the records kept, in offset order, at least one, all inside the batch's range.
        delete_horizon_ms: KIP-534's delete horizon to record, or None for none.

    Raises:
        LocalProtocolError: no records, or a record outside the batch's offset range.
    """
    if not records:
        raise LocalProtocolError("a rebuilt batch needs at least one record; use build_empty_batch")
    base_offset, log_append = header.base_offset, header.is_log_append_time
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    max_timestamp = header.max_timestamp if log_append else max(r.timestamp for r in records)
    body = bytearray()
    for record in records:
        offset_delta = record.offset - base_offset
        if not 0 <= offset_delta <= header.last_offset_delta:
            raise LocalProtocolError(f"record offset {record.offset} is outside the batch at {base_offset}")
        _encode_record(body, offset_delta, record.timestamp - base_timestamp, record.key, record.value, record.headers)
    attributes = header.attributes & ~DELETE_HORIZON_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    return _assemble(
        bytes(body),
        header.compression,
        attributes,
        base_offset,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.partition_leader_epoch,
        len(records),
    )


def build_empty_batch(header: RecordBatchHeader) -> bytes:
    """A batch with the original's offsets and producer fields and no records (DefaultRecordBatch.writeEmptyHeader).

    The cleaner keeps one for a producer's last batch when every record in it was removed, so
    the producer's sequence and epoch survive compaction. Like Kafka's: uncompressed, no
    delete horizon, baseTimestamp -1 and the original maxTimestamp.
    """
    keep = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG
    return _assemble(
        b"",
        Compression.NONE,
        header.attributes & keep,
        header.base_offset,
        header.last_offset_delta,
        -1,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.partition_leader_epoch,
        0,
    )
