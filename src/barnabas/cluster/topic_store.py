"""Topics and partition states in coordination storage, with a write-through cache.

Rules this module keeps:

- Storage is the source of truth; the in-memory maps mirror what this process wrote or read.
  ``refresh(keys)`` re-reads keys another broker changed (the metadata watcher calls it on
  watch hints, and ``load()`` on a Resync); nothing is ever applied from an event's content.
- The ``topics/<name>`` document is the commit point: it is written after the partition
  states on creation and deleted before them on deletion, so a crash in between leaves
  orphan partition keys at worst, which the next creation overwrites.
- Changes to an existing topic are compare-and-set on its document's version; changes to a
  partition state are compare-and-set on its key's version (``update_state``), fenced by the
  controller's epoch when the controller makes them (``update_state_fenced``).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable

from barnabas.coordination import Check, Fence, KeyExistsError, Put, Storage, VersionConflictError

from .model import PartitionState, Topic

__all__ = ["PARTITIONS_PREFIX", "TOPICS_PREFIX", "TopicExistsError", "TopicStore"]

CLUSTER_ID_KEY = "cluster/id"
TOPICS_PREFIX = "topics/"
PARTITIONS_PREFIX = "partitions/"

log = logging.getLogger(__name__)

#: Loads that overlap a change of the cache are read again, up to this many times in all.
LOAD_ATTEMPTS = 5


class TopicExistsError(Exception):
    """A topic of that name exists already."""


def _topic_key(name: str) -> str:
    return f"{TOPICS_PREFIX}{name}"


def _partition_key(name: str, partition: int) -> str:
    return f"{PARTITIONS_PREFIX}{name}/{partition}"


def _parse_partition_key(key: str) -> tuple[str, int] | None:
    name, _, partition = key.removeprefix(PARTITIONS_PREFIX).rpartition("/")
    return (name, int(partition)) if name and partition.isdigit() else None


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class TopicStore:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.topics: dict[str, Topic] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self._versions: dict[str, int] = {}
        self._state_versions: dict[tuple[str, int], int] = {}
        #: Bumped by every change to ``topics`` or ``states``: whatever was derived from an older
        #: generation (the Metadata handler's per-topic answers) is stale.
        self.generation = 0

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
        """Read every topic and partition state from storage into the cache.

        The two listings are not one snapshot, and the cache may change while they are read (a
        topic created here, a watch event applied): a listing that saw a topic but not all of its
        states reads the missing ones by key, and one that overlapped a change of the cache is
        read again, so a load never drops what the cache learned meanwhile.
        """
        for attempt in range(LOAD_ATTEMPTS):
            before = self.generation
            topics = await self._storage.list(TOPICS_PREFIX)
            states = await self._storage.list(PARTITIONS_PREFIX)
            parsed: dict[str, tuple[Topic, int]] = {}
            for key, versioned in topics.items():
                name = key.removeprefix(TOPICS_PREFIX)
                topic = Topic.from_json(name, versioned.value)
                parsed[name] = (topic, versioned.version)
                for partition in topic.assignment:
                    state_key = _partition_key(name, partition)
                    if state_key not in states and (found := await self._storage.get(state_key)) is not None:
                        states[state_key] = found
            if self.generation == before:
                break
            if attempt == LOAD_ATTEMPTS - 1:
                log.warning("topic metadata kept changing during %d loads; using the last", LOAD_ATTEMPTS)
        self.topics = {name: topic for name, (topic, _) in parsed.items()}
        self._versions = {name: version for name, (_, version) in parsed.items()}
        self.states = {}
        self._state_versions = {}
        for key, versioned in states.items():
            tp = _parse_partition_key(key)
            if tp is not None and tp[0] in self.topics:
                self.states[tp] = PartitionState.from_json(versioned.value)
                self._state_versions[tp] = versioned.version
        self.generation += 1

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read these ``topics/`` and ``partitions/`` keys (changed elsewhere) into the cache.

        A topic read here brings along any of its partition states the cache lacks: their own
        change events may have been folded into a load that ran before the topic was listed.
        """
        ordered = sorted(keys, key=lambda k: (not k.startswith(TOPICS_PREFIX), k))
        missing: list[str] = []
        for key in ordered:
            versioned = await self._storage.get(key)
            self.generation += 1
            if key.startswith(TOPICS_PREFIX):
                name = key.removeprefix(TOPICS_PREFIX)
                if versioned is None:
                    self.topics.pop(name, None)
                    self._versions.pop(name, None)
                    for gone in [tp for tp in self.states if tp[0] == name]:
                        del self.states[gone]
                        self._state_versions.pop(gone, None)
                else:
                    topic = self.topics[name] = Topic.from_json(name, versioned.value)
                    self._versions[name] = versioned.version
                    missing += [_partition_key(name, p) for p in topic.assignment if (name, p) not in self.states]
            elif (tp := _parse_partition_key(key)) is not None:
                if versioned is None:
                    self.states.pop(tp, None)
                    self._state_versions.pop(tp, None)
                else:
                    self.states[tp] = PartitionState.from_json(versioned.value)
                    self._state_versions[tp] = versioned.version
        if missing:
            await self.refresh([k for k in missing if k not in ordered])

    async def refresh_state(self, topic: str, partition: int) -> None:
        """Re-read one partition's state, for a decision that must not rest on a stale cache."""
        await self.refresh([_partition_key(topic, partition)])

    def state_version(self, topic: str, partition: int) -> int | None:
        return self._state_versions.get((topic, partition))

    async def update_state(self, topic: str, partition: int, state: PartitionState, expected_version: int) -> int:
        """Compare-and-set a partition state (a leader changing its ISR, as ZooKeeper-mode Kafka).

        Raises:
            VersionConflictError: the state changed since ``expected_version``; the cache now holds
                the newer one, so the caller can decide again.
        """
        return await self._write_state(
            topic, partition, state, lambda key: self._storage.compare_and_set(key, state.to_json(), expected_version)
        )

    async def update_state_fenced(
        self, fence: Fence, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> int:
        """``update_state`` that also fails (FencedError) unless ``fence`` is the current controller."""

        async def write(key: str) -> int:
            checks, ops = [Check(key, expected_version)], [Put(key, state.to_json())]
            return (await self._storage.fenced_write(fence, checks, ops))[key]

        return await self._write_state(topic, partition, state, write)

    async def _write_state(
        self, topic: str, partition: int, state: PartitionState, write: Callable[[str], Awaitable[int]]
    ) -> int:
        key = _partition_key(topic, partition)
        try:
            version = await write(key)
        except VersionConflictError:
            await self.refresh([key])  # learn what beat this write
            raise
        self.states[(topic, partition)] = state
        self._state_versions[(topic, partition)] = version
        self.generation += 1
        return version

    async def move_fenced(
        self, fence: Fence, topic: Topic, states: dict[int, PartitionState], expected_versions: dict[int, int]
    ) -> None:
        """Write a topic's document and some of its partition states in one fenced commit.

        The controller starts, completes and cancels reassignments this way: the replica set and
        the leader/ISR change together or not at all.

        Raises:
            FencedError: ``fence`` is no longer the current controller.
            VersionConflictError: the topic or one of the states changed since it was read; the
                cache now holds the newer ones.
        """
        topic_key = _topic_key(topic.name)
        state_keys = {p: _partition_key(topic.name, p) for p in states}
        checks = [Check(topic_key, self._versions[topic.name])]
        checks += [Check(state_keys[p], expected_versions[p]) for p in states]
        ops = [Put(topic_key, topic.to_json())] + [Put(state_keys[p], s.to_json()) for p, s in states.items()]
        try:
            versions = await self._storage.fenced_write(fence, checks, ops)
        except VersionConflictError:
            await self.refresh([topic_key, *state_keys.values()])
            raise
        self.generation += 1
        self.topics[topic.name] = topic
        self._versions[topic.name] = versions[topic_key]
        for partition, state in states.items():
            self.states[(topic.name, partition)] = state
            self._state_versions[(topic.name, partition)] = versions[state_keys[partition]]

    async def create(self, topic: Topic, states: dict[int, PartitionState]) -> None:
        """Store a new topic and its partition states.

        Raises:
            TopicExistsError: the name is taken.
        """
        if await self._storage.get(_topic_key(topic.name)) is not None:
            raise TopicExistsError(topic.name)
        versions = {p: await self._put(_partition_key(topic.name, p), state.to_json()) for p, state in states.items()}
        try:
            version = await self._storage.put_if_absent(_topic_key(topic.name), topic.to_json())
        except KeyExistsError:
            raise TopicExistsError(topic.name) from None
        self.generation += 1
        self.topics[topic.name] = topic
        self._versions[topic.name] = version
        for partition, state in states.items():
            self.states[(topic.name, partition)] = state
            self._state_versions[(topic.name, partition)] = versions[partition]

    async def delete(self, name: str) -> Topic | None:
        """Remove a topic and its partition states; return what was removed."""
        topic = self.topics.pop(name, None)
        self._versions.pop(name, None)
        self.generation += 1
        await self._storage.delete(_topic_key(name))
        for key in await self._storage.list(f"{PARTITIONS_PREFIX}{name}/"):
            await self._storage.delete(key)
        for tp in [tp for tp in self.states if tp[0] == name]:
            del self.states[tp]
            self._state_versions.pop(tp, None)
        self.generation += 1
        return topic

    async def update(self, topic: Topic, new_states: dict[int, PartitionState] | None = None) -> None:
        """Replace a topic's document (config or added partitions) with compare-and-set.

        Raises:
            VersionConflictError: someone else changed the topic since it was loaded.
        """
        added = new_states or {}
        versions = {p: await self._put(_partition_key(topic.name, p), state.to_json()) for p, state in added.items()}
        version = await self._storage.compare_and_set(
            _topic_key(topic.name), topic.to_json(), self._versions[topic.name]
        )
        self.generation += 1
        self.topics[topic.name] = topic
        self._versions[topic.name] = version
        for partition, state in (new_states or {}).items():
            self.states[(topic.name, partition)] = state
            self._state_versions[(topic.name, partition)] = versions[partition]

    async def _put(self, key: str, value: bytes) -> int:
        """Create or overwrite ``key`` whatever its version; return the new version."""
        while True:
            current = await self._storage.get(key)
            try:
                if current is None:
                    return await self._storage.put_if_absent(key, value)
                return await self._storage.compare_and_set(key, value, current.version)
            except VersionConflictError:
                continue
