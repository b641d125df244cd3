"""Topics and partition states in coordination storage, with a write-through cache.

Rules this module keeps:

- Storage is the source of truth; the in-memory maps only mirror what this process wrote or
  loaded. (Watches that refresh them from other brokers' writes come with the cluster.)
- The ``topics/<name>`` document is the commit point: it is written after the partition
  states on creation and deleted before them on deletion, so a crash in between leaves
  orphan partition keys at worst, which the next creation overwrites.
- Changes to an existing topic are compare-and-set on its document's version.
"""

from __future__ import annotations

import base64
import contextlib
import uuid

from barnabas.coordination import KeyExistsError, Storage, VersionConflictError

from .model import PartitionState, Topic

__all__ = ["TopicExistsError", "TopicStore"]

CLUSTER_ID_KEY = "cluster/id"


class TopicExistsError(Exception):
    """A topic of that name exists already."""


def _topic_key(name: str) -> str:
    return f"topics/{name}"


def _partition_key(name: str, partition: int) -> str:
    return f"partitions/{name}/{partition}"


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class TopicStore:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.topics: dict[str, Topic] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self._versions: dict[str, int] = {}

    async def cluster_id(self) -> str:
        """The cluster id, created on first use by whoever gets there first."""
        existing = await self._storage.get(CLUSTER_ID_KEY)
        if existing is not None:
            return existing.value.decode()
        with contextlib.suppress(KeyExistsError):
            await self._storage.put_if_absent(CLUSTER_ID_KEY, new_cluster_id().encode())
        stored = await self._storage.get(CLUSTER_ID_KEY)
        assert stored is not None
        return stored.value.decode()

    async def load(self) -> None:
        """Read every topic and partition state from storage into the cache."""
        topics = await self._storage.list("topics/")
        states = await self._storage.list("partitions/")
        self.topics = {}
        self._versions = {}
        for key, versioned in topics.items():
            name = key.removeprefix("topics/")
            self.topics[name] = Topic.from_json(name, versioned.value)
            self._versions[name] = versioned.version
        self.states = {}
        for key, versioned in states.items():
            name, _, partition = key.removeprefix("partitions/").rpartition("/")
            if name in self.topics:
                self.states[(name, int(partition))] = PartitionState.from_json(versioned.value)

    async def create(self, topic: Topic, states: dict[int, PartitionState]) -> None:
        """Store a new topic and its partition states.

        Raises:
            TopicExistsError: the name is taken.
        """
        if await self._storage.get(_topic_key(topic.name)) is not None:
            raise TopicExistsError(topic.name)
        for partition, state in states.items():
            await self._put(_partition_key(topic.name, partition), state.to_json())
        try:
            version = await self._storage.put_if_absent(_topic_key(topic.name), topic.to_json())
        except KeyExistsError:
            raise TopicExistsError(topic.name) from None
        self.topics[topic.name] = topic
        self._versions[topic.name] = version
        for partition, state in states.items():
            self.states[(topic.name, partition)] = state

    async def delete(self, name: str) -> Topic | None:
        """Remove a topic and its partition states; return what was removed."""
        topic = self.topics.pop(name, None)
        self._versions.pop(name, None)
        await self._storage.delete(_topic_key(name))
        for key in await self._storage.list(f"partitions/{name}/"):
            await self._storage.delete(key)
        for tp in [tp for tp in self.states if tp[0] == name]:
            del self.states[tp]
        return topic

    async def update(self, topic: Topic, new_states: dict[int, PartitionState] | None = None) -> None:
        """Replace a topic's document (config or added partitions) with compare-and-set.

        Raises:
            VersionConflictError: someone else changed the topic since it was loaded.
        """
        for partition, state in (new_states or {}).items():
            await self._put(_partition_key(topic.name, partition), state.to_json())
        version = await self._storage.compare_and_set(
            _topic_key(topic.name), topic.to_json(), self._versions[topic.name]
        )
        self.topics[topic.name] = topic
        self._versions[topic.name] = version
        for partition, state in (new_states or {}).items():
            self.states[(topic.name, partition)] = state

    async def _put(self, key: str, value: bytes) -> None:
        """Create or overwrite ``key`` whatever its version."""
        while True:
            current = await self._storage.get(key)
            try:
                if current is None:
                    await self._storage.put_if_absent(key, value)
                else:
                    await self._storage.compare_and_set(key, value, current.version)
                return
            except VersionConflictError:
                continue
