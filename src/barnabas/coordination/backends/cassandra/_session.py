"""A session is a TTL'd lease row, kept alive by its own task; its ephemeral keys share its TTL.

Rules this module keeps (coordination.md §6):

- Cassandra TTLs are whole seconds and count down on the server's clock, from the second the write
  was made: a row written with TTL ``n`` lives between ``n - 1`` and ``n`` seconds. So the lease is
  ``max(2, ceil(ttl_s))`` seconds and :attr:`ttl_s` reports that.
- Every :data:`KEEPALIVE_FRACTION` of the lease, one conditional batch rewrites the lease row
  (``IF EXISTS``) and every ephemeral key of the session (all columns, same value and version,
  ``IF version = v AND session = id``) with the full TTL, so they all expire in the same second.
- The node writes a renewal's rows between the attempt's start and its answer, so they surely live
  until ``lease - 1`` seconds after the last attempt that applied *began* (the second of rounding
  above), and are surely gone ``lease`` seconds after its *answer* (:class:`LeaseClock`). The three
  states are decided in :func:`state_after` alone: a lease row found gone is LOST; a renewal that
  applied is CONNECTED while the rows surely live; otherwise (unanswered, or answered so late that
  they may be gone) SUSPENDED until they surely are, then LOST. A CONNECTED session becomes SUSPENDED
  by itself when its rows may expire.
- A node marked down by the driver wakes the task at once, so SUSPENDED shows within a request,
  not a keepalive interval.
- On LOST the task makes one attempt to delete what is left of the session's keys (a commit, so
  watchers see it); the TTL removes them anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import time
from typing import Protocol

from ...api import SessionState
from ...errors import CoordinationError, UnavailableError
from .._session import LeaseClock, SessionBase

__all__ = ["Beat", "CassandraSession", "Leases", "lease_clock", "lease_seconds", "state_after"]

log = logging.getLogger(__name__)

#: A renewal every lease/3, as etcd's and ZooKeeper's clients do.
KEEPALIVE_FRACTION = 1 / 3
#: Seconds between renewal attempts while SUSPENDED (capped at the keepalive interval).
RETRY_INTERVAL_S = 0.25


class Beat(enum.Enum):
    """What one renewal attempt learned."""

    ALIVE = "alive"  # the batch applied: the lease row existed and was renewed
    GONE = "gone"  # the lease row does not exist (expired or ended)
    UNANSWERED = "unanswered"  # the cluster could not be reached or did not answer in time


def lease_seconds(ttl_s: float) -> int:
    """The TTL, in whole seconds, that the rows of a session asking for ``ttl_s`` are written with."""
    return max(2, math.ceil(ttl_s))


def state_after(beat: Beat, lease: LeaseClock, now: float) -> SessionState:
    """The session state after a renewal attempt (kazoo's three states, mapped here only).

    Args:
        beat: what the attempt learned.
        lease: when the rows surely live and when they are surely gone, the attempt counted in.
        now: the time (``time.monotonic``) of the answer.
    """
    if beat is Beat.GONE:
        return SessionState.LOST
    return lease.state(now, answered=beat is Beat.ALIVE)


def lease_clock(lease_s: int) -> LeaseClock:
    """The clock of a lease written with a TTL of ``lease_s`` whole seconds (it may end a second sooner)."""
    return LeaseClock(float(lease_s), rounding_s=1.0)


class Leases(Protocol):
    """The lease operations a session needs from its metastore."""

    async def renew_lease(self, session_id: str, lease_s: int, timeout_s: float) -> bool:
        """Renew the lease row and the session's ephemeral keys; False if the lease row is gone."""
        ...

    async def end_lease(self, session_id: str) -> None:
        """Delete the session's ephemeral keys and its lease row (one commit)."""
        ...

    def forget_session(self, session: CassandraSession) -> None: ...


class CassandraSession(SessionBase):
    """A lease row in the namespace's partition, renewed by a background task."""

    def __init__(self, leases: Leases, session_id: str, lease_s: int, sent: float, answered: float) -> None:
        """``sent`` and ``answered``: when (``time.monotonic``) the statement writing the lease row was
        sent, and its answer came.
        """
        super().__init__(session_id, float(lease_s))
        self.lease_s = lease_s
        self._leases = leases
        self._lease = lease_clock(lease_s)
        self._begin_lease(self._lease, sent, answered)  # SUSPENDED if answered late: the first renewal is at once
        self._closing = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keepalive(), name=f"cassandra-session-{self.id}")

    @property
    def leases(self) -> Leases:
        """The metastore this session belongs to."""
        return self._leases

    @property
    def interval_s(self) -> float:
        return self.lease_s * KEEPALIVE_FRACTION

    async def _keepalive(self) -> None:
        while True:
            began = time.monotonic()
            try:
                alive = await self._leases.renew_lease(self.id, self.lease_s, timeout_s=self.interval_s)
                beat = Beat.ALIVE if alive else Beat.GONE
            except UnavailableError as exc:
                log.debug("session %s: renewal unanswered: %s", self.id, exc)
                beat = Beat.UNANSWERED
            except Exception:  # a refusal or a bug must not end the task silently: the lease would lapse
                log.exception("session %s: renewal failed", self.id)
                beat = Beat.UNANSWERED
            now = time.monotonic()
            if beat is Beat.ALIVE:
                self._lease.started(began, now)
            state = state_after(beat, self._lease, now)
            if self._closing:
                return
            if state is SessionState.LOST:
                await self._lost()
                return
            self._set_leased_state(state, self._lease)
            pause = self.interval_s if state is SessionState.CONNECTED else min(RETRY_INTERVAL_S, self.interval_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, began + pause - time.monotonic())):
                    await self._wake.wait()
            self._wake.clear()

    def nudge(self) -> None:
        """Renew now rather than at the next interval (a node went down: find out if we are SUSPENDED)."""
        self._wake.set()

    async def _lost(self) -> None:
        """The lease ended: say so, then make one attempt to delete what is left of its keys."""
        self._leases.forget_session(self)
        self._set_state(SessionState.LOST)
        with contextlib.suppress(CoordinationError):
            await self._leases.end_lease(self.id)

    def mark_lost(self) -> None:
        """A commit found the lease row gone: the keepalive task ends the session."""
        if self._task is not None and not self._task.done() and self.state is not SessionState.LOST:
            self._task.cancel()
            self._task = asyncio.get_running_loop().create_task(self._lost())

    async def close(self) -> None:
        """End the lease now: delete its ephemeral keys and lease row, then become LOST."""
        if self._closing or self.state is SessionState.LOST:
            return
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # close() itself was cancelled
        self._leases.forget_session(self)
        try:
            await self._leases.end_lease(self.id)
        except CoordinationError as exc:
            log.warning("session %s: could not end the lease (its keys expire with the TTL): %s", self.id, exc)
        self._set_state(SessionState.LOST, closed=True)
