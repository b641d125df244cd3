"""The controller against embedded (SQLite) coordination, its caches fed only by what it reads itself."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from barnabas.cluster import Controller
from barnabas.cluster.brokers import BrokerInfo, BrokerRegistry
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import TopicStore
from barnabas.coordination import open_storage


async def _acting_controller(controller: Controller) -> None:
    async with asyncio.timeout(10):
        while controller.fence is None:
            await asyncio.sleep(0.01)


def test_a_preferred_election_sees_an_isr_change_its_cache_missed(tmp_path: Path) -> None:
    """A leader adds the preferred replica to the ISR; the controller has not heard yet but elects it."""

    async def scenario() -> tuple[object, PartitionState | None]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        session = await storage.metastore.open_session(10)
        brokers = BrokerRegistry(storage.metastore)
        for broker_id in (0, 1):
            await brokers.register(session, BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id, None))
        controller_view, leader_view = TopicStore(storage), TopicStore(storage)
        topic = Topic("t", uuid.uuid4(), {0: (0, 1)})
        await controller_view.create(topic, {0: PartitionState(1, 1, (1,))})
        controller = Controller(storage.metastore, controller_view, brokers, 0, unclean=lambda _: False)
        running = asyncio.create_task(controller.run(session))
        try:
            await _acting_controller(controller)
            await leader_view.load()
            version = leader_view.state_version("t", 0)
            assert version is not None
            await leader_view.update_state("t", 0, PartitionState(1, 1, (1, 0)), version)
            result = await controller.elect_leaders([("t", 0)], preferred=True)
            await leader_view.load()
            return result[("t", 0)], leader_view.states.get(("t", 0))
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await storage.close()

    error, stored = asyncio.run(scenario())
    assert error is None
    assert stored is not None and stored.leader == 0 and stored.leader_epoch == 2


def test_a_preferred_election_is_refused_while_the_store_lacks_the_replica_in_the_isr(tmp_path: Path) -> None:
    async def scenario() -> object:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        session = await storage.metastore.open_session(10)
        brokers = BrokerRegistry(storage.metastore)
        for broker_id in (0, 1):
            await brokers.register(session, BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id, None))
        topics = TopicStore(storage)
        await topics.create(Topic("t", uuid.uuid4(), {0: (0, 1)}), {0: PartitionState(1, 1, (1,))})
        controller = Controller(storage.metastore, topics, brokers, 0, unclean=lambda _: False)
        running = asyncio.create_task(controller.run(session))
        try:
            await _acting_controller(controller)
            return (await controller.elect_leaders([("t", 0)], preferred=True))[("t", 0)]
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await storage.close()

    error = asyncio.run(scenario())
    assert error is not None and "not alive or not in the ISR [1]" in getattr(error, "message", "")
