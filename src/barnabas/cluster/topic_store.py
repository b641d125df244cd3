"""Topics and partition states in coordination storage, with a write-through cache.

Rules this module keeps:

- Storage is the source of truth; the in-memory maps mirror what this process wrote or read.
  ``refresh(keys)`` re-reads keys another broker changed (the metadata watcher calls it on
  watch hints, and ``load()`` on a Resync); nothing is ever applied from an event's content.
- The ``topics/<name>`` document is the commit point of creating, growing and deleting a topic:
  it is written (put-if-absent, or compare-and-set to grow) *before* the partition states of
  new partitions, so of two brokers creating the same topic at once the loser writes nothing,
  and deleted before them on deletion. A partition state names its topic id and is only ever
  taken for the state of the topic with that id: states left behind by a deleted topic (or a
  crash mid-deletion) are orphans, overwritten when a topic of that name is created again.
  New partition states are written only over no state or an orphan (compare-and-set), so a
  state someone else already wrote is never overwritten; a crash before they are written
  leaves partitions without a state, which the controller writes (``missing_states``).
- Changes to an existing topic are compare-and-set on its document's version; changes to a
  partition state are compare-and-set on its key's version (``update_state``), fenced by the
  controller's epoch when the controller makes them (``update_state_fenced``).
- The cache never goes back: a write's result is kept only if no newer version of the key was
  read meanwhile (a watch can deliver a later write before this one's answer arrives).
- A stored value that does not read (CorruptValueError) is logged and set aside, never acted on:
  the cache keeps what it last read of that key, version included (so a compare-and-set from this
  broker never writes over the damaged value on stale knowledge), and the key is listed in
  ``unreadable``. An unreadable topic is not a deleted one: brokers keep its local logs
  (``unreadable_topics``) and the controller writes no fresh state over an unreadable partition
  state (``missing_states``). Where a value is only being replaced by a new topic's, it is garbage:
  a new topic's states are written over unreadable ones as over orphans, and deleting a topic
  deletes its unreadable document and states.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from barnabas.coordination import Check, Delete, Fence, KeyExistsError, Put, Storage, VersionConflictError, Versioned
from barnabas.time_slices import TimeSlices

from .model import PartitionState, Topic
from .stored_values import CorruptValueError, text_value

__all__ = ["PARTITIONS_PREFIX", "TOPICS_PREFIX", "TopicExistsError", "TopicStore"]

CLUSTER_ID_KEY = "cluster/id"
TOPICS_PREFIX = "topics/"
PARTITIONS_PREFIX = "partitions/"

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Loads that overlap a change of the cache are read again, up to this many times in all.
LOAD_ATTEMPTS = 5
#: Partition states written per commit (etcd allows 128 operations in one transaction).
STATES_PER_COMMIT = 50
#: Reads of one key by ``refresh`` while this process keeps writing it (see ``_read_fresh``).
READ_AGAIN_ATTEMPTS = 3
#: Times new partition states are written again after losing a compare-and-set to another writer.
WRITE_ATTEMPTS = 5


class TopicExistsError(Exception):
    """A topic of that name exists already."""


def _topic_key(name: str) -> str:
    return f"{TOPICS_PREFIX}{name}"


def _partition_key(name: str, partition: int) -> str:
    return f"{PARTITIONS_PREFIX}{name}/{partition}"


def _parse_partition_key(key: str) -> tuple[str, int] | None:
    name, _, partition = key.removeprefix(PARTITIONS_PREFIX).rpartition("/")
    return (name, int(partition)) if name and partition.isdigit() and partition.isascii() else None


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclasses.dataclass(slots=True, eq=False)
class _Learned:
    """Topic names and partitions whose cached value changed while a load ran (one per load: compared by identity)."""

    topics: set[str] = dataclasses.field(default_factory=set)
    partitions: set[tuple[str, int]] = dataclasses.field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.topics or self.partitions)

    def covers(self, tp: tuple[str, int] | None) -> bool:
        """Whether the cache's state of ``tp`` is newer than a listing that overlapped the change."""
        return tp is not None and (tp[0] in self.topics or tp in self.partitions)


class TopicStore:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.topics: dict[str, Topic] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self._versions: dict[str, int] = {}
        self._state_versions: dict[tuple[str, int], int] = {}
        #: Keys whose stored value does not read -> the version that did not (see the module rules).
        self.unreadable: dict[str, int] = {}
        #: Bumped by every change to ``topics`` or ``states``: a load that overlapped one reads again.
        self.generation = 0
        #: Per topic name, bumped by every change to its document or one of its partition states, and
        #: the number of whole loads: together they tell an answer derived from one topic is stale
        #: (:meth:`topic_generation`) without every other topic's change making it so.
        self._topic_generations: dict[str, int] = {}
        self._loads_done = 0
        #: Per load in progress, what the cache learned while it ran (see ``load``).
        self._loads: list[_Learned] = []

    def _changed(self, name: str | None = None, tp: tuple[str, int] | None = None) -> None:
        """The cache changed: topic ``name``'s document (present or gone) or partition ``tp``'s state."""
        self.generation += 1
        topic = name if name is not None else tp[0] if tp is not None else None
        if topic is not None:
            self._topic_generations[topic] = self._topic_generations.get(topic, 0) + 1
        for learned in self._loads:
            if name is not None:
                learned.topics.add(name)
            if tp is not None:
                learned.partitions.add(tp)

    @property
    def loads_done(self) -> int:
        """How many whole loads replaced the cache (each may change any topic)."""
        return self._loads_done

    def topic_generation(self, name: str) -> tuple[int, int]:
        """Moves whenever the cached document or a partition state of topic ``name`` changes (a load included)."""
        return self._loads_done, self._topic_generations.get(name, 0)

    @property
    def unreadable_topics(self) -> set[str]:
        """Names of topics whose document does not read: not known, but not deleted either."""
        return {key.removeprefix(TOPICS_PREFIX) for key in self.unreadable if key.startswith(TOPICS_PREFIX)}

    def _read_topic(self, name: str, versioned: Versioned) -> Topic | None:
        """The stored topic, or None (logged once per version, listed as unreadable) if it does not read."""
        return self._read(_topic_key(name), versioned, lambda data: Topic.from_json(name, data))

    def _read_state(self, key: str, versioned: Versioned) -> PartitionState | None:
        """The stored partition state, or None (logged once per version, listed as unreadable)."""
        return self._read(key, versioned, lambda data: PartitionState.from_json(data, f"the partition state {key}"))

    def _read(self, key: str, versioned: Versioned, decode: Callable[[bytes], _T]) -> _T | None:
        try:
            value = decode(versioned.value)
        except CorruptValueError as exc:
            if self.unreadable.get(key) != versioned.version:
                log.error("%s (version %d); it is set aside until it is repaired", exc, versioned.version)
            self.unreadable[key] = versioned.version
            return None
        self.unreadable.pop(key, None)
        return value

    async def cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id, created on first use by whoever gets there first.

        A store without one takes ``proposed`` if given: the id in the proposer's log dirs, so a
        cluster recreated on its old volumes keeps its id (Strimzi's users meet "Invalid
        cluster.id" there), else a new random one.

        Raises:
            CorruptValueError: the stored id is not text; a broker cannot start without knowing its cluster.
        """
        existing = await self._storage.get(CLUSTER_ID_KEY)
        if existing is not None:
            return text_value(existing.value, f"the cluster id {CLUSTER_ID_KEY}")
        with contextlib.suppress(KeyExistsError):
            await self._storage.put_if_absent(CLUSTER_ID_KEY, (proposed or new_cluster_id()).encode())
            if proposed is not None:
                log.warning("the coordination store had no cluster id: it takes %s, this broker's dirs'", proposed)
        stored = await self._storage.get(CLUSTER_ID_KEY)
        assert stored is not None
        return text_value(stored.value, f"the cluster id {CLUSTER_ID_KEY}")

    async def load(self) -> None:
        """Read every topic and partition state from storage into the cache.

        The two listings are not one snapshot, and the cache may change while they are read (a
        topic created here, a watch event applied): a listing that saw a topic but not all of its
        states reads the missing ones by key, and one that overlapped a change of the cache is
        read again. Changes keep coming while a broker starts (its topics and partitions watches
        each begin with a resync: two loads at once, while admin requests arrive), so whatever the
        last attempt overlapped, each topic the cache learned about meanwhile keeps what it
        learned: a load never drops a topic created here (the watch reads each of them again).
        """
        learned = _Learned()
        self._loads.append(learned)
        try:
            await self._load(learned)
        finally:
            self._loads.remove(learned)

    async def _load(self, learned: _Learned) -> None:
        for attempt in range(LOAD_ATTEMPTS):
            before = self.generation
            topics = await self._storage.list(TOPICS_PREFIX)
            states = await self._storage.list(PARTITIONS_PREFIX)
            parsed: dict[str, tuple[Topic, int]] = {}
            for key, versioned in topics.items():
                name = key.removeprefix(TOPICS_PREFIX)
                topic = self._read_topic(name, versioned)
                if topic is None:
                    if name in self.topics:  # keep what was last read (see the module rules)
                        parsed[name] = (self.topics[name], self._versions[name])
                    continue
                parsed[name] = (topic, versioned.version)
                for partition in topic.assignment:
                    state_key = _partition_key(name, partition)
                    if state_key not in states and (found := await self._storage.get(state_key)) is not None:
                        states[state_key] = found
            if self.generation == before:
                break
            if attempt == LOAD_ATTEMPTS - 1:
                log.info("topic metadata kept changing during %d loads; keeping what changed meanwhile", LOAD_ATTEMPTS)
        decoded = await self._decode_states(states)
        for name in learned.topics:  # what the cache learned while listing is at least as new as the listing
            if name in self.topics:
                parsed[name] = (self.topics[name], self._versions[name])
            else:
                parsed.pop(name, None)
        listed = {k: v for k, v in states.items() if not learned.covers(_parse_partition_key(k))}
        self.topics = {name: topic for name, (topic, _) in parsed.items()}
        self._versions = {name: version for name, (_, version) in parsed.items()}
        cached, cached_versions = self.states, self._state_versions
        self.states = {}
        self._state_versions = {}
        for key, versioned in listed.items():
            tp = _parse_partition_key(key)
            if tp is None:
                continue
            state, version = self._state_if_of(tp, decoded[key]), versioned.version
            if state is None and key in self.unreadable and tp in cached:
                state, version = cached[tp], cached_versions[tp]  # keep what was last read
            if state is not None:
                self.states[tp] = state
                self._state_versions[tp] = version
        for tp in [tp for tp in cached if learned.covers(tp) and tp[0] in self.topics]:
            if not _of(self.topics[tp[0]], tp, cached[tp]):
                continue
            self.states[tp] = cached[tp]
            self._state_versions[tp] = cached_versions[tp]
        self.unreadable = {k: v for k, v in self.unreadable.items() if k in topics or k in states}
        self.generation += 1
        self._loads_done += 1

    async def _decode_states(self, states: Mapping[str, Versioned]) -> dict[str, PartitionState | None]:
        """Each listed partition state decoded (None: unreadable), letting the event loop run every
        ``SLICE_S``: 100,000 of them took seconds, and a broker that had just registered held its event
        loop that long while it loaded, its coordination session unrenewed. What changes meanwhile is
        what the load learns (``_Learned``), as during the listings."""
        decoded: dict[str, PartitionState | None] = {}
        slices = TimeSlices()
        for key, versioned in states.items():
            if slices.due():
                await asyncio.sleep(0)
            decoded[key] = self._read_state(key, versioned)
        return decoded

    def _state_of(self, tp: tuple[str, int], versioned: Versioned) -> PartitionState | None:
        """The stored state if it belongs to the cached topic of that name (else an orphan, or unreadable: None)."""
        return self._state_if_of(tp, self._read_state(_partition_key(*tp), versioned))

    def _state_if_of(self, tp: tuple[str, int], state: PartitionState | None) -> PartitionState | None:
        """``state`` if it belongs to the cached topic of ``tp``'s name, else None (an orphan)."""
        topic = self.topics.get(tp[0])
        return state if topic is not None and state is not None and _of(topic, tp, state) else None

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read these ``topics/`` and ``partitions/`` keys (changed elsewhere) into the cache.

        A topic read here brings along any of its partition states the cache lacks: their own
        change events may have been folded into a load that ran before the topic was listed.
        """
        ordered = sorted(keys, key=lambda k: (not k.startswith(TOPICS_PREFIX), k))
        missing: list[str] = []
        for key in ordered:
            versioned = await self._read_fresh(key)
            if key.startswith(TOPICS_PREFIX):
                self._changed(name=key.removeprefix(TOPICS_PREFIX))
            else:
                self._changed(tp=_parse_partition_key(key))
            if key.startswith(TOPICS_PREFIX):
                name = key.removeprefix(TOPICS_PREFIX)
                if versioned is None:
                    self.unreadable.pop(key, None)
                    self.topics.pop(name, None)
                    self._versions.pop(name, None)
                    for gone in [tp for tp in self.states if tp[0] == name]:
                        del self.states[gone]
                        self._state_versions.pop(gone, None)
                elif (topic := self._read_topic(name, versioned)) is not None:
                    self.topics[name] = topic
                    self._versions[name] = versioned.version
                    for gone in [tp for tp, st in self.states.items() if tp[0] == name and not _of(topic, tp, st)]:
                        del self.states[gone]  # a topic of that name was deleted and created again
                        self._state_versions.pop(gone, None)
                    missing += [_partition_key(name, p) for p in topic.assignment if (name, p) not in self.states]
            elif (tp := _parse_partition_key(key)) is not None:
                if versioned is None:
                    self.unreadable.pop(key, None)
                state = self._state_of(tp, versioned) if versioned is not None else None
                if state is not None and versioned is not None:
                    self.states[tp] = state
                    self._state_versions[tp] = versioned.version
                elif key not in self.unreadable:  # deleted, or an orphan; an unreadable one keeps its cache
                    self.states.pop(tp, None)
                    self._state_versions.pop(tp, None)
        if missing:
            await self.refresh([k for k in missing if k not in ordered])

    async def _read_fresh(self, key: str) -> Versioned | None:
        """``key``'s stored value, read again when the cache took a newer version of it while the read was out.

        This process writes too (a leader's ISR change): a watch's read answered after such a write may
        hold the value from before it, and taking it would move the cache back (a cut-off leader's
        Metadata showed the ISR it had just shrunk). A value that is newer is taken; a deletion carries
        no version, so it is read again too.
        """
        for _ in range(READ_AGAIN_ATTEMPTS):
            before = self._cached_version(key)
            versioned = await self._storage.get(key)
            now = self._cached_version(key)
            if now == before or (versioned is not None and (now is None or versioned.version > now)):
                return versioned
        return versioned

    def _cached_version(self, key: str) -> int | None:
        """The version of ``key``'s value the cache holds (None: none)."""
        if key.startswith(TOPICS_PREFIX):
            return self._versions.get(key.removeprefix(TOPICS_PREFIX))
        tp = _parse_partition_key(key)
        return self._state_versions.get(tp) if tp is not None else None

    async def refresh_topic(self, name: str) -> None:
        """Re-read one topic's document (and the states the cache lacks), for a change to redo on it."""
        await self.refresh([_topic_key(name)])

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

    async def update_states_fenced(
        self, fence: Fence, changes: Mapping[tuple[str, int], tuple[PartitionState, int]]
    ) -> dict[tuple[str, int], PartitionState]:
        """Compare-and-set many partition states under ``fence``: in commits of ``STATES_PER_COMMIT``.

        A chunk that loses a compare-and-set is written again key by key, so one state a leader
        changed meanwhile holds back only itself.

        Returns:
            The states written (those missing lost to a newer version, now in the cache).

        Raises:
            FencedError: ``fence`` is no longer the current controller.
        """
        written: dict[tuple[str, int], PartitionState] = {}
        for chunk in _chunks(sorted(changes), STATES_PER_COMMIT):
            keys = {tp: _partition_key(*tp) for tp in chunk}
            checks = [Check(keys[tp], changes[tp][1]) for tp in chunk]
            ops = [Put(keys[tp], changes[tp][0].to_json()) for tp in chunk]
            try:
                versions = await self._storage.fenced_write(fence, checks, ops)
            except VersionConflictError:
                for tp in chunk:
                    try:
                        await self.update_state_fenced(fence, *tp, *changes[tp])
                    except VersionConflictError:
                        continue  # the cache holds the newer state; the caller decides again
                    written[tp] = changes[tp][0]
                continue
            for tp in chunk:
                self._remember_state(tp, changes[tp][0], versions[keys[tp]])
                written[tp] = changes[tp][0]
        return written

    async def _write_state(
        self, topic: str, partition: int, state: PartitionState, write: Callable[[str], Awaitable[int]]
    ) -> int:
        key = _partition_key(topic, partition)
        try:
            version = await write(key)
        except VersionConflictError:
            await self.refresh([key])  # learn what beat this write
            raise
        self._remember_state((topic, partition), state, version)
        return version

    def _remember_state(self, tp: tuple[str, int], state: PartitionState, version: int) -> None:
        """Cache a state this process wrote, unless a newer version of it was read meanwhile."""
        cached = self.states.get(tp)
        newer = self._state_versions.get(tp, 0) > version
        if cached is not None and cached.topic_id == state.topic_id and newer:
            return
        self.states[tp] = state
        self._state_versions[tp] = version
        self._changed(tp=tp)

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
        self._remember_topic(topic, versions[topic_key])
        for partition, state in states.items():
            self._remember_state((topic.name, partition), state, versions[state_keys[partition]])

    def _remember_topic(self, topic: Topic, version: int) -> None:
        """Cache a topic document this process wrote, unless a newer version of it was read meanwhile."""
        cached = self.topics.get(topic.name)
        if cached is not None and cached.topic_id == topic.topic_id and self._versions.get(topic.name, 0) > version:
            return
        self.topics[topic.name] = topic
        self._versions[topic.name] = version
        self._changed(name=topic.name)

    async def create(self, topic: Topic, states: dict[int, PartitionState]) -> None:
        """Store a new topic, then its partition states.

        The topic document is created first, with put-if-absent: a concurrent creator of the same
        name loses there and writes nothing at all.

        Raises:
            TopicExistsError: the name is taken.
        """
        try:
            version = await self._storage.put_if_absent(_topic_key(topic.name), topic.to_json())
        except KeyExistsError:
            raise TopicExistsError(topic.name) from None
        self._remember_topic(topic, version)
        await self.write_new_states(topic, states)

    async def restore(self, topic: Topic, states: dict[int, PartitionState]) -> bool:
        """Store a topic rebuilt from its logs after the store lost it: its states first, then its document.

        The reverse of ``create``'s order: until the document exists the states are orphans, so a
        restorer that stops in between leaves no topic without states, for which the controller
        would write fresh ones electing a leader without asking the replicas' logs. Of brokers
        restoring the same topic at once, one document wins; the others' states are its states.

        Returns:
            Whether this call stored the document (False: the name was taken meanwhile).
        """
        await self.write_new_states(topic, states)
        try:
            version = await self._storage.put_if_absent(_topic_key(topic.name), topic.to_json())
        except KeyExistsError:
            await self.refresh_topic(topic.name)
            return False
        self._remember_topic(topic, version)
        await self.refresh([_partition_key(topic.name, p) for p in topic.assignment])
        return True

    async def update(self, topic: Topic, new_states: dict[int, PartitionState] | None = None) -> None:
        """Replace a topic's document (config or added partitions) with compare-and-set, then write
        the states of the partitions it adds.

        Raises:
            VersionConflictError: someone else changed the topic since it was loaded (nothing written).
        """
        version = await self._storage.compare_and_set(
            _topic_key(topic.name), topic.to_json(), self._versions[topic.name]
        )
        self._remember_topic(topic, version)
        if new_states:
            await self.write_new_states(topic, new_states)

    async def write_new_states(
        self, topic: Topic, states: Mapping[int, PartitionState], fence: Fence | None = None
    ) -> dict[int, PartitionState]:
        """Write the first state of partitions that have none, stamped with the topic's id.

        A partition whose key holds an orphan (another topic id) is written over; one that already
        has a state of this topic is left as it is (someone else wrote it first). With ``fence`` the
        writes only apply while that controller epoch is current.

        Returns:
            The states written.

        Raises:
            FencedError: ``fence`` is no longer the current controller.
        """
        wanted = {p: dataclasses.replace(s, topic_id=topic.topic_id) for p, s in states.items()}
        written: dict[int, PartitionState] = {}
        for _ in range(WRITE_ATTEMPTS):
            stored = await self._storage.list(f"{PARTITIONS_PREFIX}{topic.name}/")
            self._absorb(topic, wanted, stored)
            pending = self._unwritten(topic, wanted, stored)
            if not pending:
                break
            try:
                for chunk in _chunks(sorted(pending), STATES_PER_COMMIT):
                    await self._commit_states(topic, {p: pending[p] for p in chunk}, fence)
                    written.update((p, pending[p][0]) for p in chunk)
            except VersionConflictError:
                continue  # another writer got to some of them first: read again, write the rest
            break
        return written

    def _absorb(self, topic: Topic, wanted: Mapping[int, PartitionState], stored: Mapping[str, Versioned]) -> None:
        """Cache the states of ``topic`` that others wrote (found in ``stored``) for partitions in ``wanted``."""
        cached = self.topics.get(topic.name)
        if cached is None or cached.topic_id != topic.topic_id:
            return
        for partition in wanted:
            key = _partition_key(topic.name, partition)
            found = stored.get(key)
            state = self._read_state(key, found) if found is not None else None
            if found is not None and state is not None and state.topic_id == topic.topic_id:
                self._remember_state((topic.name, partition), state, found.version)

    def _unwritten(
        self, topic: Topic, wanted: Mapping[int, PartitionState], stored: Mapping[str, Versioned]
    ) -> dict[int, tuple[PartitionState, int]]:
        """Of ``wanted``, the partitions with no state of this topic yet, and the version to overwrite."""
        pending = {}
        for partition, state in wanted.items():
            key = _partition_key(topic.name, partition)
            found = stored.get(key)
            if found is None:
                pending[partition] = (state, 0)
            elif (current := self._read_state(key, found)) is None or current.topic_id != topic.topic_id:
                pending[partition] = (state, found.version)  # an orphan, or unreadable: garbage to replace
        return pending

    async def _commit_states(
        self, topic: Topic, states: Mapping[int, tuple[PartitionState, int]], fence: Fence | None
    ) -> None:
        keys = {p: _partition_key(topic.name, p) for p in states}
        checks = [Check(keys[p], version) for p, (_, version) in states.items()]
        ops = [Put(keys[p], state.to_json()) for p, (state, _) in states.items()]
        if fence is None:
            versions = await self._storage.commit(checks, ops)
        else:
            versions = await self._storage.fenced_write(fence, checks, ops)
        for partition, (state, _) in states.items():
            if topic.name in self.topics and self.topics[topic.name].topic_id == topic.topic_id:
                self._remember_state((topic.name, partition), state, versions[keys[partition]])

    def missing_states(self, only: Collection[str] | None = None) -> list[tuple[Topic, int]]:
        """Partitions of cached topics (those named in ``only``, when given) that have no state of their
        topic (a creator that crashed).

        A partition whose stored state does not read is not missing: what it held is unknown, and
        a fresh state (leader epoch 0) written over it could take leadership back in time.
        """
        topics = self.topics.values() if only is None else [self.topics[n] for n in only if n in self.topics]
        return [
            (topic, partition)
            for topic in topics
            for partition in topic.assignment
            if (topic.name, partition) not in self.states
            and _partition_key(topic.name, partition) not in self.unreadable
        ]

    async def delete(self, name: str) -> Topic | None:
        """Remove the topic of that name as cached, and its partition states; return what was removed.

        The document goes first, only if it is still that topic's (same id); then only states of
        that topic id go, each at the version read, so a topic of the same name created meanwhile
        keeps its document and its states.
        """
        topic = self.topics.pop(name, None)
        self._versions.pop(name, None)
        self._changed(name=name)
        stored = await self._storage.get(_topic_key(name))
        document = self._read_topic(name, stored) if stored is not None else None
        target = topic or document
        if target is None:
            return None
        if stored is not None and (document is None or document.topic_id == target.topic_id):
            with contextlib.suppress(VersionConflictError):
                await self._storage.commit([Check(_topic_key(name), stored.version)], [Delete(_topic_key(name))])
        for key, versioned in (await self._storage.list(f"{PARTITIONS_PREFIX}{name}/")).items():
            state = self._read_state(key, versioned)
            if state is None or state.topic_id in (None, target.topic_id):
                with contextlib.suppress(VersionConflictError):
                    await self._storage.commit([Check(key, versioned.version)], [Delete(key)])
        for tp in [tp for tp in self.states if tp[0] == name]:
            del self.states[tp]
            self._state_versions.pop(tp, None)
        self._changed(name=name)
        return topic


def _of(topic: Topic, tp: tuple[str, int], state: PartitionState) -> bool:
    """Whether ``state``, stored for ``tp``, is a state of ``topic`` (its id, one of its partitions)."""
    return state.topic_id == topic.topic_id and tp[1] in topic.assignment


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
