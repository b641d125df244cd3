"""DescribeClientQuotas and AlterClientQuotas on a broker in memory: Kafka's answers and errors, and the store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from barnabas.cluster.client_quotas import entity_key
from barnabas.protocol import ErrorCode, request_class
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

T = TypeVar("T")
DESCRIBE, ALTER = 48, 49
INVALID, UNSUPPORTED = ErrorCode.invalid_request, ErrorCode.unsupported_version


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def entry(entity: list[tuple[str, str | None]], *ops: tuple[str, float | None]) -> Any:
    cls = lambda name: request_class(ALTER, 1, name)  # noqa: E731
    return cls("EntryData")(
        entity=tuple(cls("EntityData")(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(cls("OpData")(key=k, value=v or 0.0, remove=v is None) for k, v in ops),
    )


async def alter(broker: InMemoryBroker, *entries: Any, validate_only: bool = False) -> list[tuple[Any, ...]]:
    body = request_class(ALTER, 1)(entries=entries, validate_only=validate_only)
    response = await broker.call(ALTER, 1, body)
    return [(r.error_code, r.error_message) for r in response.entries]


async def describe(broker: InMemoryBroker, *components: tuple[str, int, str | None], strict: bool = False) -> Any:
    cls = request_class(DESCRIBE, 1, "ComponentData")
    parts = tuple(cls(entity_type=t, match_type=m, match=n) for t, m, n in components)
    return await broker.call(DESCRIBE, 1, request_class(DESCRIBE, 1)(components=parts, strict=strict))


def test_alterations_land_in_coordination_and_in_the_quota_lookup(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        results = await alter(
            broker,
            entry([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", 2048.0)),
            entry([("client-id", None)], ("consumer_byte_rate", 1000.0), ("request_percentage", 12.5)),
        )
        assert results == [(ErrorCode.none, None)] * 2
        node = broker.state.node
        stored = await node.storage.get(entity_key((("client-id", "app"), ("user", "alice"))))
        assert stored is not None and b"producer_byte_rate" in stored.value
        assert node.quotas.quota("producer_byte_rate", "alice", "app") == (
            2048.0,
            ("producer_byte_rate", "alice", "app"),
        )
        assert node.quotas.quota("consumer_byte_rate", "bob", "other") == (1000.0, ("consumer_byte_rate", "", "other"))
        everything = await describe(broker)
        assert len(everything.entries) == 2
        strict = await describe(broker, ("client-id", 2, None), strict=True)
        assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in strict.entries] == [[("client-id", None)]]
        assert await alter(broker, entry([("client-id", None)], ("consumer_byte_rate", None),
                                         ("request_percentage", None))) == [(ErrorCode.none, None)]  # fmt: skip
        assert await node.storage.get(entity_key((("client-id", None),))) is None  # no quota left: no key
        assert await alter(broker, entry([("user", "x")], ("producer_byte_rate", 5.0)), validate_only=True) == [
            (ErrorCode.none, None)
        ]
        assert node.client_quotas.get((("user", "x"),), "producer_byte_rate") is None

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (entry([], ("producer_byte_rate", 1.0)), "Invalid empty client quota entity"),
        (entry([("group", "g")], ("producer_byte_rate", 1.0)), "Unhandled client quota entity type: group"),
        (entry([("user", "")], ("producer_byte_rate", 1.0)), "Empty user not supported"),
        (entry([("user", "a"), ("user", "b")], ("producer_byte_rate", 1.0)), "duplicate entity entry user"),
        (entry([("user", "a")], ("bogus", 1.0)), "Invalid configuration key bogus"),
        (entry([("user", "a")], ("producer_byte_rate", -1.0)), "Quota producer_byte_rate must be greater than 0"),
        (entry([("user", "a")], ("consumer_byte_rate", 1.5)), "consumer_byte_rate cannot be a fractional value."),
        (entry([("user", "a")], ("request_percentage", 1.0), ("request_percentage", 2.0)), "Duplicate quota key"),
        (entry([("ip", "1.2.3.4")], ("connection_creation_rate", 5.0)), "ip quotas"),
        (entry([("ip", None), ("user", "a")], ("producer_byte_rate", 5.0)), "IP entity should not be combined"),
    ],
)
def test_kafkas_alter_errors_refuse_only_that_entity(tmp_path: Path, bad: Any, message: str) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        good = entry([("user", "fine")], ("request_percentage", 50.0))
        (refused, accepted) = await alter(broker, bad, good)
        assert refused[0] == INVALID and message in refused[1]
        assert accepted == (ErrorCode.none, None)
        assert broker.state.node.client_quotas.get((("user", "fine"),), "request_percentage") == 50.0

    run(tmp_path, scenario)


def test_an_entity_named_twice_is_refused(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        first = entry([("user", "a")], ("producer_byte_rate", 1.0))
        second = entry([("user", "a")], ("producer_byte_rate", 2.0))
        (result,) = await alter(broker, first, second)
        assert result[0] == INVALID and "Ignoring duplicate entity" in result[1]

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", 0, "x")], INVALID, "Invalid empty entity type."),
        ([("user", 0, "a"), ("user", 2, None)], INVALID, "cannot appear more than once"),
        ([("user", 0, None)], INVALID, "MATCH_TYPE_EXACT, but set match string to null"),
        ([("user", 1, "a")], INVALID, "MATCH_TYPE_DEFAULT, but also specified a match string"),
        ([("user", 2, "a")], INVALID, "MATCH_TYPE_SPECIFIED, but also specified a match string"),
        ([("user", 7, None)], INVALID, "Unknown match type 7"),
        ([("group", 2, None)], UNSUPPORTED, "Unsupported entity type group"),
        ([("ip", 2, None), ("user", 2, None)], INVALID, "IP filter component should not be used"),
    ],
)
def test_kafkas_describe_errors_answer_the_whole_request(
    tmp_path: Path, components: list[tuple[str, int, str | None]], error: ErrorCode, message: str
) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        response = await describe(broker, *components)
        assert response.error_code == error and message in response.error_message
        assert response.entries is None

    run(tmp_path, scenario)
