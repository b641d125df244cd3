"""Producer id blocks against embedded coordination, and the counter raised past ids found in logs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from barnabas.cluster.producer_ids import BLOCK_SIZE, ProducerIdAllocator
from barnabas.coordination import open_storage


def test_ids_are_unique_across_brokers_and_new_blocks_start_past_the_highest_id_found_in_logs(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[int], list[int], int]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            first, second = ProducerIdAllocator(storage, 0), ProducerIdAllocator(storage, 1)
            before = [await first.next_id(), await second.next_id(), await first.next_id()]
            await second.ensure_beyond(2 * BLOCK_SIZE + 5)  # a store that lost its counter under old logs
            # The raiser drops its own block; a block another broker reserved before is its own to finish.
            after = [await second.next_id(), await first.next_id()]
            await first.ensure_beyond(7)  # below the counter already: nothing moves back
            return before, after, await ProducerIdAllocator(storage, 2).next_id()
        finally:
            await storage.close()

    before, after, third = asyncio.run(scenario())
    assert before == [0, BLOCK_SIZE, 1]
    assert after == [3 * BLOCK_SIZE, 2]
    assert third == 4 * BLOCK_SIZE


def test_an_empty_store_takes_the_raised_counter(tmp_path: Path) -> None:
    async def scenario() -> int:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            allocator = ProducerIdAllocator(storage, 0)
            await allocator.ensure_beyond(41)
            return await allocator.next_id()
        finally:
            await storage.close()

    assert asyncio.run(scenario()) == BLOCK_SIZE
