"""The topic cache against embedded (SQLite) coordination, with reads interleaved the way watches interleave them."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from barnabas import time_slices
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import (
    LOAD_ATTEMPTS,
    PARTITIONS_PREFIX,
    STATES_PER_COMMIT,
    TOPICS_PREFIX,
    TopicExistsError,
    TopicStore,
)
from barnabas.coordination import LeaderElection, Storage, Versioned, open_storage


def _topic(name: str, partitions: int = 2) -> tuple[Topic, dict[int, PartitionState]]:
    topic = Topic(name, uuid.uuid4(), {p: (0,) for p in range(partitions)})
    return topic, {p: PartitionState(0, 0, (0,)) for p in range(partitions)}


class _BetweenListings(Storage):
    """Real storage that runs ``between`` once, just before a load lists the partition states."""

    def __init__(self, storage: Storage, between: Callable[[], Awaitable[None]]) -> None:
        super().__init__(storage.metastore)
        self._between: Callable[[], Awaitable[None]] | None = between

    async def list(self, prefix: str) -> dict[str, Versioned]:
        if prefix == PARTITIONS_PREFIX and self._between is not None:
            between, self._between = self._between, None
            await between()
        return await super().list(prefix)


class _ReadThenMeanwhile(Storage):
    """Real storage whose next get of ``key`` reads, then runs ``meanwhile`` before it answers: the answer is
    older than what happened meanwhile, as a watch's read overtaken by this process's own write."""

    def __init__(self, storage: Storage, key: str, meanwhile: Callable[[], Awaitable[None]]) -> None:
        super().__init__(storage.metastore)
        self._key = key
        self._meanwhile: Callable[[], Awaitable[None]] | None = meanwhile

    async def get(self, key: str) -> Versioned | None:
        found = await super().get(key)
        if key == self._key and self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            await meanwhile()
        return found


def test_a_read_overtaken_by_a_local_write_does_not_take_the_cache_back(tmp_path: Path) -> None:
    """A leader shrank an ISR while its watch re-read the key for the expansion a moment before: the cache, and
    so Metadata, showed the expanded ISR again (a 100-cycle network-partition run caught a cut-off leader
    answering [0, 1, 2] after it had shrunk the ISR to [2])."""

    async def scenario() -> tuple[PartitionState, PartitionState]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            topic, states = _topic("orders", 1)
            await TopicStore(storage).create(topic, states)
            store: TopicStore | None = None
            written: list[PartitionState] = []

            async def write_meanwhile() -> None:
                assert store is not None
                version = store.state_version("orders", 0)
                assert version is not None
                written.append(dataclasses.replace(store.states[("orders", 0)], leader_epoch=1))
                await store.update_state("orders", 0, written[0], version)

            store = TopicStore(_ReadThenMeanwhile(storage, f"{PARTITIONS_PREFIX}orders/0", write_meanwhile))
            await store.load()
            await store.refresh([f"{PARTITIONS_PREFIX}orders/0"])  # read before the write, answered after it
            return store.states[("orders", 0)], written[0]
        finally:
            await storage.close()

    cached, newer = asyncio.run(scenario())
    assert cached == newer


def test_a_topic_read_by_key_brings_the_partition_states_the_cache_lacks(tmp_path: Path) -> None:
    """Its partitions' change events may have been folded into an earlier load that missed them."""

    async def scenario() -> dict[tuple[str, int], PartitionState]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("orders"))
            watcher_view = TopicStore(storage)
            await watcher_view.refresh(["topics/orders"])
            return watcher_view.states
        finally:
            await storage.close()

    assert set(asyncio.run(scenario())) == {("orders", 0), ("orders", 1)}


def test_a_load_overlapping_a_local_create_keeps_the_new_topic(tmp_path: Path) -> None:
    """The topic listing misses the topic, the state listing has it: the load reads again."""

    async def scenario() -> tuple[set[str], set[tuple[str, int]]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("existing"))
            store: TopicStore | None = None

            async def create_meanwhile() -> None:
                assert store is not None
                await store.create(*_topic("created"))

            store = TopicStore(_BetweenListings(storage, create_meanwhile))
            await store.load()
            return set(store.topics), set(store.states)
        finally:
            await storage.close()

    topics, states = asyncio.run(scenario())
    assert topics == {"existing", "created"}
    assert states == {("existing", 0), ("existing", 1), ("created", 0), ("created", 1)}


class _ChangingListings(Storage):
    """Real storage that runs ``before_states(n)`` before its n-th listing of the partition states."""

    def __init__(self, storage: Storage, before_states: Callable[[int], Awaitable[None]]) -> None:
        super().__init__(storage.metastore)
        self._before_states = before_states
        self._listings = 0

    async def list(self, prefix: str) -> dict[str, Versioned]:
        if prefix == PARTITIONS_PREFIX:
            self._listings += 1
            await self._before_states(self._listings)
        return await super().list(prefix)


def test_a_load_overlapping_changes_every_time_keeps_a_topic_created_meanwhile(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker starting: its topics and partitions watches each begin with a resync (two loads), watch
    events are applied and admin requests arrive meanwhile. Every attempt of this load overlaps a
    change and the last one a topic created here after its topic listing: the cache keeps that topic."""

    async def scenario() -> tuple[set[str], set[tuple[str, int]]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("existing"))
            store: TopicStore | None = None

            async def change(listing: int) -> None:
                assert store is not None
                if listing < LOAD_ATTEMPTS:
                    await store.refresh(["topics/existing"])  # a watch event applied
                elif listing == LOAD_ATTEMPTS:
                    await store.create(*_topic("created"))

            store = TopicStore(_ChangingListings(storage, change))
            await store.load()
            return set(store.topics), set(store.states)
        finally:
            await storage.close()

    with caplog.at_level(logging.INFO):
        topics, states = asyncio.run(scenario())
    assert "kept changing" in caplog.text  # the case this test is about
    assert topics == {"existing", "created"}
    assert states == {("existing", 0), ("existing", 1), ("created", 0), ("created", 1)}


def test_loads_at_once_each_keep_their_own_account_of_changes(tmp_path: Path) -> None:
    """Two resync loads overlap, the later one ends first, and a topic is created before the first ends."""

    async def scenario() -> set[str]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("existing"))
            reached, go_on = asyncio.Event(), asyncio.Event()

            async def hold_the_first(listing: int) -> None:
                if listing == 1:
                    reached.set()
                    await go_on.wait()

            store = TopicStore(_ChangingListings(storage, hold_the_first))
            first = asyncio.create_task(store.load())
            await reached.wait()
            await store.load()
            await store.create(*_topic("created"))
            go_on.set()
            await first
            return set(store.topics)
        finally:
            await storage.close()

    assert asyncio.run(scenario()) == {"existing", "created"}


def _proposal(name: str, broker: int, partitions: int) -> tuple[Topic, dict[int, PartitionState]]:
    """What broker ``broker`` would store for a new topic: itself leading every partition."""
    topic = Topic(name, uuid.uuid4(), {p: (broker, (broker + 1) % 3) for p in range(partitions)})
    return topic, {p: PartitionState(broker, 0, (broker,), 0, {broker: 1}) for p in range(partitions)}


def test_brokers_creating_one_topic_at_once_store_exactly_the_winners_topic_and_states(tmp_path: Path) -> None:
    """The loser of a creation race writes nothing: no state of its own lands beside the winner's topic."""

    async def scenario() -> list[str]:
        stores = [await open_storage(f"sqlite://{tmp_path / 'c.db'}") for _ in range(3)]
        problems: list[str] = []
        try:
            for round_ in range(20):
                name = f"race-{round_}"
                proposals = {b: _proposal(name, b, 6) for b in range(3)}
                results = await asyncio.gather(
                    *(TopicStore(stores[b]).create(*proposals[b]) for b in range(3)), return_exceptions=True
                )
                winners = [b for b, result in enumerate(results) if result is None]
                if len(winners) != 1 or not all(isinstance(r, TopicExistsError) for r in results if r is not None):
                    problems.append(f"{name}: outcomes {results}")
                    continue
                view = TopicStore(stores[0])
                await view.load()
                expected_topic, expected_states = proposals[winners[0]]
                if view.topics[name] != expected_topic:
                    problems.append(f"{name}: stored topic is not the winner's")
                for partition, state in expected_states.items():
                    stored = view.states.get((name, partition))
                    wanted = dataclasses.replace(state, topic_id=expected_topic.topic_id)
                    if stored != wanted:
                        problems.append(f"{name}-{partition}: stored {stored}, the winner wrote {wanted}")
        finally:
            for storage in stores:
                await storage.close()
        return problems

    assert asyncio.run(scenario()) == []


def test_states_left_by_a_deleted_topic_are_ignored_and_written_over_by_its_successor(tmp_path: Path) -> None:
    async def scenario() -> tuple[set[tuple[str, int]], dict[int, int], int]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            old, old_states = _topic("orders", 4)
            await TopicStore(storage).create(old, old_states)
            await storage.delete(f"{TOPICS_PREFIX}orders")  # a deletion that stopped after the document
            new, new_states = _topic("orders", 2)
            store = TopicStore(storage)
            await store.load()
            before = set(store.states)
            await store.create(new, {p: dataclasses.replace(s, leader_epoch=5) for p, s in new_states.items()})
            view = TopicStore(storage)
            await view.load()
            epochs = {p: view.states[("orders", p)].leader_epoch for p in new.assignment}
            leftovers = await storage.list(f"{PARTITIONS_PREFIX}orders/")
            return before, epochs, len(leftovers)
        finally:
            await storage.close()

    before, epochs, stored_keys = asyncio.run(scenario())
    assert before == set(), "orphan states belong to no cached topic"
    assert epochs == {0: 5, 1: 5}, "the new topic's states replaced the orphans"
    assert stored_keys == 4, "orphans beyond the new topic's partitions stay, and are ignored"


def test_deleting_a_topic_leaves_the_states_of_its_successor_alone(tmp_path: Path) -> None:
    async def scenario() -> set[tuple[str, int]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            deleter = TopicStore(storage)
            await deleter.create(*_topic("orders"))
            successor = TopicStore(storage)
            await storage.delete(f"{TOPICS_PREFIX}orders")  # another broker deletes the document first
            await successor.create(*_topic("orders"))  # and a third creates the topic again at once
            await deleter.delete("orders")  # the first deleter goes on to remove the states it knew
            view = TopicStore(storage)
            await view.load()
            return set(view.states)
        finally:
            await storage.close()

    assert asyncio.run(scenario()) == {("orders", 0), ("orders", 1)}


def test_many_partitions_are_written_in_several_commits_and_only_where_missing(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int, int]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            topic, states = _topic("wide", 3 * STATES_PER_COMMIT + 7)
            store = TopicStore(storage)
            await store.create(topic, {p: s for p, s in states.items() if p % 2 == 0})
            assert sorted(p for t, p in store.missing_states()) == [p for p in states if p % 2]
            written = await TopicStore(storage).write_new_states(topic, states)
            view = TopicStore(storage)
            await view.load()
            return len(view.states), len(written), len(view.missing_states())
        finally:
            await storage.close()

    count = 3 * STATES_PER_COMMIT + 7
    assert asyncio.run(scenario()) == (count, count // 2, 0)


def test_a_topic_created_again_under_a_new_id_replaces_the_cached_states_of_the_old(tmp_path: Path) -> None:
    async def scenario() -> tuple[set[tuple[str, int]], set[uuid.UUID | None]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("orders", 3))
            watcher_view = TopicStore(storage)
            await watcher_view.load()
            elsewhere = TopicStore(storage)
            await elsewhere.load()
            await elsewhere.delete("orders")
            new, states = _topic("orders", 2)
            await elsewhere.create(new, states)
            await watcher_view.refresh([f"{TOPICS_PREFIX}orders"])  # the watch names the topic only
            return set(watcher_view.states), {s.topic_id for s in watcher_view.states.values()} - {new.topic_id}
        finally:
            await storage.close()

    partitions, other_ids = asyncio.run(scenario())
    assert partitions == {("orders", 0), ("orders", 1)}
    assert other_ids == set(), "no state of the deleted topic stays cached"


def test_many_states_are_written_in_one_commit_and_a_conflict_holds_back_only_itself(tmp_path: Path) -> None:
    async def scenario() -> tuple[set[int], dict[int, int]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            session = await storage.metastore.open_session(10)
            fence = await LeaderElection(storage.metastore, "controller").nominate(session, "0")
            controller = TopicStore(storage)
            await controller.create(*_topic("moved", 3))
            leader = TopicStore(storage)
            await leader.load()
            version = leader.state_version("moved", 1)
            assert version is not None
            await leader.update_state("moved", 1, leader.states[("moved", 1)].with_isr((0,), {0: 2}), version)
            changes = {}
            for partition in range(3):
                state, version = controller.states[("moved", partition)], controller.state_version("moved", partition)
                assert version is not None
                changes[("moved", partition)] = (dataclasses.replace(state, leader_epoch=7), version)
            written = await controller.update_states_fenced(fence, changes)
            view = TopicStore(storage)
            await view.load()
            return {p for _, p in written}, {p: view.states[("moved", p)].leader_epoch for p in range(3)}
        finally:
            await storage.close()

    written, epochs = asyncio.run(scenario())
    assert written == {0, 2}
    assert epochs == {0: 7, 1: 0, 2: 7}, "partition 1 changed meanwhile: its write lost, the others went through"


def test_a_restored_topic_is_stored_with_its_states_and_a_second_restorer_finds_it_taken(tmp_path: Path) -> None:
    """States go first (orphans until the document exists), so no stored topic ever lacks them."""

    async def scenario() -> tuple[bool, bool, dict[tuple[str, int], PartitionState], set[str]]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            topic = Topic("ledger", uuid.uuid4(), {0: (0, 1), 1: (1, 0)}, {"retention.ms": "5"})
            waiting = {p: PartitionState(-1, 0, (), recovered={}) for p in topic.assignment}
            first = await TopicStore(storage).restore(topic, waiting)
            second_store = TopicStore(storage)
            second = await second_store.restore(dataclasses.replace(topic, config={}), waiting)
            reader = TopicStore(storage)
            await reader.load()
            return first, second, reader.states, set(reader.topics["ledger"].config)
        finally:
            await storage.close()

    first, second, states, config = asyncio.run(scenario())
    assert (first, second) == (True, False)
    assert set(states) == {("ledger", 0), ("ledger", 1)}
    assert all(s.recovered == {} and s.leader == -1 for s in states.values())
    assert config == {"retention.ms"}, "the first restorer's document stands"


def test_a_load_lets_other_tasks_run_while_it_decodes_the_partition_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100,000 states took seconds to decode: a broker that had just registered held its event loop
    that long, its coordination session unrenewed. With a slice of zero, other tasks run between them."""
    monkeypatch.setattr(time_slices, "SLICE_S", 0.0)

    async def scenario() -> set[int]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            await TopicStore(storage).create(*_topic("wide", 200))
            view = TopicStore(storage)
            ticks = 0
            seen_at_decode: set[int] = set()
            read_state = view._read_state

            def counting_read_state(key: str, versioned: Versioned) -> PartitionState | None:
                seen_at_decode.add(ticks)
                return read_state(key, versioned)

            view._read_state = counting_read_state  # type: ignore[method-assign]
            loading = asyncio.ensure_future(view.load())
            while not loading.done():
                ticks += 1
                await asyncio.sleep(0)
            await loading
            assert len(view.states) == 200
            return seen_at_decode
        finally:
            await storage.close()

    seen = asyncio.run(scenario())
    assert len(seen) > 100, f"the decodes ran in {len(seen)} slices"


def test_a_state_changed_while_a_load_decodes_keeps_its_newer_value(tmp_path: Path) -> None:
    """What the watch reads while a load decodes (the watches' resync at start) is newer than the load's
    listing, as during the listings."""

    async def scenario() -> tuple[PartitionState, PartitionState]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            elsewhere = TopicStore(storage)
            await elsewhere.create(*_topic("wide", 2_000))
            await elsewhere.load()
            view = TopicStore(storage)
            await view.load()  # the broker's first load, before its watches start
            decoding, release = asyncio.Event(), asyncio.Event()
            decode_states = view._decode_states

            async def held_decode_states(states: Mapping[str, Versioned]) -> dict[str, PartitionState | None]:
                # Held once listed, until the change has been read: racing a 2,000-state decode
                # against a write and a refresh lost on a loaded machine.
                decoding.set()
                await release.wait()
                return await decode_states(states)

            view._decode_states = held_decode_states  # type: ignore[method-assign]
            loading = asyncio.ensure_future(view.load())
            await decoding.wait()
            version = elsewhere.state_version("wide", 7)
            assert version is not None
            changed = elsewhere.states[("wide", 7)].with_isr((0,), {0: 5})
            await elsewhere.update_state("wide", 7, changed, version)
            await view.refresh([f"{PARTITIONS_PREFIX}wide/7"])  # what the watch does on the change
            assert not loading.done(), "the load was still decoding when the change was read"
            release.set()
            await loading
            return view.states[("wide", 7)], changed
        finally:
            await storage.close()

    cached, changed = asyncio.run(scenario())
    assert cached == changed
