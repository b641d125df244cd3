"""State and listeners shared by every backend's Session (kazoo's listener rules), and the lease clock.

Listeners are called from the event loop, from a copied list, on every state change; an exception
in one is logged and does not reach the backend. LOST is final: once lost, no other state is set.

A server starts (or renews) a lease at some moment between a request's sending and its answer, and
the client cannot tell when: :class:`LeaseClock` keeps both ends. Before ``sent + ttl`` the lease
surely holds (CONNECTED), from ``answered + ttl`` it has surely ended (LOST), and in between the
session is SUSPENDED: it must not act as a leader, nor give up what it may still hold.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from ..api import SessionState

__all__ = ["LeaseClock", "SessionBase"]

log = logging.getLogger(__name__)

#: How long before a lease may end the session doubts it: an event loop runs a timer late by whatever
#: else it is doing (under a loaded test suite a doubt at the very end came 0.5 ms past the server's expiry).
DOUBT_EARLY_S = 0.1


class SessionBase:
    def __init__(self, session_id: str, ttl_s: float) -> None:
        self._id = session_id
        self._ttl_s = ttl_s
        self._state = SessionState.CONNECTED
        self._listeners: list[Callable[[SessionState], None]] = []
        self._doubt: asyncio.TimerHandle | None = None

    @property
    def id(self) -> str:
        return self._id

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    @property
    def state(self) -> SessionState:
        return self._state

    def add_state_listener(self, listener: Callable[[SessionState], None]) -> None:
        self._listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[SessionState], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _set_state(self, state: SessionState, *, closed: bool = False) -> None:
        """Move to ``state``; ``closed``: LOST because its owner closed it (logged so, not as a loss)."""
        if state is self._state or self._state is SessionState.LOST:
            return
        if closed:
            log.info("coordination session %s closed", self._id)
        else:
            log.info("coordination session %s: %s -> %s", self._id, self._state.value, state.value)
        self._state = state
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("session state listener failed")

    def _begin_lease(self, lease: LeaseClock, sent: float, answered: float) -> None:
        """Take up the lease the open statement (sent and answered then) started: CONNECTED, or SUSPENDED
        if it was answered so late that the lease may have ended already (the first renewal decides)."""
        lease.started(sent, answered)
        self._set_leased_state(lease.state(time.monotonic(), answered=True), lease)

    def _set_leased_state(self, state: SessionState, lease: LeaseClock) -> None:
        """Move to ``state``; while CONNECTED, become SUSPENDED once ``lease`` may have ended unless set
        again before: a lease whose renewals go unanswered must not be trusted past its end.
        """
        if self._doubt is not None:
            self._doubt.cancel()
            self._doubt = None
        self._set_state(state)
        if self._state is SessionState.CONNECTED:
            delay = max(0.0, lease.holds_until - DOUBT_EARLY_S - time.monotonic())
            self._doubt = asyncio.get_running_loop().call_later(delay, self._set_state, SessionState.SUSPENDED)


class LeaseClock:
    """When a lease, started or renewed by its server between a request's sending and its answer,
    surely holds and when it has surely ended (both ``time.monotonic``).
    """

    def __init__(self, ttl_s: float, *, rounding_s: float = 0.0) -> None:
        """``rounding_s``: how much sooner than its TTL the server may end a lease (Cassandra: a second)."""
        self.ttl_s = ttl_s
        self.rounding_s = rounding_s
        self.holds_until = -math.inf
        self.over_at = -math.inf

    def started(self, sent: float, answered: float) -> None:
        """The server started or renewed the lease after ``sent`` and before ``answered``."""
        self.holds_until = max(self.holds_until, sent + self.ttl_s - self.rounding_s)
        self.over_at = max(self.over_at, answered + self.ttl_s)

    def state(self, now: float, *, answered: bool) -> SessionState:
        """The session's state at ``now``; ``answered``: the last attempt to renew was answered (else
        it is SUSPENDED at best, whatever the lease may still hold).
        """
        if now >= self.over_at:
            return SessionState.LOST
        if answered and now < self.holds_until:
            return SessionState.CONNECTED
        return SessionState.SUSPENDED
