"""What each reader of coordination storage does with a value that does not read (CorruptValueError).

Against embedded (SQLite) coordination with the damaged value written straight into storage. The
readers that keep a broker's view current (the topic cache, the live brokers, the credentials) log
the value and set it aside, so the rest of the view keeps being read; the ones a start depends on
(the claim on its log dirs) refuse, since taking the value as absent would give up what it guards.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from barnabas.cluster.brokers import BROKERS_GROUP, BrokerInfo, BrokerRegistry
from barnabas.cluster.claims import CLAIMS_PREFIX, ClaimRefusedError, check_claim
from barnabas.cluster.credentials import CredentialStore, credential_key
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import TopicStore
from barnabas.coordination import Storage, open_storage
from barnabas.security.scram import ScramCredential

T = TypeVar("T")
#: Read as the brokers "1" and "2" before decoders checked shapes.
DAMAGED_STATE = b'{"leader": 1, "leader_epoch": 0, "isr": "12"}'


def run(tmp_path: Path, scenario: Callable[[Storage], Awaitable[T]]) -> T:
    async def main() -> T:
        storage = await open_storage(f"sqlite://{tmp_path / 'coordination.db'}")
        try:
            return await scenario(storage)
        finally:
            await storage.close()

    return asyncio.run(main())


async def overwrite(storage: Storage, key: str, value: bytes) -> None:
    current = await storage.get(key)
    assert current is not None
    await storage.compare_and_set(key, value, current.version)


def topic(name: str) -> tuple[Topic, dict[int, PartitionState]]:
    return Topic(name, uuid.uuid4(), {0: (1,), 1: (1,)}), {p: PartitionState(1, 4, (1,)) for p in (0, 1)}


def test_a_load_sets_unreadable_values_aside_and_reads_the_rest(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        writer = TopicStore(storage)
        await writer.create(*topic("orders"))
        await writer.create(*topic("payments"))
        await overwrite(storage, "topics/payments", b'{"id": 7}')
        await overwrite(storage, "partitions/orders/1", DAMAGED_STATE)

        view = TopicStore(storage)
        await view.load()

        assert set(view.topics) == {"orders"}
        assert view.unreadable_topics == {"payments"}  # unknown, not deleted: its logs stay
        assert set(view.states) == {("orders", 0)}
        assert view.missing_states() == []  # no fresh state (epoch 0) is written over the damaged one
        assert set(view.unreadable) == {"topics/payments", "partitions/orders/1"}

    run(tmp_path, scenario)


def test_a_damaged_update_keeps_what_was_read_before_and_a_repair_is_read(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        orders, states = topic("orders")
        writer = TopicStore(storage)
        await writer.create(orders, states)
        view = TopicStore(storage)
        await view.load()
        state, version = view.states[("orders", 0)], view.state_version("orders", 0)

        await overwrite(storage, "partitions/orders/0", DAMAGED_STATE)
        await overwrite(storage, "topics/orders", b"\xff")
        await view.refresh(["topics/orders", "partitions/orders/0"])
        assert view.topics["orders"] == orders
        assert (view.states[("orders", 0)], view.state_version("orders", 0)) == (state, version)

        repaired = PartitionState(1, 5, (1,), topic_id=orders.topic_id)
        await overwrite(storage, "partitions/orders/0", repaired.to_json())
        await view.refresh(["partitions/orders/0"])
        assert view.states[("orders", 0)] == repaired
        assert "partitions/orders/0" not in view.unreadable

    run(tmp_path, scenario)


def test_a_new_topic_writes_its_states_over_unreadable_leftovers(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await storage.put_if_absent("partitions/orders/0", DAMAGED_STATE)  # left by a deleted topic
        store = TopicStore(storage)
        orders, states = topic("orders")
        await store.create(orders, states)
        assert store.states[("orders", 0)].topic_id == orders.topic_id
        stored = await storage.get("partitions/orders/0")
        assert stored is not None and PartitionState.from_json(stored.value).topic_id == orders.topic_id

    run(tmp_path, scenario)


def test_an_unreadable_registration_is_a_broker_that_is_not_live(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        session = await storage.metastore.open_session(10)
        registry = BrokerRegistry(storage.metastore)
        await registry.register(session, BrokerInfo(1, "h", 9092))
        await registry.membership.join(session, "2", b'{"host": "h", "port": 9093, "endpoints": "x"}')
        await registry.membership.join(session, "proxy", b"{}")
        assert set(await registry.refresh()) == {1}
        assert await registry.read(2) is None
        assert registry.prefix == f"groups/{BROKERS_GROUP}/"
        await session.close()

    run(tmp_path, scenario)


def test_an_unreadable_credential_is_a_user_without_one(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        store = CredentialStore(storage)
        credential = ScramCredential(b"salt", b"stored", b"server", 4096)
        await store.alter("alice", {"SCRAM-SHA-256": credential})
        await store.alter("bob", {"SCRAM-SHA-256": credential})
        await overwrite(storage, credential_key("SCRAM-SHA-256", "bob"), b'{"salt": 1}')
        await store.load()
        assert store.users() == {"alice": {"SCRAM-SHA-256": 4096}}
        await store.refresh([credential_key("SCRAM-SHA-256", "bob")])
        assert "bob" not in store.users()

    run(tmp_path, scenario)


def test_an_unreadable_claim_refuses_the_start(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await storage.put_if_absent(f"{CLAIMS_PREFIX}3", b'{"broker_id": 3, "cluster_id": "c", "directories": "ab"}')
        with pytest.raises(ClaimRefusedError, match=r"broker 3's claim claims/brokers/3 is unreadable.*delete it"):
            await check_claim(storage, 3, "c", {Path("/data/a"): "dir-a"}, fresh_dirs=())

    run(tmp_path, scenario)
