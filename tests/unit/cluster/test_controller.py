"""The controller against embedded (SQLite) coordination, its caches fed only by what it reads itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from barnabas.cluster import Controller
from barnabas.cluster.brokers import BrokerInfo, BrokerRegistry
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import TopicStore
from barnabas.coordination import Storage, open_storage


@asynccontextmanager
async def _acting_controller(database: Path, topic: Topic, state: PartitionState) -> AsyncIterator[Controller]:
    """Brokers 0 and 1 live, ``topic`` stored with ``state``, and broker 0 acting as controller."""
    storage: Storage = await open_storage(f"sqlite://{database}")
    session = await storage.metastore.open_session(10)
    brokers = BrokerRegistry(storage.metastore)
    for broker_id in (0, 1):
        await brokers.register(session, BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id, None))
    topics = TopicStore(storage)
    await topics.create(topic, {0: state})
    controller = Controller(storage.metastore, topics, brokers, 0, unclean=lambda _: False)
    running = asyncio.create_task(controller.run(session))
    try:
        async with asyncio.timeout(10):
            while controller.fence is None:
                await asyncio.sleep(0.01)
        yield controller
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await storage.close()


def test_a_preferred_election_sees_an_isr_change_its_cache_missed(tmp_path: Path) -> None:
    """A leader adds the preferred replica to the ISR; the controller has not heard yet but elects it."""

    async def scenario() -> tuple[object, PartitionState | None]:
        database = tmp_path / "c.db"
        topic = Topic("t", uuid.uuid4(), {0: (0, 1)})
        async with _acting_controller(database, topic, PartitionState(1, 1, (1,))) as controller:
            storage = await open_storage(f"sqlite://{database}")
            try:
                leader_view = TopicStore(storage)
                await leader_view.load()
                version = leader_view.state_version("t", 0)
                assert version is not None
                await leader_view.update_state("t", 0, PartitionState(1, 1, (1, 0)), version)
                result = await controller.elect_leaders([("t", 0)], preferred=True)
                await leader_view.load()
                return result[("t", 0)], leader_view.states.get(("t", 0))
            finally:
                await storage.close()

    error, stored = asyncio.run(scenario())
    assert error is None
    assert stored is not None and stored.leader == 0 and stored.leader_epoch == 2


def test_a_preferred_election_is_refused_while_the_store_lacks_the_replica_in_the_isr(tmp_path: Path) -> None:
    async def scenario() -> object:
        topic = Topic("t", uuid.uuid4(), {0: (0, 1)})
        async with _acting_controller(tmp_path / "c.db", topic, PartitionState(1, 1, (1,))) as controller:
            return (await controller.elect_leaders([("t", 0)], preferred=True))[("t", 0)]

    error = asyncio.run(scenario())
    assert error is not None and "not alive or not in the ISR [1]" in getattr(error, "message", "")
