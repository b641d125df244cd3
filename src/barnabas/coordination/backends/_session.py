"""State and listeners shared by every backend's Session (kazoo's listener rules).

Listeners are called from the event loop, from a copied list, on every state change; an exception
in one is logged and does not reach the backend. LOST is final: once lost, no other state is set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..api import SessionState

__all__ = ["SessionBase"]

log = logging.getLogger(__name__)


class SessionBase:
    def __init__(self, session_id: str, ttl_s: float) -> None:
        self._id = session_id
        self._ttl_s = ttl_s
        self._state = SessionState.CONNECTED
        self._listeners: list[Callable[[SessionState], None]] = []

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
