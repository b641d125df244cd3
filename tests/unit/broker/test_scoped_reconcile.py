"""A topic this broker creates or grows is taken up by a reconcile of that topic alone, before the answer.

The watch's full passes are held off in these tests (the replica manager's ``poke`` does nothing),
so what the CreateTopics and CreatePartitions handlers reconcile themselves is all that runs: the
new partitions must be led, a stale log of an earlier topic of the same name replaced, and other
topics left to the next full pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic

from tests.support.requests import timeout_ms
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

T = TypeVar("T")
CREATE_PARTITIONS = 37


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            broker.state.replicas.poke = lambda: None  # type: ignore[method-assign]
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def led(broker: InMemoryBroker, topic: str, partitions: int) -> list[bool]:
    return [broker.state.replicas.leader(topic, p) is not None for p in range(partitions)]


def test_created_and_grown_partitions_are_led_before_the_answer(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await broker.create_topic("orders", partitions=3)
        assert led(broker, "orders", 3) == [True, True, True]
        grow = CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name="orders", count=5, assignments=None),),
            timeout=timeout_ms(10_000),
            validate_only=False,
        )
        (result,) = (await broker.call(CREATE_PARTITIONS, 3, grow)).results
        assert result.error_code == 0, result
        assert led(broker, "orders", 5) == [True] * 5

    run(tmp_path, scenario)


def test_a_stale_log_of_the_same_name_is_replaced(tmp_path: Path) -> None:
    """Another broker deleted the topic and this one creates it again before its watch said so."""

    async def scenario(broker: InMemoryBroker) -> None:
        await broker.create_topic("reborn")
        old_log = broker.state.node.logs.get("reborn", 0)
        assert old_log is not None
        await broker.state.node.topics.delete("reborn")
        await broker.create_topic("reborn")
        topic = broker.state.node.topic("reborn")
        new_log = broker.state.node.logs.get("reborn", 0)
        leader = broker.state.replicas.leader("reborn", 0)
        assert topic is not None and new_log is not None and leader is not None
        assert new_log is not old_log and new_log.topic_id == topic.topic_id != old_log.topic_id
        assert leader.log is new_log

    run(tmp_path, scenario)


def test_other_topics_wait_for_the_next_full_pass(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await broker.create_topic("gone")
        await broker.state.node.topics.delete("gone")  # by another broker: this one's watch is held off
        await broker.create_topic("fresh")
        assert broker.state.node.logs.get("gone", 0) is not None
        assert broker.state.replicas.leader("gone", 0) is not None
        broker.state.replicas.reconcile()
        assert broker.state.node.logs.get("gone", 0) is None
        assert broker.state.replicas.leader("gone", 0) is None
        assert led(broker, "fresh", 1) == [True]

    run(tmp_path, scenario)
