"""The controller: its rules as pure functions, and against embedded (SQLite) coordination, its caches
fed only by what it reads itself."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from barnabas import time_slices
from barnabas.cluster import Controller, next_partition_state
from barnabas.cluster import controller as controller_module
from barnabas.cluster.brokers import BrokerInfo, BrokerRegistry
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import TopicStore
from barnabas.coordination import Session, Storage, open_storage

EPOCH = 3


def live(*broker_ids: int, epoch: int = EPOCH) -> dict[int, BrokerInfo]:
    return {b: BrokerInfo(b, "127.0.0.1", 9092 + b, epoch=epoch) for b in broker_ids}


def restarted(broker_id: int, *, clean: bool = False) -> dict[int, BrokerInfo]:
    """``broker_id`` registered again: a new incarnation, in the next broker epoch."""
    return {broker_id: BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id, epoch=EPOCH + 1, clean=clean)}


def ps(leader: int, leader_epoch: int, isr: tuple[int, ...], epochs: dict[int, int] | None = None) -> PartitionState:
    return PartitionState(leader, leader_epoch, isr, 0, epochs if epochs is not None else {r: EPOCH for r in isr})


def test_a_leader_back_as_a_new_incarnation_is_replaced_by_an_in_sync_replica_at_a_new_epoch() -> None:
    """However fast it came back, it may have lost what it never flushed (KIP-380)."""
    state = ps(1, 4, (1, 2, 3))
    assert next_partition_state(state, (1, 2, 3), {**live(2, 3), **restarted(1)}, unclean=False) == ps(2, 5, (2, 3))


def test_a_follower_back_as_a_new_incarnation_leaves_the_isr_and_the_leader_stays() -> None:
    state = ps(1, 4, (1, 2, 3))
    assert next_partition_state(state, (1, 2, 3), {**live(1, 3), **restarted(2)}, unclean=False) == ps(1, 4, (1, 3))
    assert next_partition_state(state, (1, 2, 3), live(1, 2, 3), unclean=False) is None


def test_the_last_isr_member_back_as_a_new_incarnation_leads_again_in_its_new_epoch() -> None:
    """As Kafka keeps the last ISR member and elects it when it returns; a cleanly stopped one first."""
    alone = ps(1, 4, (1,))
    assert next_partition_state(alone, (1, 2), {**live(2), **restarted(1)}, unclean=False) == ps(
        1, 5, (1,), {1: EPOCH + 1}
    )
    both_back = {**restarted(1), **restarted(2, clean=True)}
    assert next_partition_state(ps(-1, 4, (1, 2)), (1, 2), both_back, unclean=False) == ps(2, 5, (2,), {2: EPOCH + 1})


def test_no_live_isr_member_leaves_the_partition_without_a_leader_unless_unclean() -> None:
    state = ps(1, 4, (1,))
    assert next_partition_state(state, (1, 2), live(2), unclean=False) == ps(-1, 5, (1,))
    assert next_partition_state(ps(-1, 5, (1,)), (1, 2), live(2), unclean=False) is None
    assert next_partition_state(state, (1, 2), live(2), unclean=True) == ps(2, 5, (2,))


def test_an_isr_member_without_a_recorded_broker_epoch_is_not_in_sync() -> None:
    state = ps(1, 4, (1, 2), {1: EPOCH})
    assert next_partition_state(state, (1, 2), live(1, 2), unclean=False) == ps(1, 4, (1,))


async def _two_brokers(database: Path) -> tuple[Storage, Session, BrokerRegistry, dict[int, int]]:
    """Embedded coordination in ``database`` with brokers 0 and 1 registered on one session; their broker epochs."""
    storage: Storage = await open_storage(f"sqlite://{database}")
    session = await storage.metastore.open_session(10)
    brokers = BrokerRegistry(storage.metastore)
    epochs = {}
    for broker_id in (0, 1):
        registered = await brokers.register(session, BrokerInfo(broker_id, "127.0.0.1", 9092 + broker_id, None))
        epochs[broker_id] = registered.epoch
    return storage, session, brokers, epochs


@asynccontextmanager
async def _acting_controller(
    database: Path, topic: Topic, state: PartitionState
) -> AsyncIterator[tuple[Controller, Session, BrokerRegistry]]:
    """Brokers 0 and 1 live (one session), ``topic`` stored with ``state``, and broker 0 acting as controller."""
    storage, session, brokers, epochs = await _two_brokers(database)
    topics = TopicStore(storage)
    await topics.create(topic, {0: dataclasses.replace(state, broker_epochs={r: epochs[r] for r in state.isr})})
    controller = Controller(storage.metastore, topics, brokers, 0, unclean=lambda _: False)
    running = asyncio.create_task(controller.run(session))
    try:
        async with asyncio.timeout(10):
            while controller.fence is None:
                await asyncio.sleep(0.01)
        yield controller, session, brokers
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await storage.close()


async def _stored_state(database: Path, topic: str, partition: int) -> PartitionState | None:
    storage = await open_storage(f"sqlite://{database}")
    try:
        view = TopicStore(storage)
        await view.load()
        return view.states.get((topic, partition))
    finally:
        await storage.close()


def test_a_preferred_election_sees_an_isr_change_its_cache_missed(tmp_path: Path) -> None:
    """A leader adds the preferred replica to the ISR; the controller has not heard yet but elects it."""

    async def scenario() -> tuple[object, PartitionState | None]:
        database = tmp_path / "c.db"
        topic = Topic("t", uuid.uuid4(), {0: (0, 1)})
        async with _acting_controller(database, topic, PartitionState(1, 1, (1,))) as (controller, _, _):
            storage = await open_storage(f"sqlite://{database}")
            try:
                leader_view = TopicStore(storage)
                await leader_view.load()
                version = leader_view.state_version("t", 0)
                stored = leader_view.states[("t", 0)]
                assert version is not None
                await leader_view.update_state("t", 0, stored.with_isr((1, 0), {0: 1}), version)
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
        async with _acting_controller(tmp_path / "c.db", topic, PartitionState(1, 1, (1,))) as (controller, _, _):
            return (await controller.elect_leaders([("t", 0)], preferred=True))[("t", 0)]

    error = asyncio.run(scenario())
    assert error is not None and "not alive or not in the ISR [1]" in getattr(error, "message", "")


def test_a_broker_registered_again_unseen_loses_its_leadership_at_the_next_pass(tmp_path: Path) -> None:
    """Broker 1 leads and registers again in place: no watch could show it gone, but its epoch moved."""

    async def scenario() -> tuple[int, PartitionState | None]:
        topic = Topic("t", uuid.uuid4(), {0: (1, 0)})
        database = tmp_path / "c.db"
        async with _acting_controller(database, topic, PartitionState(1, 1, (1, 0))) as (controller, session, brokers):
            again = await brokers.register(session, BrokerInfo(1, "127.0.0.1", 9093, None))
            controller.poke()
            async with asyncio.timeout(10):
                while (state := await _stored_state(database, "t", 0)) is not None and state.leader == 1:
                    await asyncio.sleep(0.05)
            return again.epoch, state

    epoch, state = asyncio.run(scenario())
    assert epoch == 2, "the second registration of broker 1"
    assert state is not None and (state.leader, state.leader_epoch, state.isr) == (0, 2, (0,))


def test_an_election_pass_that_yields_decides_each_partition_on_its_state_when_its_turn_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass lets the event loop run between partitions; a state changed meanwhile is not overwritten.

    Broker 1 led every partition and registered again, so each needs a new leader. While the pass
    is under way, the last partition's state moves on (a later leader epoch, broker 0 leading): a
    decision made on the copy read before the change, written under the version read after it,
    would set that partition's leader epoch back.
    """
    monkeypatch.setattr(time_slices, "SLICE_S", 0.0)  # yield before every partition
    partitions = 200

    async def scenario() -> dict[int, PartitionState | None]:
        database = tmp_path / "c.db"
        storage, session, brokers, epochs = await _two_brokers(database)
        topics = TopicStore(storage)
        topic = Topic("t", uuid.uuid4(), dict.fromkeys(range(partitions), (1, 0)))
        led_by_1 = PartitionState(1, 1, (1, 0), 0, {1: epochs[1], 0: epochs[0]})
        await topics.create(topic, dict.fromkeys(range(partitions), led_by_1))
        controller = Controller(storage.metastore, topics, brokers, 0, unclean=lambda _: False)
        await brokers.register(session, BrokerInfo(1, "127.0.0.1", 9093, None))  # broker 1's new incarnation
        running = asyncio.create_task(controller.run(session))
        try:
            async with asyncio.timeout(10):
                while controller.fence is None:
                    await asyncio.sleep(0)
                last = partitions - 1
                version = topics.state_version("t", last)
                assert version is not None
                moved = dataclasses.replace(topics.states[("t", last)], leader=0, leader_epoch=7, isr=(0,))
                await topics.update_state("t", last, dataclasses.replace(moved, broker_epochs={0: epochs[0]}), version)
                while any((s := topics.states.get(("t", p))) is None or s.leader == 1 for p in range(partitions - 1)):
                    await asyncio.sleep(0.01)
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await storage.close()
        return {p: await _stored_state(database, "t", p) for p in range(partitions)}

    stored = asyncio.run(scenario())
    assert all(s is not None and s.leader == 0 and s.leader_epoch == 2 for p, s in stored.items() if p < partitions - 1)
    last = stored[partitions - 1]
    assert last is not None and (last.leader, last.leader_epoch) == (0, 7), last


def test_a_recheck_at_rest_runs_no_pass_and_one_after_the_view_moved_unpoked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timed re-check passes over every partition only when the topics or brokers it sees moved: at
    100,000 partitions a pass takes about a second, every five seconds at rest. A change it was not poked
    about (broker 1 registered again, in place) is still taken up at the next re-check."""
    monkeypatch.setattr(controller_module, "RECHECK_S", 0.02)

    async def scenario() -> tuple[int, int, PartitionState | None]:
        topic = Topic("t", uuid.uuid4(), {0: (1, 0)})
        database = tmp_path / "c.db"
        async with _acting_controller(database, topic, PartitionState(1, 1, (1, 0))) as (controller, session, brokers):
            await _rounds(controller, 3)
            settled = controller.passes
            await _rounds(controller, 20)
            at_rest = controller.passes - settled
            await brokers.register(session, BrokerInfo(1, "127.0.0.1", 9093, None))  # no poke
            async with asyncio.timeout(10):
                while (state := await _stored_state(database, "t", 0)) is not None and state.leader == 1:
                    await asyncio.sleep(0.05)
            return settled, at_rest, state

    settled, at_rest, state = asyncio.run(scenario())
    assert settled >= 1 and at_rest == 0, f"{at_rest} passes in 20 re-checks at rest"
    assert state is not None and (state.leader, state.leader_epoch) == (0, 2)


def test_a_pass_decides_the_topics_that_changed_and_every_partition_when_the_brokers_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader's ISR change reaches the controller as a change of one topic: its pass decides that topic's
    partitions, not all of them (each such change cost a pass over every partition: 92-165 ms at 10,000);
    a broker registering again is decided everywhere."""
    monkeypatch.setattr(controller_module, "RECHECK_S", 0.02)
    names = [f"t{i}" for i in range(20)]

    async def scenario() -> tuple[int, int, PartitionState | None]:
        storage, session, brokers, epochs = await _two_brokers(tmp_path / "c.db")
        topics = TopicStore(storage)
        for name in names:
            state = PartitionState(0, 1, (0, 1), broker_epochs=dict(epochs))
            topic = Topic(name, uuid.uuid4(), {p: (0, 1) for p in range(5)})
            await topics.create(topic, dict.fromkeys(range(5), state))
        controller = Controller(storage.metastore, topics, brokers, 0, unclean=lambda _: False)
        running = asyncio.create_task(controller.run(session))
        try:
            await _rounds(controller, 3)
            before = controller.decided
            version = topics.state_version("t7", 2)
            assert version is not None
            shrunk = topics.states[("t7", 2)].with_isr((0,), {})
            await topics.update_state("t7", 2, shrunk, version)  # as the leader writes an ISR change
            controller.poke()  # as the watch does
            await _rounds(controller, 3)
            one_topic = controller.decided - before
            before = controller.decided
            await brokers.register(session, BrokerInfo(1, "127.0.0.1", 9093, None))  # broker 1 again, a new epoch
            controller.poke()
            await _rounds(controller, 3)
            return one_topic, controller.decided - before, topics.states.get(("t3", 0))
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await storage.close()

    one_topic, everything, moved = asyncio.run(scenario())
    assert one_topic == 5, f"{one_topic} partitions decided for one topic's ISR change"
    assert everything >= 100, f"{everything} partitions decided after a broker registered again"
    assert moved is not None and moved.isr == (0,), "broker 1's new incarnation left every ISR"


async def _rounds(controller: Controller, count: int) -> None:
    """Until the controller's serving loop has gone round ``count`` more times."""
    until = controller.rounds + count
    async with asyncio.timeout(10):
        while controller.rounds < until:
            await asyncio.sleep(0.005)
