"""The proxy following the brokers' metadata in a real coordination store (embedded SQLite, in process)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from barnabas.cluster import BrokerInfo, BrokerRegistry, PartitionState, Topic, TopicStore
from barnabas.coordination import open_storage
from barnabas.groups import partition_for
from barnabas.proxy.cluster_view import OFFSETS_TOPIC, ClusterView
from barnabas.proxy.links import BrokerLinks
from barnabas.proxy.store_follower import StoreFollower
from tests.support.polling import until


def run(tmp_path: Path, scenario: Callable[[TopicStore, BrokerRegistry, ClusterView], Awaitable[None]]) -> None:
    async def main() -> None:
        storage = await open_storage(f"sqlite:///{tmp_path / 'coordination.db'}")
        session = await storage.metastore.open_session(5.0)
        topics, brokers = TopicStore(storage), BrokerRegistry(storage.metastore)
        for broker_id in (1, 2, 3):
            await brokers.register(session, BrokerInfo(broker_id, f"broker-{broker_id}", 9092, f"r{broker_id}"))
        view = ClusterView([], BrokerLinks(client_id="t", connect_timeout_s=1, request_timeout_s=1))
        follower = StoreFollower(storage, view)
        await follower.start()
        try:
            await scenario(topics, brokers, view)
        finally:
            await follower.stop()
            await session.close()
            await storage.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def topic(name: str, partitions: int) -> Topic:
    return Topic(name, uuid.uuid4(), {p: (1, 2, 3) for p in range(partitions)})


def test_a_new_leader_reaches_the_view_when_it_is_written(tmp_path: Path) -> None:
    async def scenario(topics: TopicStore, _: BrokerRegistry, view: ClusterView) -> None:
        created = topic("orders", 2)
        states = {p: PartitionState(1, 0, (1, 2, 3), topic_id=created.topic_id) for p in range(2)}
        await topics.create(created, states)
        await until(lambda: view.leader("orders", 1) is not None, "the topic reaches the view")
        leader = view.leader("orders", 1)
        assert leader is not None and (leader.broker_id, leader.host, leader.rack) == (1, "broker-1", "r1")
        assert view.topic_ids["orders"] == created.topic_id
        assert sorted(view.brokers) == [1, 2, 3]
        version = topics.state_version("orders", 1)
        assert version is not None
        await topics.update_state("orders", 1, PartitionState(3, 1, (3, 2), topic_id=created.topic_id), version)
        await until(lambda: view.leader("orders", 1) is not None and view.leader("orders", 1).broker_id == 3, "3 leads")  # type: ignore[union-attr]
        assert view.partitions[("orders", 1)].leader_epoch == 1
        assert view.leader("orders", 0).broker_id == 1  # type: ignore[union-attr]

    run(tmp_path, scenario)


def test_a_leader_that_is_not_live_is_no_leader(tmp_path: Path) -> None:
    async def scenario(topics: TopicStore, _: BrokerRegistry, view: ClusterView) -> None:
        await topics.create(topic("stale", 1), {0: PartitionState(9, 0, (9,))})
        await until(lambda: ("stale", 0) in view.partitions, "the topic reaches the view")
        assert view.partitions[("stale", 0)].leader_id == -1 and view.leader("stale", 0) is None

    run(tmp_path, scenario)


def test_group_coordinator_is_the_leader_of_its_offsets_partition(tmp_path: Path) -> None:
    async def scenario(topics: TopicStore, _: BrokerRegistry, view: ClusterView) -> None:
        assert view.group_coordinator("g") is None, "no __consumer_offsets yet"
        await topics.create(topic(OFFSETS_TOPIC, 3), {p: PartitionState(p + 1, 0, (p + 1,)) for p in range(3)})
        await until(lambda: view.offsets_partitions == 3, "__consumer_offsets reaches the view")
        for group in ("g", "orders-readers", "x" * 40):
            coordinator = view.group_coordinator(group)
            assert coordinator is not None and coordinator.broker_id == partition_for(group, 3) + 1

    run(tmp_path, scenario)
