"""Fetch (key 1): read whole batches up to the high watermark, long-polling on min_bytes.

Kafka semantics kept: partitions are read in request order and share the response's
``max_bytes`` (capped by ``fetch.max.bytes``); the first partition that has data may exceed
both limits by one batch (KIP-74) so a consumer never stalls on a large batch; a fetch offset
inside a batch returns that batch; an offset outside [log start, log end] gets
OFFSET_OUT_OF_RANGE; ``current_leader_epoch`` older than the leader's gets
FENCED_LEADER_EPOCH, newer gets UNKNOWN_LEADER_EPOCH. The response waits up to ``max_wait``
until ``min_bytes`` are available, an error is found, or new data arrives that satisfies it.
Incremental fetch sessions (KIP-227) follow ``barnabas.broker.fetch_sessions``: a session's
partitions are read in its order and only the changed ones answered. Records are answered as
segment file ranges (``PartitionLog.read_slice``), which the connection sends with sendfile: no
record byte is read into the broker (Kafka's FileRecords and transferTo).

A fetch with a replica id is a follower's: it reads up to the log end offset instead of the
high watermark, and its fetch offset tells the leader how far that follower has come (which
may move the high watermark and let the follower back into the ISR), in the broker epoch the
follower was registered in when the fetch arrived.

With authorization on, a consumer needs READ on each topic and a follower CLUSTER_ACTION on the
cluster; the partitions of a topic it may not read get TOPIC_AUTHORIZATION_FAILED (KafkaApis).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from barnabas.log import FileSlice
from barnabas.log import errors as log_errors
from barnabas.protocol import ErrorCode, FetchPartitionResult, Request, encode_fetch_response
from barnabas.security.acl import AclOperation, ResourceType

from ..fetch_sessions import FetchSession, PassStamp
from ..quiet_marks import Replica, watch
from ..registry import ApiSpec
from ..replication.leader import LeaderReplica
from ._authorize import allowed_names, cluster_allowed
from ._needs import PartitionNeeds
from ._view import view_of

API_KEY = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    #: v5+ (KIP-107): a follower's log start offset.
    log_start_offset: int = -1
    #: v9+ (KIP-320): the leader epoch the client believes current; -1 skips the check.
    current_leader_epoch: int = -1
    #: v12+ (KIP-595).
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgottenTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    """FetchRequest v4-v12: v4 already has max_bytes (v3+) and isolation_level (v4+)."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    topics: tuple[FetchTopic, ...]
    #: v7+ (KIP-227 fetch sessions).
    session_id: int = 0
    session_epoch: int = -1
    forgotten_topics_data: tuple[ForgottenTopic, ...] = ()
    #: v11+ (KIP-392).
    rack_id: str = ""
    #: v12+, tagged.
    cluster_id: str | None = None


def _error(
    index: int, code: ErrorCode, high_watermark: int = -1, log_start: int = -1
) -> FetchPartitionResult[FileSlice]:
    return FetchPartitionResult(index, code, high_watermark, high_watermark, log_start, ())


Answer = FetchPartitionResult[FileSlice]


@dataclass(slots=True, kw_only=True)
class _Reading:
    """What one fetch reads with, the same on every pass of its long poll."""

    state: PartitionNeeds
    wanted: list[tuple[str, FetchPartition]]
    max_bytes: int
    read_committed: bool
    #: A follower's (replica id, broker epoch), else None.
    replica: Replica | None
    denied: frozenset[str]
    #: Whether the fetch has a session to keep quiet marks in (else none are made).
    marks: bool
    stamp: PassStamp

    def read_all(self) -> tuple[list[tuple[str, Answer]], int, bool, list[object]]:
        """The partitions' answers, bytes read, whether one has an error, and each one's quiet mark (or None).

        A session's quiet partitions are not among ``wanted`` (its ready set is): their follower's
        progress rides on the session's stamp, moved on here."""
        state = self.state
        remaining = self.max_bytes
        total = 0
        errors = False
        results = []
        marks: list[object] = []
        now_ms = state.node.monotonic_ms()
        for topic, partition in self.wanted:
            if topic in self.denied:
                results.append((topic, _error(partition.partition, ErrorCode.topic_authorization_failed)))
                marks.append(None)
                errors = True
                continue
            outcome, mark = self._read(topic, partition, max(remaining, 0), first=total == 0, now_ms=now_ms)
            size = sum(len(chunk) for chunk in outcome.records)
            total += size
            remaining -= size
            errors = errors or outcome.error_code != ErrorCode.none
            results.append((topic, outcome))
            marks.append(mark)
        self.stamp.ms = now_ms  # this fetch, for the partitions skipped above and those marked quiet now
        return results, total, errors, marks

    def _skipped(self, leader: LeaderReplica, replica_id: int) -> None:
        """A follower's quiet partition left unread: its fetch is recorded on the session's stamp."""
        progress = leader.followers.get(replica_id)
        if progress is not None:
            progress.quiet = self.stamp

    def _read(
        self, topic_name: str, partition: FetchPartition, limit: int, *, first: bool, now_ms: int
    ) -> tuple[Answer, object]:
        """The partition's answer, and its quiet mark (``fetch_sessions``): None unless it was read at its end."""
        state, replica = self.state, self.replica
        index = partition.partition
        found = state.partitions.leader_partition(topic_name, index, partition.current_leader_epoch)
        if isinstance(found, ErrorCode):
            return _error(index, found), None  # Kafka reports high watermark -1 with any partition error
        partition_log = found.log
        fetch_offset = partition.fetch_offset
        if replica is not None:
            state.partitions.track_follower(found.leader, replica, fetch_offset, now_ms)
        version = partition_log.offsets_version  # before the offsets are read: a move after them shows
        high_watermark = partition_log.high_watermark
        log_start = partition_log.log_start_offset
        max_offset = partition_log.log_end_offset if replica is not None else high_watermark
        records: tuple[FileSlice, ...] = ()
        mark: object = None
        if fetch_offset == max_offset and fetch_offset >= log_start:  # nothing to read (a follower at rest)
            if self.marks and (replica is None or found.leader.state.in_sync(*replica)):
                mark = (found.leader, found.leader.state, version, replica)  # (one out of the ISR is read: it may join)
                if replica is not None:
                    self._skipped(found.leader, replica[0])
        else:
            try:
                result = partition_log.read_slice(
                    fetch_offset, min(partition.partition_max_bytes, limit), max_offset=max_offset, min_one_batch=first
                )
            except log_errors.OffsetOutOfRangeError:
                return _error(index, ErrorCode.offset_out_of_range, high_watermark, log_start), None
            records = (result.records,) if result.records is not None else ()
        answer = FetchPartitionResult(
            index, ErrorCode.none, high_watermark, high_watermark, log_start, records,
            aborted_transactions=() if self.read_committed else None,
        )  # fmt: skip
        return answer, mark

    def settle_forgotten(self, forgotten: list[tuple[str, int]]) -> None:
        """A follower's partitions its session no longer fetches: what the stamp recorded for them is settled,
        so their progress stops moving with the session's fetches."""
        if self.replica is None:
            return
        replicas = self.state.partitions.replicas
        for topic, index in forgotten:
            leader = replicas.leader(topic, index)
            progress = leader.followers.get(self.replica[0]) if leader is not None else None
            if progress is not None and progress.quiet is self.stamp:
                progress.settle()


def _by_topic(answers: list[tuple[str, Answer]]) -> list[tuple[str, list[Answer]]]:
    """Neighbouring partitions of one topic under one topic entry, as Kafka's FetchResponse.of groups them."""
    topics: list[tuple[str, list[Answer]]] = []
    for topic, answer in answers:
        if topics and topics[-1][0] == topic:
            topics[-1][1].append(answer)
        else:
            topics.append((topic, [answer]))
    return topics


def _count_bytes_out(state: PartitionNeeds, answers: list[tuple[str, Answer]]) -> None:
    metrics = state.node.metrics
    for topic, outcome in answers:
        size = sum(len(chunk) for chunk in outcome.records)
        if size:
            metrics.fetched(topic, size)


def _denied(state: PartitionNeeds, wanted: list[tuple[str, FetchPartition]], replica_id: int) -> frozenset[str]:
    """The topics this fetch may not read: a follower needs CLUSTER_ACTION, a consumer READ on each topic."""
    if state.node.acls is None:
        return frozenset()
    names = {topic for topic, _ in wanted}
    if replica_id >= 0:
        return frozenset() if cluster_allowed(state, AclOperation.CLUSTER_ACTION) else frozenset(names)
    return frozenset(names - allowed_names(state, AclOperation.READ, ResourceType.TOPIC, names))


async def handle(state: PartitionNeeds, request: Request) -> list[bytes | memoryview | FileSlice]:
    body = view_of(FetchRequest, request.body)
    node = state.node
    version, correlation_id = request.header.api_version, request.header.correlation_id
    replica_id = body.replica_id
    # The follower's incarnation is taken once, as the fetch arrives: a long poll re-reads its
    # partitions later, when the registration may already be a newer incarnation's.
    replica = state.partitions.follower_identity(replica_id) if replica_id >= 0 else None
    sessions = node.fetch_sessions
    forgotten = [(topic.topic, index) for topic in body.forgotten_topics_data for index in topic.partitions]
    context = sessions.open(
        body.session_id,
        body.session_epoch,
        [(topic.topic, partition) for topic in body.topics for partition in topic.partitions],
        forgotten,
        privileged=replica_id >= 0,
        now_ms=node.monotonic_ms(),
        reader=replica,
    )
    session = context.session
    deadline = time.monotonic() + body.max_wait_ms / 1000
    min_bytes = body.min_bytes
    reading = _Reading(
        state=state,
        wanted=context.partitions,
        max_bytes=min(body.max_bytes, int(node.config["fetch.max.bytes"])),
        read_committed=body.isolation_level == 1,
        replica=replica,
        denied=_denied(state, context.partitions, replica_id),
        marks=session is not None or context.wants_session,
        stamp=context.stamp,
    )
    if session is not None and forgotten:
        reading.settle_forgotten(forgotten)
    while True:
        results, total, errors, marks = reading.read_all()
        remaining = deadline - time.monotonic()
        watched = [(topic, p.partition) for topic, p in reading.wanted]
        if total >= min_bytes or errors or remaining <= 0 or (not watched and session is None):
            break
        woken = await node.fetch_waiters.wait(watched, remaining, _wakes(session))
        if not woken and total == 0:
            break  # nothing read and nothing appended or moved since: reading again would find the same
        if session is not None:  # quiet partitions that woke meanwhile are read too
            context.partitions, context.cached = session.to_read()
            reading.wanted = context.partitions
            reading.denied = _denied(state, reading.wanted, replica_id)
    answer = sessions.answer(context, results, node.monotonic_ms(), marks if reading.marks else None)
    if answer.session is not None:
        for key, mark in answer.quieted:
            watch(answer.session, key, mark, replica)
    if replica_id < 0 and total:
        _count_bytes_out(state, answer.partitions)
    return encode_fetch_response(
        version, correlation_id, _by_topic(answer.partitions), error_code=answer.error, session_id=answer.session_id
    )


def _wakes(session: FetchSession[FetchPartition] | None) -> Callable[[Callable[[], None] | None], None] | None:
    """How a waiting fetch of ``session`` is woken by its quiet partitions (None without a session)."""
    if session is None:
        return None

    def hook(wake: Callable[[], None] | None) -> None:
        session.on_ready = wake

    return hook


SPEC = ApiSpec(API_KEY, "Fetch", 4, 12, handle)
