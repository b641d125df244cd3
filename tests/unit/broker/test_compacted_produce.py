"""Produce to a compacted topic on a broker in memory: no client batch may stop compaction or balloon memory.

The batches are raw bytes (``tests/support/raw_records.py``) sent through the broker's decoder and
Produce handler; compaction is the broker's own cleaner service, on its maintenance tick, watched
through Fetch. What the cleaner could not read is refused with INVALID_RECORD, as Kafka's
LogValidator refuses a record it cannot iterate; what it can read goes in and is compacted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kio.schema.errors import ErrorCode

from barnabas.protocol import Compression, decode_batch_records, iter_batch_headers
from tests.support.peak_memory import measure_peak
from tests.support.raw_records import T0, expanding_batch, raw_batch, raw_record
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker
from tests.unit.broker.test_handlers import create, fetch, produce

#: A maintenance tick and cleaner backoff of 50 ms, so a pass follows the data closely.
FAST_CLEANER = {
    "log.retention.check.interval.ms": "50",
    "log.initial.task.delay.ms": "0",
    "log.cleaner.backoff.ms": "50",
}
COMPACTED = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": "0.01", "segment_ms": "1"}
MIB = 1 << 20


async def fetched(broker: InMemoryBroker, topic: str) -> tuple[list[tuple[int, bytes | None]], bytes]:
    """(offset, key) of every record up to the high watermark, and the records bytes, fetched segment by segment."""
    records: list[tuple[int, bytes | None]] = []
    data = b""
    offset = 0
    while True:
        answer = await fetch(broker, topic, offset)
        chunk = bytes(answer.records or b"")
        headers = list(iter_batch_headers(chunk))
        if not headers:
            return records, data
        data += chunk
        records += [(r.offset, r.key) for p, h in headers for r in decode_batch_records(chunk[p : p + h.size])]
        offset = headers[-1][1].next_offset


def test_a_batch_the_cleaner_could_not_read_is_refused_and_compaction_goes_on(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, "orders", **COMPACTED)
        # Count (2) and lastOffsetDelta (1) agree, but the kept record claims delta 5: once "a" is
        # written again the cleaner must rebuild the batch, and cannot.
        outside = raw_batch([raw_record(0, b"a", b"1"), raw_record(5, b"x", b"2")])
        refused = await produce(broker, "orders", outside)
        assert (refused.error_code, refused.base_offset) == (ErrorCode.invalid_record, -1)
        assert "offset delta 5" in refused.error_message and "in topic partition orders-0" in refused.error_message
        assert refused.record_errors == ()

        # A header key that is not UTF-8 is Kafka's to take (it reads keys leniently), so it is taken.
        odd = raw_record(0, b"b", b"1", [(b"\xff\xfe", b"h")])
        batches = [raw_batch([odd, raw_record(1, b"a", b"1")]), raw_batch([raw_record(0, b"a", b"2")])]
        batches.append(raw_batch([raw_record(0, b"z", b"1")], timestamp=T0 + 1000))  # segment.ms=1: a new segment
        assert [(await produce(broker, "orders", b)).base_offset for b in batches] == [0, 2, 3]

        deadline = time.monotonic() + 10
        while (found := await fetched(broker, "orders"))[0] != [(0, b"b"), (2, b"a"), (3, b"z")]:
            assert time.monotonic() < deadline, f"compaction did not run: {found[0]}"
            await asyncio.sleep(0.05)
        assert odd in found[1]  # the rebuilt batch kept the record byte for byte

    asyncio.run(run(tmp_path, scenario))


def test_a_decompression_bomb_is_refused_without_the_memory_it_expands_to(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, "orders", cleanup_policy="compact", max_message_bytes="300000")  # bound: 19.2 MB
        for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD):
            bomb = expanding_batch(codec, 64 * MIB)
            with measure_peak() as peak:
                refused = await produce(broker, "orders", bomb)
            assert (refused.error_code, refused.base_offset) == (ErrorCode.invalid_record, -1), codec
            assert "at most 19200000 bytes" in refused.error_message
            assert peak.growth < 32 * MIB, f"{codec.name}: {len(bomb)} bytes took {peak.growth / MIB:.0f} MiB"
        fits = expanding_batch(Compression.ZSTD, 18_000_000)
        assert (await produce(broker, "orders", fits)).error_code == ErrorCode.none

    asyncio.run(run(tmp_path, scenario))


async def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[None]]) -> None:
    async with in_memory_broker(tmp_path, FAST_CLEANER) as broker:
        await asyncio.wait_for(scenario(broker), 60)
