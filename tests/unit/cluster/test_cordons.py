"""Cordons and unregistering a broker, against embedded (SQLite) coordination: what is stored, what is refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from barnabas.cluster import BrokerRegistry, Topic
from barnabas.cluster.claims import CLAIMS_PREFIX
from barnabas.cluster.cordons import CORDONS_PREFIX, CordonStore
from barnabas.cluster.unregister import (
    BrokerHoldsReplicasError,
    BrokerNotRegisteredError,
    BrokerRunningError,
    unregister_broker,
)
from barnabas.coordination import Storage, open_storage

T = TypeVar("T")
SESSION_TTL_S = 30.0


def run(tmp_path: Path, scenario: Callable[[Storage], Awaitable[T]]) -> T:
    async def main() -> T:
        storage = await open_storage(f"sqlite://{tmp_path / 'coordination.db'}")
        try:
            return await scenario(storage)
        finally:
            await storage.close()

    return asyncio.run(main())


def test_a_cordon_is_one_key_per_broker_seen_by_every_store(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        writer, reader = CordonStore(storage), CordonStore(storage)
        assert await writer.cordon(3) is True
        assert await writer.cordon(3) is False, "cordoning twice changes nothing"
        assert writer.brokers == {3}, "the writer's cache is current at once"
        assert reader.brokers == frozenset(), "another broker's cache waits for its watch"
        assert await reader.current() == {3}, "placement reads afresh"
        assert (await storage.get(f"{CORDONS_PREFIX}3")) is not None
        await storage.put_if_absent(f"{CORDONS_PREFIX}not-a-broker", b"{}")
        assert await reader.load() == {3}, "a key that names no broker id is not a cordon"
        assert await writer.uncordon(3) is True
        assert await writer.uncordon(3) is False
        await reader.refresh([f"{CORDONS_PREFIX}3"])
        assert reader.brokers == frozenset()

    run(tmp_path, scenario)


def test_unregistering_deletes_the_claim_and_the_cordon_and_keeps_the_epoch_counter(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        brokers = BrokerRegistry(storage.metastore)
        await storage.put_if_absent(f"{CLAIMS_PREFIX}4", b'{"broker_id": 4}')
        await storage.put_if_absent("broker_epochs/4", b"7")
        await CordonStore(storage).cordon(4)
        await unregister_broker(storage, brokers, [], 4)
        assert await storage.get(f"{CLAIMS_PREFIX}4") is None
        assert await storage.get(f"{CORDONS_PREFIX}4") is None
        versioned = await storage.get("broker_epochs/4")
        assert versioned is not None and versioned.value == b"7", "a new broker 4 never gets an old epoch"
        with pytest.raises(BrokerNotRegisteredError, match=r"^Broker ID 4 is not currently registered$"):
            await unregister_broker(storage, brokers, [], 4)

    run(tmp_path, scenario)


def test_a_running_broker_or_one_holding_replicas_is_not_unregistered(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        brokers = BrokerRegistry(storage.metastore)
        claim = f"{CLAIMS_PREFIX}1"
        await storage.put_if_absent(claim, b'{"broker_id": 1}')
        moving = Topic("orders", uuid.uuid4(), {0: (0, 1), 1: (0, 2), 2: (2, 1), 3: (1,)})
        with pytest.raises(BrokerHoldsReplicasError) as holding:
            await unregister_broker(storage, brokers, [moving], 1)
        assert str(holding.value) == (
            "broker 1 still holds 3 replicas (orders-0, orders-2, orders-3): "
            "move them first (barnabas cluster decommission --broker 1)"
        )
        session = await storage.metastore.open_session(SESSION_TTL_S)
        try:
            await brokers.membership.join(session, "1", b"{}")
            with pytest.raises(BrokerRunningError, match=r"^broker 1 is running: stop it before unregistering it$"):
                await unregister_broker(storage, brokers, [], 1)
        finally:
            await session.close()
        assert await storage.get(claim) is not None, "nothing changed by a refusal"

    run(tmp_path, scenario)
