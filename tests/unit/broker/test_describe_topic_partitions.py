"""DescribeTopicPartitions (75) answered as Kafka's broker answers it: pages, cursors and errors.

Through the handler on a one-broker cluster in memory; the Java Admin's describeTopics, which asks
this API first, runs against a real broker in the Java interop tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.types import TopicName
from kio.static.primitive import i32

from barnabas.protocol import ErrorCode
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

T = TypeVar("T")
API_KEY = 75


def run(
    tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]], settings: dict[str, str] | None = None
) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path, settings) as broker:
            for name, partitions in (("beta", 3), ("alpha", 2), ("gamma", 4)):
                await broker.create_topic(name, partitions)
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def ask(
    broker: InMemoryBroker, names: tuple[str, ...] = (), limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Awaitable[Any]:
    request = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=TopicName(n)) for n in names),
        response_partition_limit=i32(limit),
        cursor=None if cursor is None else Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )
    return broker.call(API_KEY, 0, request)


def pages(answer: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics]


def test_every_topic_in_name_order_with_what_metadata_says(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        answer = await ask(broker)
        assert pages(answer) == [("alpha", [0, 1]), ("beta", [0, 1, 2]), ("gamma", [0, 1, 2, 3])]
        assert answer.next_cursor is None
        me = broker.state.node.broker_id
        for topic in answer.topics:
            stored = broker.state.node.topic(topic.name)
            assert stored is not None
            assert topic.error_code == ErrorCode.none and topic.topic_id == stored.topic_id
            assert topic.topic_authorized_operations > 0  # every operation, without an authorizer
            for p in topic.partitions:
                state = broker.state.node.partition_state(topic.name, p.partition_index)
                assert state is not None
                assert (p.leader_id, p.leader_epoch) == (me, state.leader_epoch)
                assert (p.replica_nodes, p.isr_nodes, p.offline_replicas) == ((me,), (me,), ())
                assert p.eligible_leader_replicas == () and p.last_known_elr == ()

    run(tmp_path, scenario)


def test_pages_follow_the_cursor_until_it_is_gone(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[Any]:
        seen: list[Any] = []
        cursor = None
        while True:
            answer = await ask(broker, limit=2, cursor=cursor)
            seen.append((pages(answer), answer.next_cursor))
            if answer.next_cursor is None:
                return seen
            cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)

    seen = run(tmp_path, scenario)
    assert [p for p, _ in seen] == [
        [("alpha", [0, 1])],
        [("beta", [0, 1])],
        [("beta", [2]), ("gamma", [0])],
        [("gamma", [1, 2])],
        [("gamma", [3])],
    ]
    # A page that fills exactly at a topic's end points at the next topic's first partition.
    assert (seen[0][1].topic_name, seen[0][1].partition_index) == ("beta", 0)


def test_the_broker_limit_caps_the_clients(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        return await ask(broker, limit=100)

    answer = run(tmp_path, scenario, {"max.request.partition.size.limit": "3"})
    assert pages(answer) == [("alpha", [0, 1]), ("beta", [0])]
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == ("beta", 1)


def test_named_topics_unknown_invalid_and_a_cursor_not_among_them(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any, Any]:
        named = await ask(broker, ("gamma", "nope", "bad name!", "alpha", "gamma"))
        outside = await ask(broker, ("alpha",), cursor=("beta", 0))
        negative = await ask(broker, ("alpha",), cursor=("alpha", -1))
        return named, outside, negative

    named, outside, negative = run(tmp_path, scenario)
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
        ("alpha", ErrorCode.none, 2),
        ("bad name!", ErrorCode.invalid_topic_exception, 0),
        ("gamma", ErrorCode.none, 4),
        ("nope", ErrorCode.unknown_topic_or_partition, 0),
    ]
    for refused in (outside, negative):
        assert [(t.name, t.error_code) for t in refused.topics] == [("alpha", ErrorCode.invalid_request)]
