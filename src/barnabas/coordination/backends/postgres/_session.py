"""Sessions of the PostgreSQL backend: a lease row renewed on the server's clock.

Rules this module keeps:

- A session is a row in ``sessions`` with ``expires_at = clock_timestamp() + ttl`` (server clock).
  Its ephemeral keys reference it ``ON DELETE CASCADE``; whoever deletes the row (``close()``, a
  reaper in any client, the owner on LOST) removes them, and the change log records each.
- One keepalive task per session renews every ttl/3 on the metastore's keepalive connection,
  never reviving an expired lease (``WHERE expires_at > now``): a late renewal means LOST.
- The server sets ``expires_at`` between a statement's sending and its answer, so the lease surely
  holds until ``ttl`` after the last renewal (or the open) that applied was *sent*, and has surely
  ended ``ttl`` after its *answer* (:class:`LeaseClock`). What a renewal attempt saw becomes a state in
  one function, :func:`session_state`: row gone or expired → LOST; renewed → CONNECTED while the
  lease surely holds; otherwise (unanswered, or answered so late that the lease may already have
  ended) SUSPENDED until it has surely ended, then LOST. A CONNECTED session becomes SUSPENDED by
  itself when the lease it knows of may end. An open answered late (the server paused while it was
  on its way) makes a session that starts SUSPENDED and renews at once.
- An attempt may take until the lease has surely ended: over a slow link a renewal answered after a
  second still renews, and a connection opened again after a timeout (several round trips) still has
  the time to. An attempt unanswered for ttl/3 makes the session SUSPENDED while it goes on, so a
  hung server is noticed at the latest 2·ttl/3 after the last renewal. After a failed or late attempt
  the renewal is retried every 0.1 s, so a server back within the TTL makes the session CONNECTED
  again at once.
- On LOST the owner deletes the row itself if it can (its keys go now rather than at the next
  reap); if the server is down, the first reaper after it returns does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from typing import Protocol

from ...api import SessionState
from ...errors import CoordinationError
from .._session import LeaseClock, SessionBase

__all__ = ["PostgresSession", "Renewal", "SessionOwner", "session_state"]

log = logging.getLogger(__name__)

#: Seconds between renewal attempts while SUSPENDED.
RETRY_S = 0.1


class Renewal(enum.Enum):
    """What one keepalive attempt saw."""

    RENEWED = "renewed"
    ENDED = "ended"  # the row was gone or already expired
    UNREACHABLE = "unreachable"  # connection error or no answer in time


def session_state(renewal: Renewal, lease: LeaseClock, now: float) -> SessionState:
    """Map a renewal outcome to kazoo's three states (the only place doing so)."""
    if renewal is Renewal.ENDED:
        return SessionState.LOST
    return lease.state(now, answered=renewal is Renewal.RENEWED)


class SessionOwner(Protocol):
    """What a session needs from its metastore."""

    async def _renew_session(self, session_id: str, timeout_s: float) -> float | None: ...

    async def _end_session(self, session_id: str, timeout_s: float) -> None: ...

    def _forget_session(self, session: PostgresSession) -> None: ...


class PostgresSession(SessionBase):
    """A lease row kept alive by a background task until closed or lost."""

    def __init__(self, owner: SessionOwner, session_id: str, ttl_s: float, sent: float, answered: float) -> None:
        """``sent`` and ``answered``: when (``time.monotonic``) the statement that opened the lease was
        sent, and its answer came.
        """
        super().__init__(session_id, ttl_s)
        self._owner = owner
        self._lease = LeaseClock(ttl_s)
        self._begin_lease(self._lease, sent, answered)
        self._keepalive = asyncio.get_running_loop().create_task(
            self._keep_alive(), name=f"postgres session {session_id} keepalive"
        )

    @property
    def interval_s(self) -> float:
        return self.ttl_s / 3

    async def _keep_alive(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = time.monotonic() + (self.interval_s if self.state is SessionState.CONNECTED else 0.0)
        while self.state is not SessionState.LOST:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            started = time.monotonic()
            renewal = Renewal.UNREACHABLE
            sent: float | None = None
            lease_left = self._lease.over_at - started
            if lease_left > 0:
                slow = loop.call_later(self.interval_s, self._set_state, SessionState.SUSPENDED)
                try:
                    sent = await self._owner._renew_session(self.id, lease_left)
                    renewal = Renewal.RENEWED if sent is not None else Renewal.ENDED
                except CoordinationError as exc:
                    log.debug("session %s keepalive failed: %s", self.id, exc)
                finally:
                    slow.cancel()
            now = time.monotonic()
            if sent is not None:
                self._lease.started(sent, now)
            state = session_state(renewal, self._lease, now)
            self._set_leased_state(state, self._lease)
            next_at = started + self.interval_s if state is SessionState.CONNECTED else now + RETRY_S
        with contextlib.suppress(CoordinationError):
            await self._owner._end_session(self.id, self.ttl_s)
        self._owner._forget_session(self)

    def _mark_ended(self) -> None:
        """The server said the lease is gone (a commit found it ended)."""
        self._set_state(SessionState.LOST)
        self._keepalive.cancel()
        self._owner._forget_session(self)

    async def close(self) -> None:
        """End the lease now (its ephemeral keys go with it); LOST afterwards.

        If the server cannot be reached the state is still LOST, and the lease ends by itself
        within ``ttl_s`` (then a reaper removes the keys).
        """
        self._keepalive.cancel()
        await asyncio.wait({self._keepalive})  # not ``await task``: that would swallow our own cancel
        if self.state is not SessionState.LOST:
            try:
                await self._owner._end_session(self.id, self.ttl_s)
            except CoordinationError as exc:
                log.warning("session %s: could not end the lease now (%s); it expires within its TTL", self.id, exc)
            self._set_state(SessionState.LOST, closed=True)
        self._owner._forget_session(self)
