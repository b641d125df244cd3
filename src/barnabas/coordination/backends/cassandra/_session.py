"""A session is a TTL'd lease row, kept alive by its own task; its ephemeral keys share its TTL.

Rules this module keeps (coordination.md §6):

- Cassandra TTLs are whole seconds and count down on the server's clock, from the second the write
  was made: a row written with TTL ``n`` lives between ``n - 1`` and ``n`` seconds. So the lease is
  ``max(2, ceil(ttl_s))`` seconds and :attr:`ttl_s` reports that.
- Every :data:`KEEPALIVE_FRACTION` of the lease, one conditional batch rewrites the lease row
  (``IF EXISTS``) and every ephemeral key of the session (all columns, same value and version,
  ``IF version = v AND session = id``) with the full TTL, so they all expire in the same second.
- The three states are decided in :func:`state_after` alone: a renewal whose batch applied is
  CONNECTED; a lease row found gone is LOST; an unanswered renewal is SUSPENDED until the lease
  has run out since the last *answered* renewal (the rows are gone by the server's clock), then LOST.
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
from .._session import SessionBase

__all__ = ["Beat", "CassandraSession", "Leases", "lease_seconds", "state_after"]

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


def state_after(beat: Beat, since_alive_s: float, lease_s: float) -> SessionState:
    """The session state after a renewal attempt (kazoo's three states, mapped here only).

    Args:
        beat: what the attempt learned.
        since_alive_s: seconds since the answer to the last renewal that applied arrived.
        lease_s: the lease's TTL.
    """
    if beat is Beat.ALIVE:
        return SessionState.CONNECTED
    if beat is Beat.GONE or since_alive_s >= lease_s:
        return SessionState.LOST
    return SessionState.SUSPENDED


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

    def __init__(self, leases: Leases, session_id: str, lease_s: int, granted_at: float) -> None:
        super().__init__(session_id, float(lease_s))
        self.lease_s = lease_s
        self._leases = leases
        self._last_alive = granted_at
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
                self._last_alive = now
            state = state_after(beat, now - self._last_alive, self.lease_s)
            if self._closing:
                return
            if state is SessionState.LOST:
                await self._lost()
                return
            self._set_state(state)
            pause = self.interval_s if beat is Beat.ALIVE else min(RETRY_INTERVAL_S, self.interval_s)
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
