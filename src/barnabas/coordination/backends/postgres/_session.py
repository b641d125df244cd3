"""Sessions of the PostgreSQL backend: a lease row renewed on the server's clock.

Rules this module keeps:

- A session is a row in ``sessions`` with ``expires_at = clock_timestamp() + ttl`` (server clock).
  Its ephemeral keys reference it ``ON DELETE CASCADE``; whoever deletes the row (``close()``, a
  reaper in any client, the owner on LOST) removes them, and the change log records each.
- One keepalive task per session renews every ttl/3 on the metastore's keepalive connection,
  never reviving an expired lease (``WHERE expires_at > now``): a late renewal means LOST.
- What a renewal attempt saw becomes a state in one function, :func:`session_state`:
  renewed → CONNECTED; row gone or expired → LOST; unreachable or no answer → SUSPENDED while the
  lease may still hold, LOST once it surely has not (``ttl`` after the last renewal's *answer*: the
  server set ``expires_at`` before answering). An attempt may take until then: over a slow link a
  renewal answered after a second still renews, and a connection opened again after a timeout
  (several round trips) still has the time to. An attempt unanswered for ttl/3 makes the session
  SUSPENDED while it goes on, so a hung server is noticed at the latest 2·ttl/3 after the last
  renewal, before the lease ends. After a failed attempt the renewal is retried every 0.1 s, so a
  server back within the TTL makes the session CONNECTED again at once.
- On LOST the owner deletes the row itself if it can (its keys go now rather than at the next
  reap); if the server is down, the first reaper after it returns does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from typing import Protocol

from ...api import SessionState
from ...errors import CoordinationError
from .._session import SessionBase

__all__ = ["PostgresSession", "Renewal", "SessionOwner", "session_state"]

log = logging.getLogger(__name__)

#: Seconds between renewal attempts while SUSPENDED.
RETRY_S = 0.1


class Renewal(enum.Enum):
    """What one keepalive attempt saw."""

    RENEWED = "renewed"
    ENDED = "ended"  # the row was gone or already expired
    UNREACHABLE = "unreachable"  # connection error or no answer in time


def session_state(renewal: Renewal, lease_left_s: float) -> SessionState:
    """Map a renewal outcome to kazoo's three states (the only place doing so)."""
    if renewal is Renewal.RENEWED:
        return SessionState.CONNECTED
    if renewal is Renewal.ENDED:
        return SessionState.LOST
    return SessionState.SUSPENDED if lease_left_s > 0 else SessionState.LOST


class SessionOwner(Protocol):
    """What a session needs from its metastore."""

    async def _renew_session(self, session_id: str, timeout_s: float) -> bool: ...

    async def _end_session(self, session_id: str, timeout_s: float) -> None: ...

    def _forget_session(self, session: PostgresSession) -> None: ...


class PostgresSession(SessionBase):
    """A lease row kept alive by a background task until closed or lost."""

    def __init__(self, owner: SessionOwner, session_id: str, ttl_s: float, granted_at: float) -> None:
        super().__init__(session_id, ttl_s)
        self._owner = owner
        #: Loop time after which the lease has surely ended unless renewed (answer time + ttl).
        self._lease_end = granted_at + ttl_s
        self._keepalive = asyncio.get_running_loop().create_task(
            self._keep_alive(), name=f"postgres session {session_id} keepalive"
        )

    @property
    def interval_s(self) -> float:
        return self.ttl_s / 3

    async def _keep_alive(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self.interval_s
        while self.state is not SessionState.LOST:
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            started = loop.time()
            renewal = Renewal.UNREACHABLE
            lease_left = self._lease_end - started
            if lease_left > 0:
                slow = loop.call_later(self.interval_s, self._set_state, SessionState.SUSPENDED)
                try:
                    alive = await self._owner._renew_session(self.id, lease_left)
                    renewal = Renewal.RENEWED if alive else Renewal.ENDED
                except CoordinationError as exc:
                    log.debug("session %s keepalive failed: %s", self.id, exc)
                finally:
                    slow.cancel()
            now = loop.time()
            if renewal is Renewal.RENEWED:
                self._lease_end = now + self.ttl_s
            state = session_state(renewal, self._lease_end - now)
            self._set_state(state)
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
