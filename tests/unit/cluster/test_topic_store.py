"""The topic cache against embedded (SQLite) coordination, with reads interleaved the way watches interleave them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.topic_store import PARTITIONS_PREFIX, TopicStore
from barnabas.coordination import Storage, Versioned, open_storage


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
