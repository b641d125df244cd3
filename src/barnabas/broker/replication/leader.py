"""A partition this broker leads: follower progress, the high watermark and acks=all waiters.

Kafka's Partition and Replica classes, for the leader side:

- Each follower's log end offset is the offset of its latest Fetch. Its ``last_caught_up_ms`` is
  that fetch's time if it asked for the leader's log end, or the previous fetch's time if it
  asked for at least what the leader's log end was then (Replica.updateFetchState): a follower
  that keeps up never looks lagging, however busy the leader. These times are on a monotonic
  clock (Kafka reads the wall clock here): a step of the leader's wall clock must neither make
  every follower look lagging nor keep a stalled one in the ISR until the clock catches up.
- The high watermark is the smallest log end offset over the ISR (the leader's own included);
  it only moves forward, and not at all while the ISR is smaller than ``min.insync.replicas`` (or
  the replica count, if smaller), as Kafka's leader holds it since 3.7 (``isUnderMinIsr``): what a
  leader alone took with acks=1 is not shown to consumers, nor counted as committed, until enough
  replicas have it. acks=all produce waits until it passes the batch.
- A follower joins the ISR once a recent fetch has reached the high watermark and the start of
  this leader epoch (so it has truncated against this leader); it leaves after
  ``replica.lag.time.max.ms`` without catching up. Those changes are written by the replica
  manager, which calls ``set_state`` once storage has them.
- Progress belongs to an incarnation (KIP-903): each fetch is tagged with the broker epoch the
  follower was registered in, as this broker saw it when the fetch arrived, and the ISR entry a
  follower joins with names that epoch. An ISR member's progress counts toward the high
  watermark only if it was made in the epoch the member is in sync in, so what a follower
  fetched before a restart that lost it is never taken for what its new incarnation holds.
- A fetch session that skips a quiet partition (``fetch_sessions``: the follower is in sync and at
  the leader's end, and nothing has changed since) records the follower's fetch once per fetch, on
  the session's stamp, rather than on every partition: while ``quiet`` holds the stamp, each fetch
  it marks counts as a fetch at the leader's end at that time. The next fetch that reads the
  partition (it changed, or the follower named it anew) settles the stamp's time into the progress
  first, as if every skipped fetch had been recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from barnabas.cluster import PartitionState
from barnabas.log import PartitionLog
from barnabas.protocol import ErrorCode

if TYPE_CHECKING:
    from ..fetch_sessions import PassStamp

__all__ = ["FollowerProgress", "LeaderReplica"]


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = -1
    #: The follower's broker epoch when its latest fetch arrived (-1: not registered then).
    broker_epoch: int = -1
    #: While its fetch session skips the partition as quiet: when that session last fetched (see the module).
    quiet: PassStamp | None = None

    def caught_up_ms(self) -> int:
        """When the follower last fetched at, or past, what the leader's end was at its fetch before."""
        if self.quiet is None:
            return self.last_caught_up_ms
        return max(self.last_caught_up_ms, self.quiet.ms)

    def settle(self) -> None:
        """Record the fetches the session skipped this partition in: each was at the leader's end."""
        if self.quiet is not None:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.quiet.ms)
            self.last_fetch_ms = max(self.last_fetch_ms, self.quiet.ms)
            self.quiet = None


class LeaderReplica:
    def __init__(  # noqa: PLR0917 - one partition's identity and starting state, all required
        self, topic: str, partition: int, log: PartitionLog, state: PartitionState, replicas: tuple[int, ...],
        broker_id: int, now_ms: int,
    ) -> None:  # fmt: skip
        self.topic = topic
        self.partition = partition
        self.log = log
        self.state = state
        self.replicas = replicas
        self.broker_id = broker_id
        #: Where this leader epoch starts; a follower below it has not truncated against us yet.
        self.epoch_start_offset = log.log_end_offset
        # Followers start "caught up now", as Kafka resets them on a leader change.
        self.followers = {r: FollowerProgress(last_caught_up_ms=now_ms) for r in replicas if r != broker_id}
        self._waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = []
        self.resigned = False
        #: The topic's ``min.insync.replicas``; below it (or below the replica count, if smaller) the HW holds.
        self.min_isr = 1

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    def set_state(self, state: PartitionState) -> None:
        """A newer state with the same leader and epoch (an ISR change); the HW may move."""
        self.state = state
        self.log.touch()  # fetch sessions that left the partition quiet read it again
        self.maybe_advance_high_watermark()

    def renew(self, state: PartitionState, replicas: tuple[int, ...], now_ms: int) -> None:
        """Lead on at a new leader epoch, or with a new replica set (a reassignment).

        Waiting produce requests stay: the log is the same, and the high watermark over the new
        ISR still decides when they are safe. Followers must reach the new epoch's start before
        they count as caught up, as after any leader change.
        """
        if state.leader_epoch != self.state.leader_epoch:
            self.epoch_start_offset = self.log.log_end_offset
        self.replicas = replicas
        self.followers = {
            r: self.followers.get(r) or FollowerProgress(last_caught_up_ms=now_ms)
            for r in replicas if r != self.broker_id
        }  # fmt: skip
        self.set_state(state)

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int, broker_epoch: int) -> bool:
        """Record a follower's fetch, made in ``broker_epoch``; return whether the high watermark moved."""
        progress = self.followers.get(replica_id)
        if progress is None:
            return False
        progress.settle()
        progress.broker_epoch = broker_epoch
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif fetch_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.last_fetch_leader_end = leader_end
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """Move the HW up to the smallest log end offset over the ISR; wake what it satisfies."""
        if len(self.state.isr) < min(self.min_isr, len(self.replicas)):
            return False
        ends = [self.log.log_end_offset]
        for replica in self.state.isr:
            if replica != self.broker_id:
                progress = self.followers.get(replica)
                counts = progress is not None and self.state.in_sync(replica, progress.broker_epoch)
                ends.append(progress.log_end_offset if progress is not None and counts else -1)
        candidate = min(ends)
        if candidate <= self.log.high_watermark:
            return False
        self.log.high_watermark = candidate
        self._complete_waiters()
        return True

    def wants_to_join(self, live: Mapping[int, int], now_ms: int, max_lag_ms: int) -> dict[int, int]:
        """Followers not in sync in the incarnation registered now (``live``: broker id -> broker
        epoch) that have caught up in it: ISR expansion candidates, with the epoch to join in.

        Caught up means a fetch at or past the high watermark and this epoch's start, made within
        ``max_lag_ms`` (the shrink rule's window). Kafka expands the ISR only from a fetch; without
        the window, a follower that stopped fetching would rejoin as soon as the leader, alone in
        the ISR, stopped taking writes and its high watermark reached where that follower stopped.
        """
        hw = self.log.high_watermark
        return {
            r: p.broker_epoch for r, p in self.followers.items()
            if p.broker_epoch >= 0 and live.get(r) == p.broker_epoch and not self.state.in_sync(r, p.broker_epoch)
            and p.log_end_offset >= max(hw, self.epoch_start_offset) and now_ms - p.caught_up_ms() <= max_lag_ms
        }  # fmt: skip

    def lagging(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up for longer than ``max_lag_ms`` (shrink candidates)."""
        return [
            r for r in self.state.isr
            if r != self.broker_id and now_ms - self.followers.get(r, FollowerProgress()).caught_up_ms() > max_lag_ms
        ]  # fmt: skip

    def abandoned(self, lagging: Collection[int]) -> bool:
        """Whether every other ISR member is in ``lagging`` (see :meth:`lagging`), and there is one:
        once this broker has lost its coordination session, the sign that its followers follow
        another leader now."""
        others = [r for r in self.state.isr if r != self.broker_id]
        return bool(others) and all(r in lagging for r in others)

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> ErrorCode:
        """Wait until the HW reaches ``offset``: NONE, REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER."""
        if self.log.high_watermark >= offset:
            return ErrorCode.none
        if self.resigned:
            return ErrorCode.not_leader_or_follower
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            return ErrorCode.request_timed_out
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def resign(self) -> None:
        """This broker no longer leads the partition: every waiting produce fails."""
        self.resigned = True
        self.log.touch()  # fetch sessions that left the partition quiet read it again (and learn)
        for _, future in self._waiters:
            if not future.done():
                future.set_result(ErrorCode.not_leader_or_follower)
        self._waiters = []

    def _complete_waiters(self) -> None:
        hw = self.log.high_watermark
        remaining = []
        for offset, future in self._waiters:
            if offset <= hw:
                if not future.done():
                    future.set_result(ErrorCode.none)
            else:
                remaining.append((offset, future))
        self._waiters = remaining
