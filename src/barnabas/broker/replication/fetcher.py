"""A follower's fetcher: replicate every partition this broker follows from one leader broker.

Kafka's ReplicaFetcherThread as one asyncio task per leader broker:

- **Truncation first** (KIP-101/279): before fetching a partition under a new leader epoch, ask
  the leader (OffsetForLeaderEpoch, replica id set) where this replica's latest epoch ends on
  its log, and cut the local log back to there, so a replica that was ahead of the new leader
  drops what the leader never had.
- **Then fetch**: Fetch v12 with this broker's replica id, from the log end offset, long-polling
  ``replica.fetch.wait.max.ms``. Returned batches are appended unchanged (the leader assigned
  their offsets and epochs); the local high watermark follows the leader's. Fetches go through an
  incremental fetch session with the leader (``session_handler``): after the first, a fetch names
  only the partitions whose fetch offset, log start or leader epoch moved, and the leader answers
  only the partitions with records or a new high watermark. A session error makes the next fetch a
  full one at once.
- **A round looks only at what changed.** What the next fetch asks of each partition is kept from
  round to round; a partition is looked at again only when something may have changed it: its log
  moved (each log calls back once, at its next move or close), it was added, removed, truncated,
  paused, or its pause ended. A fetcher following tens of thousands of partitions builds a fetch at
  rest in the time of the few that moved.
- A partition the leader answers with NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH tries again
  after at most ``LEADER_CATCH_UP_S``: the new leader has not read the partition state this
  broker already saw, and will within a watch round trip (a full ``replica.fetch.backoff.ms``
  there would add to every failover). Other errors wait ``replica.fetch.backoff.ms``;
  FENCED_LEADER_EPOCH means this broker is behind, and the next reconcile re-adds the partition.
- A connection error drops the connection and retries after the backoff; only the first failure
  of an outage is a warning (a dead leader is retried until the controller replaces it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import ErrorCode, request_class

from .session_handler import FetchSessionHandler, SessionFetch

if TYPE_CHECKING:
    from barnabas.log import PartitionLog

    from ..follower_appends import FollowerAppends
    from ..state import NodeState

__all__ = ["ReplicaFetcher"]

log = logging.getLogger(__name__)

FETCH = 1
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 4

TopicPartition = tuple[str, int]

#: Longest pause after a leader that does not know it leads yet (it reads the state any moment).
LEADER_CATCH_UP_S = 0.05
_LEADER_NOT_READY = {ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch}

_RETRIABLE = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.kafka_storage_error,
}


#: Answers that end the session; the next fetch, a full one, goes at once.
_SESSION_ERRORS = {ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch}

#: What a fetch asks of one partition: fetch offset, log start offset, current leader epoch.
_Want = tuple[int, int, int]


@dataclass(slots=True)
class _Followed:
    leader_epoch: int
    #: monotonic time before which this partition is not fetched (after an error).
    paused_until: float = 0.0
    #: The log whose next move marks this partition for another look (None: none watched).
    watched: PartitionLog | None = None


class ReplicaFetcher:
    def __init__(self, state: NodeState, followers: FollowerAppends, leader_id: int) -> None:
        self.state = state
        self.followers = followers
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, _Followed] = {}
        #: Partitions to truncate before they are fetched (a new leader epoch, an out-of-range answer); the
        #: others are fetched.
        self._untruncated: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None
        self._client: KafkaClient | None = None
        self._changed = asyncio.Event()
        config = state.config
        self._backoff_s = int(config["replica.fetch.backoff.ms"]) / 1000
        self._wait_ms = int(config["replica.fetch.wait.max.ms"])
        self._timeout_s = int(config["replica.socket.timeout.ms"]) / 1000
        self._partition_max = int(config["replica.fetch.max.bytes"])
        self._response_max = int(config["replica.fetch.response.max.bytes"])
        self._failures = 0  # connection failures since the last success
        self._session: FetchSessionHandler[_Want] = FetchSessionHandler()
        #: What the next fetch asks of every partition ready to be fetched; changed only by :meth:`_look_again`.
        self._wanted: dict[TopicPartition, _Want] = {}
        #: Partitions that may no longer be as ``_wanted`` has them, looked at before the next fetch.
        self._stale: set[TopicPartition] = set()
        #: Partitions looked at since the session last built a fetch: the only ones it compares.
        self._unsent: set[TopicPartition] = set()
        #: Followed partitions without a log here yet: looked for every round.
        self._logless: set[TopicPartition] = set()
        #: (until, partition) of every pause, earliest first; an entry outlived by a later pause is harmless.
        self._pauses: list[tuple[float, TopicPartition]] = []
        #: Partitions looked at so far (for tests: a fetch at rest looks at none).
        self.looks = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"fetcher from broker {self.leader_id}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._drop_client()

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        """Follow ``tp`` under ``leader_epoch`` (again): it is truncated before it is fetched."""
        self._unwatch(self.partitions.get(tp))
        self.partitions[tp] = _Followed(leader_epoch)
        self._untruncated.add(tp)
        self._stale.add(tp)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self._unwatch(self.partitions.pop(tp, None))
        self._untruncated.discard(tp)
        self._stale.add(tp)

    def _unwatch(self, followed: _Followed | None) -> None:
        if followed is not None and followed.watched is not None:
            followed.watched.drop_on_next_move(self)
            followed.watched = None

    # -- what the next fetch asks ------------------------------------------------------------------

    def _look_again(self) -> None:
        """Bring ``_wanted`` up to date for the partitions that may have changed (and only those)."""
        now = time.monotonic()
        pauses = self._pauses
        while pauses and pauses[0][0] <= now:
            self._stale.add(heapq.heappop(pauses)[1])
        if self._logless:
            self._stale |= self._logless
            self._logless = set()
        if not self._stale:
            return
        stale, self._stale = self._stale, set()
        self._unsent |= stale
        self.looks += len(stale)
        logs = self.state.logs
        wanted = self._wanted
        for tp in stale:
            followed = self.partitions.get(tp)
            if followed is None or tp in self._untruncated or followed.paused_until > now:
                wanted.pop(tp, None)
                continue
            partition_log = logs.get(*tp)
            if partition_log is None:
                wanted.pop(tp, None)
                self._logless.add(tp)
                continue
            wanted[tp] = (partition_log.log_end_offset, partition_log.log_start_offset, followed.leader_epoch)
            followed.watched = partition_log
            partition_log.on_next_move(self, self._stale_on_move(tp))

    def _stale_on_move(self, tp: TopicPartition) -> Callable[[], None]:
        return lambda: self._stale.add(tp)

    # -- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._look_again()
            if not self._wanted and not self._truncation_ready():
                await self._wait_for_work()
                continue
            try:
                client = await self._connect()
                if client is None:
                    await asyncio.sleep(self._backoff_s)
                    continue
                await self._truncate(client)
                if not await self._fetch(client):
                    await self._wait_for_work()
            except BrokerConnectionError as exc:
                self._connection_failed(exc)
                self._drop_client()
                await asyncio.sleep(self._backoff_s)
            except Exception:
                log.exception("fetcher from broker %d failed; retrying", self.leader_id)
                self._drop_client()
                await asyncio.sleep(self._backoff_s)

    def _truncation_ready(self) -> bool:
        now = time.monotonic()
        return any(self.partitions[tp].paused_until <= now for tp in self._untruncated)

    async def _wait_for_work(self) -> None:
        """Until a partition is added, the earliest pause ends, or (a partition waiting for its log) a backoff."""
        self._changed.clear()
        timeout: float | None = None
        if self._pauses:
            timeout = max(self._pauses[0][0] - time.monotonic(), 0.0)
        if self._logless:
            timeout = self._backoff_s if timeout is None else min(timeout, self._backoff_s)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    async def _connect(self) -> KafkaClient | None:
        if self._client is not None and not self._client.closed:
            return self._client
        info = self.state.brokers.live.get(self.leader_id)
        if info is None:
            return None
        # On the inter-broker listener, with its protocol (TLS on an SSL one).
        self._client = await self.state.connect_to_broker(
            info,
            client_id=f"barnabas-replica-{self.state.broker_id}",
            timeout_s=self._timeout_s,
            request_timeout_s=self._timeout_s + self._wait_ms / 1000,
        )
        if self._failures:
            log.info("connected to broker %d again after %d failed attempts", self.leader_id, self._failures)
            self._failures = 0
        return self._client

    def _connection_failed(self, exc: Exception) -> None:
        """Warn once per outage: a dead leader is retried every backoff until the controller notices."""
        self._failures += 1
        level = logging.WARNING if self._failures == 1 else logging.DEBUG
        log.log(level, "fetching from broker %d failed (%s); retrying quietly until it answers", self.leader_id, exc)

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _pause(self, tp: TopicPartition, code: ErrorCode | None = None) -> None:
        followed = self.partitions.get(tp)
        if followed is not None:
            pause = min(self._backoff_s, LEADER_CATCH_UP_S) if code in _LEADER_NOT_READY else self._backoff_s
            followed.paused_until = until = time.monotonic() + pause
            heapq.heappush(self._pauses, (until, tp))
            self._stale.add(tp)

    # -- truncation --------------------------------------------------------------------------------

    async def _truncate(self, client: KafkaClient) -> None:
        pending: dict[TopicPartition, tuple[int, int]] = {}
        now = time.monotonic()
        for tp in list(self._untruncated):
            waiting = self.partitions[tp]
            if waiting.paused_until > now:
                continue
            partition_log = self.state.logs.get(*tp)
            if partition_log is None:
                continue
            latest = partition_log.latest_epoch
            if latest is None:
                self._truncated(tp)  # nothing written under any epoch: nothing to cut
                continue
            pending[tp] = (waiting.leader_epoch, latest)
        if not pending:
            return
        topic_cls = request_class(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, "OffsetForLeaderTopic")
        partition_cls = request_class(
            OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, "OffsetForLeaderPartition"
        )
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), (leader_epoch, latest) in pending.items():
            by_topic.setdefault(topic, []).append(
                partition_cls(partition=partition, current_leader_epoch=leader_epoch, leader_epoch=latest)
            )
        body = request_class(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION)(
            replica_id=self.state.broker_id,
            topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        for topic_result in response.topics:
            for result in topic_result.partitions:
                tp = (str(topic_result.topic), int(result.partition))
                sent = pending.get(tp)
                followed = self.partitions.get(tp)
                if sent is None or followed is None or followed.leader_epoch != sent[0]:
                    continue
                code = ErrorCode(result.error_code)
                if code is not ErrorCode.none:
                    log.info("%s-%d: leader %d answered %s to OffsetForLeaderEpoch", *tp, self.leader_id, code.name)
                    self._pause(tp, code)
                    continue
                self._truncate_to_leader(tp, sent[1], int(result.leader_epoch), int(result.end_offset))
                self._truncated(tp)

    def _truncated(self, tp: TopicPartition) -> None:
        """``tp`` agrees with the leader's log now: fetch it."""
        self._untruncated.discard(tp)
        self._stale.add(tp)

    def _truncate_to_leader(self, tp: TopicPartition, asked_epoch: int, epoch: int, end_offset: int) -> None:
        """Cut the log where it stops agreeing with the leader (Kafka's getOffsetTruncationState)."""
        partition_log = self.state.logs.get(*tp)
        if partition_log is None:
            return
        local_end = partition_log.log_end_offset
        if epoch < 0 or end_offset < 0:
            target = min(partition_log.high_watermark, local_end)  # the leader knows no such epoch
        elif epoch == asked_epoch:
            target = min(end_offset, local_end)
        else:
            local_epoch, local_epoch_end = partition_log.end_offset_for_epoch(epoch)
            target = min(end_offset, local_epoch_end if local_epoch >= 0 else local_end, local_end)
        target = max(target, partition_log.log_start_offset)
        if target < local_end:
            self.followers.truncate_to(partition_log, target)
            log.warning(
                "%s-%d: truncated from %d to %d to match leader %d (epoch %d ends at %d there)",
                *tp, local_end, partition_log.log_end_offset, self.leader_id, epoch, end_offset,
            )  # fmt: skip

    # -- fetching ----------------------------------------------------------------------------------

    def _next_fetch(self) -> SessionFetch[_Want] | None:
        """The next fetch of the session, or None when no partition is ready to fetch."""
        self._look_again()
        if not self._wanted:
            return None
        fetch = self._session.build(self._wanted, self._unsent)
        self._unsent = set()
        return fetch

    async def _fetch(self, client: KafkaClient) -> bool:
        """One Fetch round; False when no partition is ready to fetch."""
        fetch = self._next_fetch()
        if fetch is None:
            return False
        wanted = self._wanted  # unchanged until the next round's look
        try:
            response = await client.request(
                FETCH, FETCH_VERSION, self._request(fetch.session_id, fetch.epoch, fetch.send, fetch.forget)
            )
        except BaseException:
            self._session.failed()
            raise
        code = ErrorCode(response.error_code)
        if not self._session.answered(fetch, code, int(response.session_id)):
            if code not in _SESSION_ERRORS:
                log.warning("fetch from broker %d failed: %s", self.leader_id, code.name)
                for tp in wanted:
                    self._pause(tp)
            return True
        for topic_result in response.responses:
            for result in topic_result.partitions:
                tp = (str(topic_result.topic), int(result.partition_index))
                if tp in wanted:
                    self._apply(tp, wanted[tp], result)
        return True

    def _request(
        self, session_id: int, epoch: int, send: dict[TopicPartition, _Want], forget: tuple[TopicPartition, ...]
    ) -> Any:
        partition_cls = request_class(FETCH, FETCH_VERSION, "FetchPartition")
        topic_cls = request_class(FETCH, FETCH_VERSION, "FetchTopic")
        forgotten_cls = request_class(FETCH, FETCH_VERSION, "ForgottenTopic")
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), (fetch_offset, log_start, leader_epoch) in send.items():
            by_topic.setdefault(topic, []).append(
                partition_cls(
                    partition=index,
                    current_leader_epoch=leader_epoch,
                    fetch_offset=fetch_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=log_start,
                    partition_max_bytes=self._partition_max,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        return request_class(FETCH, FETCH_VERSION)(
            replica_id=self.state.broker_id,
            max_wait=datetime.timedelta(milliseconds=self._wait_ms),
            min_bytes=1,
            max_bytes=self._response_max,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(forgotten_cls(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()),
            rack_id="",
        )

    def _apply(self, tp: TopicPartition, asked: _Want, result: Any) -> None:
        fetch_offset, _, leader_epoch = asked
        followed = self.partitions.get(tp)
        partition_log = self.state.logs.get(*tp)
        if followed is None or followed.leader_epoch != leader_epoch or partition_log is None:
            return  # the partition moved on while the fetch was in flight
        if partition_log.log_end_offset != fetch_offset:
            return  # truncated meanwhile
        code = ErrorCode(result.error_code)
        if code is ErrorCode.offset_out_of_range:
            leader_start = int(result.log_start_offset)
            if 0 <= fetch_offset < leader_start:
                log.warning("%s-%d: leader %d starts at %d, past our end %d; starting over there",
                            *tp, self.leader_id, leader_start, fetch_offset)  # fmt: skip
                self.followers.start_over_at(partition_log, leader_start)
            else:
                log.warning(
                    "%s-%d: offset %d out of range on leader %d; truncating again", *tp, fetch_offset, self.leader_id
                )
                self._untruncated.add(tp)
                self._pause(tp)
            return
        if code in _RETRIABLE:
            self._pause(tp, code)
            return
        if code is not ErrorCode.none:
            log.warning("%s-%d: leader %d answered %s", *tp, self.leader_id, code.name)
            self._pause(tp)
            return
        self.followers.append(tp, partition_log, result.records, int(result.high_watermark))
