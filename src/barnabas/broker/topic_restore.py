"""A cluster recreated on its old volumes: topics rebuilt from the logs when the store lost them.

Kafka keeps topics only in its metadata; Strimzi's users who recreate a cluster on old volumes
meet "Invalid cluster.id" and then brokers that do not know their own logs. barnabas comes back
by itself:

- Every broker keeps a copy of each topic's stored document beside each of its partitions' logs
  (``TopicDocuments``, ``barnabas.log.topic_document``), rewritten whenever the document changes.
- A broker that starts without a claim on its dirs while they hold data (the store lost what it
  knew of this broker: a store recreated, or emptied) restores what the store lacks before it
  loads its logs (``restore_topics``): the cluster id from its dirs (``TopicStore.cluster_id``),
  each topic of its logs from their copies with the same topic id (``TopicStore.restore``), a
  partition more than the stored document has (the copy of a broker that saw the topic grow),
  and the producer id counter past every producer in its logs.
- A restored partition has no leader and no ISR: they were in the lost store. Each replica reports
  the end of its log into the partition's state (``LogEndReports``) and the controller elects the
  one with the most once all have (``leadership.recovered_election``). A replica whose disk is
  gone for good reports an empty log once its broker starts with ``--replace``.

What the store alone held does not come back: ACLs, SCRAM credentials, client quotas. Consumer
group offsets do (they are records of ``__consumer_offsets``). Logs of a topic whose copies are
missing or unreadable are kept, not deleted, and named in a warning.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from barnabas.cluster import PartitionState, Topic, TopicStore
from barnabas.cluster.stored_values import CorruptValueError
from barnabas.coordination import CoordinationError, VersionConflictError
from barnabas.log import LogManager, PartitionLog, read_topic_document, read_topic_id, write_topic_document
from barnabas.log.errors import CorruptCheckpointError

__all__ = ["LogEndReports", "TopicDocuments", "restore_topics"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Pause before a report the store refused is sent again.
RETRY_S = 1.0
#: The state of a restored partition until the controller elects from its replicas' reports.
RECOVERING = PartitionState(leader=-1, leader_epoch=0, isr=(), recovered={})


@dataclasses.dataclass(frozen=True, slots=True)
class RestoreResult:
    #: Topics this broker stored (or grew) from its copies.
    restored: list[str]
    #: Topics with logs here that could not be restored: their logs are kept, untouched.
    unrestorable: set[str]


async def restore_topics(topics: TopicStore, logs: LogManager) -> RestoreResult:
    """Store each topic of this broker's partition dirs that the store lacks, from the dirs' copies.

    Raises:
        CoordinationError: the store cannot be written; the broker cannot start.
    """
    by_topic: dict[str, dict[int, Path]] = defaultdict(dict)
    for tp, directory in logs.partition_dirs().items():
        by_topic[tp.topic][tp.partition] = directory
    result = RestoreResult([], set())
    for name, dirs in sorted(by_topic.items()):
        copy = _newest_copy(name, dirs)
        stored = topics.topics.get(name)
        if copy is None:
            if stored is None and name not in topics.unreadable_topics:
                log.warning("cannot restore topic %s: its partition dirs %s have no readable copy of its "
                            "document; its logs are kept as they are", name, sorted(dirs))  # fmt: skip
                result.unrestorable.add(name)
            continue
        if stored is None:
            states = {p: RECOVERING for p in copy.assignment}
            if await topics.restore(dataclasses.replace(copy, reassigning={}), states):
                log.warning("restored topic %s (id %s, %d partitions) from its logs; each partition gets a "
                            "leader once its replicas have reported their logs",
                            name, copy.topic_id, copy.partition_count)  # fmt: skip
                result.restored.append(name)
        elif stored.topic_id == copy.topic_id and (grown := set(copy.assignment) - set(stored.assignment)):
            await _grow(topics, stored, copy, grown)
            result.restored.append(name)
    return result


async def _grow(topics: TopicStore, stored: Topic, copy: Topic, partitions: set[int]) -> None:
    """Add to the stored topic the partitions this broker's copy has and it lacks: states first, as ``restore``."""
    grown = dataclasses.replace(stored, assignment={**stored.assignment, **{p: copy.assignment[p] for p in partitions}})
    await topics.write_new_states(grown, {p: RECOVERING for p in partitions})
    try:
        await topics.update(grown)
    except VersionConflictError:
        log.info("topic %s changed while its partitions %s were restored; the next start restores them",
                 stored.name, sorted(partitions))  # fmt: skip
        return
    log.warning("restored partitions %s of topic %s from its logs", sorted(partitions), stored.name)


def _newest_copy(name: str, dirs: dict[int, Path]) -> Topic | None:
    """The copy of the topic's document with the most partitions among those matching their dir's topic id."""
    best: Topic | None = None
    for directory in dirs.values():
        try:
            raw = read_topic_document(directory)
            topic_id = read_topic_id(directory)
            copy = Topic.from_json(name, raw) if raw is not None else None
        except (OSError, CorruptCheckpointError, CorruptValueError) as exc:
            log.warning("ignoring the topic copy in %s: %s", directory, exc)
            continue
        if copy is None or copy.topic_id != topic_id:
            continue
        if best is None or copy.partition_count > best.partition_count:
            best = copy
    return best


class TopicDocuments:
    """Keeps the copy of its topic's stored document in every local partition dir current."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs
        #: Per topic, the document last encoded and the Topic it came from (replaced on every change).
        self._encoded: dict[str, tuple[Topic, bytes]] = {}
        #: Per partition, the bytes its dir holds (as written or found).
        self._written: dict[TopicPartition, bytes] = {}

    def sync(self, topics: Mapping[str, Topic], only: Collection[str] | None = None) -> None:
        """Write the copies that differ from the stored documents ``topics`` (cheap when nothing changed);
        only those of the topics named in ``only`` when given."""
        if only is not None:
            partitions = [(name, p) for name in only if name in topics for p in topics[name].assignment]
            self._write_copies(topics, partitions)
            return
        self._write_copies(topics, self._logs.partitions())
        self.forget_gone()

    def forget_gone(self) -> None:
        """Forget what was written into partition dirs whose logs are gone."""
        for gone in [tp for tp in self._written if self._logs.get(*tp) is None]:
            del self._written[gone]

    def _write_copies(self, topics: Mapping[str, Topic], partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            topic = topics.get(tp[0])
            partition_log = self._logs.get(*tp)
            if topic is None or partition_log is None or partition_log.topic_id != topic.topic_id:
                continue
            data = self._document(topic)
            if self._written.get(tp) is data:
                continue
            try:
                if tp not in self._written and read_topic_document(partition_log.directory) == data:
                    self._written[tp] = data
                    continue
                write_topic_document(partition_log.directory, data)
            except OSError as exc:
                log.warning("cannot keep the topic copy in %s: %s", partition_log.directory, exc)
                continue
            self._written[tp] = data

    def _document(self, topic: Topic) -> bytes:
        cached = self._encoded.get(topic.name)
        if cached is not None and cached[0] is topic:
            return cached[1]
        data = topic.to_json()
        if cached is not None and cached[1] == data:
            data = cached[1]  # the same document re-read: keep the bytes the dirs are known to hold
        self._encoded[topic.name] = (topic, data)
        return data


class LogEndReports:
    """Reports this broker's log end into each restored partition it replicates, once."""

    def __init__(self, topics: TopicStore, broker_id: int) -> None:
        self._topics = topics
        self._broker_id = broker_id
        self._in_flight: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def maybe_report(self, tp: TopicPartition, state: PartitionState, partition_log: PartitionLog) -> None:
        """Report ``partition_log``'s end if ``state`` waits for it (a task; a failure retries on the next call)."""
        if state.recovered is None or state.leader != -1 or self._broker_id in state.recovered:
            return
        if tp in self._in_flight:
            return
        self._in_flight.add(tp)
        epoch = partition_log.latest_epoch
        end = (epoch if epoch is not None else -1, partition_log.log_end_offset)
        task = asyncio.get_running_loop().create_task(self._report(tp, end), name=f"log end report {tp[0]}-{tp[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _report(self, tp: TopicPartition, end: tuple[int, int]) -> None:
        try:
            while True:
                state = self._topics.states.get(tp)
                version = self._topics.state_version(*tp)
                if state is None or version is None or state.recovered is None or state.leader != -1:
                    return
                if self._broker_id in state.recovered:
                    return
                reported = dataclasses.replace(state, recovered={**state.recovered, self._broker_id: end})
                try:
                    await self._topics.update_state(*tp, reported, version)
                except VersionConflictError:
                    continue  # another replica reported meanwhile: the cache holds its state now
                except CoordinationError as exc:
                    log.warning("%s-%d: cannot report its log end yet (%s); retrying", *tp, exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                log.debug("%s-%d: reported its log end (epoch %d, offset %d) for the partition's first leader",
                         *tp, *end)  # fmt: skip
                return
        finally:
            self._in_flight.discard(tp)
