"""Reconciles of one topic: what this broker creates or grows, before the answer; what its watch
reports changed, in a pass over the changed topics alone.

In the first tests the watch's passes are held off (the replica manager's ``poke`` does nothing),
so what the CreateTopics and CreatePartitions handlers reconcile themselves is all that runs: the
new partitions must be led, a stale log of an earlier topic of the same name replaced, and other
topics left to the next full pass. In the last ones the watch runs, and the replica manager's
``looks`` counts the partitions its passes visit.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic

from tests.support.polling import until
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


# -- passes the watch wakes --------------------------------------------------------------------------

TOPICS, PARTITIONS = 20, 5


def run_watched(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            for i in range(TOPICS):
                await broker.create_topic(f"t{i}", partitions=PARTITIONS)
            await until(lambda: caught_up(broker), "every topic taken up by a pass")
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def caught_up(broker: InMemoryBroker) -> bool:
    """No pass is due: every stored topic was taken up at its current generation."""
    replicas, topics = broker.state.replicas, broker.state.node.topics
    seen = replicas._topics_seen
    return not replicas._reconcile_wake.is_set() and all(
        seen.get(name) == topics.topic_generation(name) for name in topics.topics
    )


def test_a_watched_partition_change_is_taken_up_by_a_pass_over_its_topic(tmp_path: Path) -> None:
    """Another broker's election moves one partition's leader epoch: this broker's watch reports it,
    and the pass that follows visits that topic's partitions, not all 100 (every watch event cost a
    pass over every partition: 70-75 ms at 10,000)."""

    async def scenario(broker: InMemoryBroker) -> int:
        replicas, topics = broker.state.replicas, broker.state.node.topics
        before = replicas.looks
        state = topics.states[("t7", 2)]
        version = topics.state_version("t7", 2)
        assert version is not None
        await topics.update_state("t7", 2, dataclasses.replace(state, leader_epoch=state.leader_epoch + 1), version)
        await until(lambda: replicas.leaders[("t7", 2)].leader_epoch == state.leader_epoch + 1, "the new epoch led")
        await until(lambda: caught_up(broker), "the change taken up")
        return replicas.looks - before

    looked = run_watched(tmp_path, scenario)
    assert 0 < looked <= 2 * PARTITIONS, f"{looked} partitions looked at for one topic's change"


def test_a_topic_deleted_elsewhere_is_dropped_by_a_pass_over_it(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> int:
        replicas, node = broker.state.replicas, broker.state.node
        before = replicas.looks
        await node.topics.delete("t3")  # by another broker: this one learns it from its watch
        await until(lambda: node.logs.get("t3", 0) is None, "the deleted topic's logs removed")
        await until(lambda: caught_up(broker), "the deletion taken up")
        assert all(replicas.leader("t3", p) is None for p in range(PARTITIONS))
        assert all(replicas.leader(f"t{i}", p) is not None for i in range(TOPICS) if i != 3 for p in range(PARTITIONS))
        return replicas.looks - before

    looked = run_watched(tmp_path, scenario)
    assert looked <= PARTITIONS, f"{looked} partitions looked at for one topic's deletion"


def test_a_change_of_the_live_brokers_is_taken_up_by_a_full_pass(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> int:
        replicas, node = broker.state.replicas, broker.state.node
        before = replicas.looks
        await node.brokers.refresh()  # as the brokers' watch does when one registers or goes
        replicas.poke()
        await until(lambda: replicas.looks - before >= TOPICS * PARTITIONS, "a pass over every partition")
        return replicas.looks - before

    assert run_watched(tmp_path, scenario) >= TOPICS * PARTITIONS
