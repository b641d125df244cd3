"""The follower side of appending: a fetched batch lands unchanged, the high watermark stays within the log.

Driven on a complete in-memory broker (real logs, real fetch waiters); the topic's partition is
written through the follower path the replica fetchers use.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from barnabas.protocol import build_record_batch

from .in_memory import in_memory_broker

TOPIC = "followed"
TP = (TOPIC, 0)


def leader_batch(base_offset: int, count: int, epoch: int = 0) -> bytes:
    """A batch as its leader stored it: offsets and leader epoch assigned."""
    records = [(None, f"v{base_offset + i}".encode()) for i in range(count)]
    return build_record_batch(records, base_timestamp_ms=1_700_000_000_000, base_offset=base_offset,
                              partition_leader_epoch=epoch)  # fmt: skip


def test_a_fetched_batch_lands_unchanged_and_the_high_watermark_follows_the_leaders(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with in_memory_broker(tmp_path) as broker:
            await broker.create_topic(TOPIC)
            followers = broker.state.partitions.followers
            partition_log = broker.state.node.logs.get(*TP)
            assert partition_log is not None
            followers.append(TP, partition_log, leader_batch(0, 3), leader_hw=2)
            assert (partition_log.log_end_offset, partition_log.high_watermark) == (3, 2)
            followers.append(TP, partition_log, leader_batch(3, 2), leader_hw=9)  # leader is further on
            assert (partition_log.log_end_offset, partition_log.high_watermark) == (5, 5)

    asyncio.run(scenario())


def test_an_empty_fetch_still_moves_the_high_watermark_and_wakes_waiting_fetches(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with in_memory_broker(tmp_path) as broker:
            await broker.create_topic(TOPIC)
            node = broker.state.node
            partition_log = node.logs.get(*TP)
            assert partition_log is not None
            followers = broker.state.partitions.followers
            followers.append(TP, partition_log, leader_batch(0, 4), leader_hw=1)
            waiting = asyncio.create_task(node.fetch_waiters.wait([TP], timeout_s=60))
            await asyncio.sleep(0)  # let the waiter register
            followers.append(TP, partition_log, None, leader_hw=4)
            async with asyncio.timeout(5):  # woken, not timed out after a minute
                await waiting
            assert partition_log.high_watermark == 4

    asyncio.run(scenario())


def test_truncation_and_starting_over_go_through_the_follower_side(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with in_memory_broker(tmp_path) as broker:
            await broker.create_topic(TOPIC)
            partition_log = broker.state.node.logs.get(*TP)
            assert partition_log is not None
            followers = broker.state.partitions.followers
            followers.append(TP, partition_log, leader_batch(0, 3), leader_hw=2)
            followers.append(TP, partition_log, leader_batch(3, 2, epoch=1), leader_hw=2)
            followers.truncate_to(partition_log, 3)  # the epoch-1 batch was never the new leader's
            assert partition_log.log_end_offset == 3
            followers.start_over_at(partition_log, 40)
            assert (partition_log.log_start_offset, partition_log.log_end_offset) == (40, 40)

    asyncio.run(scenario())
