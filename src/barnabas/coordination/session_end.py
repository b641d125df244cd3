"""Waiting for a session to end, for whoever must act then (join again, register again).

A session reports its states to listeners; a keeper that re-joins after a loss needs only the
moment the session is LOST, already or later. One function, so every keeper waits the same way
and leaves no listener behind.
"""

from __future__ import annotations

import asyncio

from .api import Session, SessionState

__all__ = ["wait_until_lost"]


async def wait_until_lost(session: Session) -> None:
    """Return once ``session`` is LOST (at once if it is already)."""
    lost = asyncio.Event()

    def on_state(state: SessionState) -> None:
        if state is SessionState.LOST:
            lost.set()

    session.add_state_listener(on_state)
    try:
        if session.state is not SessionState.LOST:
            await lost.wait()
    finally:
        session.remove_state_listener(on_state)
