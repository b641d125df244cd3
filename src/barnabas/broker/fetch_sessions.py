"""Incremental fetch sessions (KIP-227): a fetcher sends, and is answered, only what changed.

A consumer or follower fetching many partitions names them all once (a full fetch, session epoch
0); the broker keeps them as a session and answers its id. Later fetches name the session and its
next epoch and carry only the partitions whose position or limits changed, and the ones to forget;
the broker reads every partition of the session and answers those with records, a new high
watermark or log start offset, or an error. Without sessions a follower of 30,000 partitions sends
and is answered all of them every few hundred milliseconds.

Kafka's FetchSession.scala, kept here:

- Epoch -1 without a session id is a sessionless fetch (answered with session id 0). A full fetch
  (epoch 0 or -1) naming a session closes it; epoch 0 then opens a new one if there is room.
- An incremental fetch naming no session this broker has gets FETCH_SESSION_ID_NOT_FOUND, a wrong
  epoch INVALID_FETCH_SESSION_EPOCH: no partitions, session id 0. A session its forgotten partitions
  leave empty is closed and the fetch answered without one.
- The epoch moves on as the fetch is taken up, so a duplicate of a request in flight is refused;
  an answer whose session another request used meanwhile is INVALID_FETCH_SESSION_EPOCH.
- An incremental answer lists partitions in the session's order, and one that returned records
  moves to the end, so a busy partition does not take the response's max bytes every time.
- Not Kafka's: a partition read at the end of what it may read (no records, no error) keeps a mark of
  its leader and offsets then (``quiet``) and leaves the session's ``ready`` set: the next move of its
  log (an append, a high watermark or log start moving, its leader's state changing or the leader
  resigning) puts it back (``FetchSession.wake``, called by the log), as does a fetch naming it anew or
  a fetch by another reader (a follower registered again). A fetch reads only the ready partitions, in
  the session's order: it costs what changed, not every partition of its session. A follower's
  progress on the quiet partitions is recorded once per fetch, on the session's ``PassStamp``
  (``replication.leader``).
- At most ``max.incremental.fetch.session.cache.slots`` sessions. A new session when all are taken
  evicts the least recently used one if it has been idle ``min.incremental.fetch.session.eviction.ms``;
  else the least valuable evictable one (a consumer's before a follower's, then the smaller) if the
  new one is worth more: sessions older than that time are evictable by all, and a consumer's at
  any age by a follower's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from barnabas.protocol import ErrorCode

__all__ = ["FetchContext", "FetchSession", "FetchSessionCache", "PassStamp", "SessionAnswer"]

#: No session: the id a sessionless fetch names and is answered with.
INVALID_SESSION_ID = 0
#: A full fetch that asks for a new session.
INITIAL_EPOCH = 0
#: A full fetch that wants no session (and closes the one it names).
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1

Key = tuple[str, int]


class PartitionRequest(Protocol):
    """What a fetch asks of one partition; the session keeps the last one asked."""

    @property
    def partition(self) -> int: ...


class PartitionAnswer(Protocol):
    """What decides whether an incremental answer lists a partition."""

    @property
    def partition_index(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def records(self) -> Sequence[Sized]: ...


P = TypeVar("P", bound=PartitionRequest)
A = TypeVar("A", bound=PartitionAnswer)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 after the initial one, wrapping past int32's end to 1 (Kafka's)."""
    return 1 if epoch < 0 or epoch == _INT32_MAX else epoch + 1


@dataclass(slots=True, eq=False)
class PassStamp:
    """When a session's latest fetch read, or skipped, its partitions (monotonic ms)."""

    ms: int = 0


@dataclass(slots=True)
class CachedPartition(Generic[P]):
    """One partition of a session: what was last asked, and the last high watermark and log start answered."""

    request: P
    high_watermark: int = -1
    log_start_offset: int = -1
    #: What the partition was when a read at this request found nothing new; None: read it.
    quiet: object = None
    #: Its place in the answer order (a partition that returned records moves to the end).
    position: int = 0


@dataclass(slots=True, eq=False)
class FetchSession(Generic[P]):
    id: int
    #: A follower's: may evict consumers' sessions.
    privileged: bool
    created_ms: int
    last_used_ms: int
    #: The epoch the next incremental fetch must name.
    epoch: int
    partitions: dict[Key, CachedPartition[P]] = field(default_factory=dict)
    stamp: PassStamp = field(default_factory=PassStamp)
    #: The partitions the next fetch reads: every one not quiet (see the module).
    ready: set[Key] = field(default_factory=set)
    #: Called when a quiet partition becomes ready, while a fetch of the session waits; else None.
    on_ready: Callable[[], None] | None = None
    #: Who read last (a follower's (id, broker epoch), None for a consumer): quiet marks name their reader.
    reader: object = None
    #: The next answer-order position to hand out.
    next_position: int = 0

    def wake(self, key: Key) -> None:
        """Something happened to ``key``'s partition: the next fetch reads it (the log calls this)."""
        part = self.partitions.get(key)
        if part is None:
            return
        part.quiet = None
        self.ready.add(key)
        if self.on_ready is not None:
            self.on_ready()

    def to_read(self) -> tuple[list[tuple[str, P]], list[CachedPartition[P]]]:
        """The ready partitions in answer order, and their cached entries beside them.

        ``partitions`` is kept in that order too: when most are ready, walking it is cheaper than sorting.
        """
        parts, ready = self.partitions, self.ready
        if 4 * len(ready) >= len(parts):
            keys = [key for key in parts if key in ready]
        else:
            keys = sorted(ready, key=lambda key: parts[key].position)
        return [(key[0], parts[key].request) for key in keys], [parts[key] for key in keys]

    def place_last(self, part: CachedPartition[P]) -> None:
        part.position = self.next_position
        self.next_position += 1


@dataclass(slots=True)
class FetchContext(Generic[P]):
    """One fetch as the session rules make it: what to read, in order, or the error to answer instead."""

    partitions: list[tuple[str, P]]
    error: ErrorCode = ErrorCode.none
    #: An incremental fetch's session, and the epoch it moved on to as this fetch was taken up.
    session: FetchSession[P] | None = None
    epoch: int = 0
    #: A full fetch that asked for a session (epoch 0); one is made with its answer if there is room.
    wants_session: bool = False
    privileged: bool = False
    #: An incremental fetch's cached partitions, beside ``partitions``.
    cached: list[CachedPartition[P]] | None = None
    #: The session's stamp (a new one for a full fetch, kept by the session it may open).
    stamp: PassStamp = field(default_factory=PassStamp)
    #: Who fetches (a full fetch's session starts with it).
    reader: object = None


@dataclass(slots=True)
class SessionAnswer(Generic[A]):
    session_id: int
    error: ErrorCode
    #: (topic, answer) to send, in order.
    partitions: list[tuple[str, A]]
    #: The session the answer names (None: none), and the partitions this answer left quiet, with their marks:
    #: the fetch handler asks each one's log to wake the session at its next move (see the module).
    session: FetchSession[Any] | None = None
    quieted: list[tuple[Key, object]] = field(default_factory=list)


class FetchSessionCache(Generic[P]):
    """A broker's fetch sessions (Kafka's FetchSessionCache, one shard)."""

    def __init__(
        self,
        max_slots: int,
        eviction_ms: int,
        rng: random.Random | None = None,
        on_end: Callable[[FetchSession[P]], None] | None = None,
    ) -> None:
        """Args: ``on_end`` is called with each session that ends (closed, emptied or evicted)."""
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._on_end = on_end
        self._sessions: dict[int, FetchSession[P]] = {}
        #: Sessions evicted to make room (Kafka's IncrementalFetchSessionEvictionsPerSec).
        self.evictions = 0
        #: Fetches taken up within a session.
        self.incremental_fetches = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession[P] | None:
        return self._sessions.get(session_id)

    def cached_partitions(self) -> int:
        """Partitions over all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(session.partitions) for session in self._sessions.values())

    def open(
        self,
        session_id: int,
        epoch: int,
        partitions: list[tuple[str, P]],
        forgotten: Iterable[Key],
        *,
        privileged: bool,
        now_ms: int,
        reader: object = None,
    ) -> FetchContext[P]:
        """The context of a fetch naming ``session_id`` at ``epoch``, with these partitions and forgotten ones.

        ``reader`` is who fetches (a follower's identity): when it is not the session's last, every
        partition is read again, as the quiet marks name their reader.
        """
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID and (closed := self._sessions.pop(session_id, None)) is not None:
                self._ended(closed)
            return FetchContext(partitions, wants_session=epoch == INITIAL_EPOCH, privileged=privileged, reader=reader)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext([], ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext([], ErrorCode.invalid_fetch_session_epoch)
        cached = session.partitions
        ready = session.ready
        for topic, request in partitions:
            key = (topic, request.partition)
            known = cached.get(key)
            if known is None:
                cached[key] = known = CachedPartition(request)
                session.place_last(known)
            else:
                known.request = request
                known.quiet = None
            ready.add(key)
        for key in forgotten:
            cached.pop(key, None)
            ready.discard(key)
        if not cached:
            del self._sessions[session.id]
            self._ended(session)
            return FetchContext(partitions)
        if reader != session.reader:
            session.reader = reader
            for part in cached.values():
                part.quiet = None
            ready.update(cached)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        wanted, parts = session.to_read()
        return FetchContext(wanted, session=session, epoch=session.epoch, cached=parts, stamp=session.stamp)

    def answer(
        self,
        context: FetchContext[P],
        answers: list[tuple[str, A]],
        now_ms: int,
        quiet: Sequence[object] | None = None,
    ) -> SessionAnswer[A]:
        """What to answer once the context's partitions are read: the session id, and the partitions to list.

        Args:
            answers: the partitions read, in order (an incremental fetch reads only its ready ones).
            quiet: beside ``context.partitions``, each one's new ``quiet`` mark (None: none); None: no marks.
        """
        if context.error != ErrorCode.none:
            return SessionAnswer(INVALID_SESSION_ID, context.error, [])
        session = context.session
        if session is not None:
            if self._sessions.get(session.id) is not session or session.epoch != context.epoch:
                return SessionAnswer(session.id, ErrorCode.invalid_fetch_session_epoch, [])
            quieted = []
            if quiet is not None and context.cached is not None:
                for (topic, request), part, mark in zip(context.partitions, context.cached, quiet, strict=True):
                    if mark is not None and part.quiet is None:
                        part.quiet = mark
                        key = (topic, request.partition)
                        session.ready.discard(key)
                        quieted.append((key, mark))
            return SessionAnswer(session.id, ErrorCode.none, _changed(session, answers), session, quieted)
        if not context.wants_session:
            return SessionAnswer(INVALID_SESSION_ID, ErrorCode.none, answers)
        created = self._create(context, answers, now_ms, quiet)
        if created is None:
            return SessionAnswer(INVALID_SESSION_ID, ErrorCode.none, answers)
        quieted = [(key, part.quiet) for key, part in created.partitions.items() if part.quiet is not None]
        return SessionAnswer(created.id, ErrorCode.none, answers, created, quieted)

    def _create(
        self, context: FetchContext[P], answers: list[tuple[str, A]], now_ms: int, quiet: Sequence[object] | None
    ) -> FetchSession[P] | None:
        size = len(answers)
        if len(self._sessions) >= self.max_slots and not self._evict_for(context.privileged, size, now_ms):
            return None
        partitions: dict[Key, CachedPartition[P]] = {}
        ready: set[Key] = set()
        marks = quiet if quiet is not None else [None] * size
        for position, ((topic, request), (_, answer), mark) in enumerate(
            zip(context.partitions, answers, marks, strict=True)
        ):
            key = (topic, request.partition)
            part = CachedPartition(request, answer.high_watermark, answer.log_start_offset, mark, position)
            partitions[key] = part
            if part.quiet is None:
                ready.add(key)
        session = FetchSession(
            self._new_id(), context.privileged, now_ms, now_ms, next_epoch(INITIAL_EPOCH), partitions, context.stamp,
            ready, reader=context.reader, next_position=size,
        )  # fmt: skip
        self._sessions[session.id] = session
        return session

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session, if the rules above let it take one."""
        sessions = self._sessions.values()
        if not sessions:
            return False
        idlest = min(sessions, key=lambda s: (s.last_used_ms, s.id))
        if now_ms - idlest.last_used_ms > self.eviction_ms:
            return self._evict(idlest)

        def evictable(session: FetchSession[P]) -> bool:
            old = now_ms - session.created_ms > self.eviction_ms
            return old or (privileged and not session.privileged)

        candidates = [s for s in sessions if evictable(s)]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size) <= (least.privileged, len(least.partitions)):
            return False
        return self._evict(least)

    def _evict(self, session: FetchSession[P]) -> bool:
        del self._sessions[session.id]
        self._ended(session)
        self.evictions += 1
        return True

    def _ended(self, session: FetchSession[P]) -> None:
        if self._on_end is not None:
            self._on_end(session)

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT32_MAX)
            if session_id not in self._sessions:
                return session_id


def _changed(session: FetchSession[P], answers: list[tuple[str, A]]) -> list[tuple[str, A]]:
    """The answers an incremental fetch lists; the session remembers what they said."""
    listed = []
    cached = session.partitions
    for topic, answer in answers:
        key = (topic, answer.partition_index)
        part = cached.get(key)
        if part is None:
            listed.append((topic, answer))
            continue
        with_records = any(len(chunk) for chunk in answer.records)
        must = with_records or answer.error_code != ErrorCode.none
        if part.high_watermark != answer.high_watermark or part.log_start_offset != answer.log_start_offset:
            must = True
            part.high_watermark, part.log_start_offset = answer.high_watermark, answer.log_start_offset
        if answer.error_code != ErrorCode.none:
            part.high_watermark = -1
        if with_records:
            cached[key] = cached.pop(key)  # the dict keeps the answer order too (see ``to_read``)
            session.place_last(part)
        if must:
            listed.append((topic, answer))
    return listed
