"""Record batches built byte by byte (DefaultRecord's layout), for what a well-behaved encoder never writes.

barnabas's own ``build_record_batch`` numbers offset deltas 0..n-1 and writes header keys as UTF-8,
so the batches a misbehaving client may send (a record outside the batch's offsets, a header key
that is not UTF-8, a records section that decompresses to far more than the batch) are put
together here field by field, with a correct batchLength and CRC-32C, so they reach the checks
behind the CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import cramjam
import crc32c

__all__ = ["T0", "compressed", "expanding_batch", "raw_batch", "raw_record", "zigzag"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
#: The timestamp of every batch unless given: 2023-11-14T22:13:20Z.
T0 = 1_700_000_000_000


def zigzag(value: int) -> bytes:
    """A zigzag varint/varlong, as DefaultRecord writes its fields."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _nullable(data: bytes | None) -> bytes:
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def raw_record(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
) -> bytes:
    """One length-prefixed record; header keys are raw bytes, so they need not be UTF-8."""
    body = b"\x00" + zigzag(0) + zigzag(offset_delta) + _nullable(key) + _nullable(value) + zigzag(len(headers))
    for header_key, header_value in headers:
        body += zigzag(len(header_key)) + header_key + _nullable(header_value)
    return zigzag(len(body)) + body


def compressed(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a client would: gzip, raw snappy, an LZ4 frame or zstd (codec 1-4)."""
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    return data


def raw_batch(
    records: Sequence[bytes],
    *,
    last_offset_delta: int | None = None,
    codec: int = 0,
    payload: bytes | None = None,
    base_offset: int = 0,
    timestamp: int = T0,
) -> bytes:
    """A v2 batch holding ``records`` (or ``payload`` as its records section), counted as they are.

    Args:
        records: encoded records (``raw_record``); their number is the batch's recordsCount.
        last_offset_delta: the header's lastOffsetDelta; by default ``len(records) - 1``.
        codec: the compression bits; the records are compressed with it unless ``payload`` is given.
        payload: the records section as is (already compressed, or deliberately wrong).
        base_offset: baseOffset (a client sends 0).
        timestamp: baseTimestamp and maxTimestamp (every record's delta is 0).
    """
    body = compressed(codec, b"".join(records)) if payload is None else payload
    delta = len(records) - 1 if last_offset_delta is None else last_offset_delta
    out = bytearray(_HEADER.size)
    fields = (base_offset, 49 + len(body), -1, 2, 0, codec, delta, timestamp, timestamp, -1, -1, -1, len(records))
    _HEADER.pack_into(out, 0, *fields)
    out += body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def expanding_batch(codec: int, expanded_bytes: int) -> bytes:
    """A well-formed keyed batch whose one record's value is ``expanded_bytes`` of zeros: a decompression bomb.

    Compressed with zstd, gzip or LZ4 it takes a few KB to a few hundred KB; every record field is
    valid, so only a bound on what the records may decompress to refuses it.
    """
    return raw_batch([raw_record(0, b"key", bytes(expanded_bytes))], codec=codec)
