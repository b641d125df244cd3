"""Helpers the per-backend contract test modules share."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from barnabas.coordination import Session, SessionState, WatchEvent

__all__ = ["StateLog", "eventually", "next_event", "run_scenario"]

T = TypeVar("T")


async def eventually(predicate: Callable[[], Awaitable[bool] | bool], what: str, timeout_s: float = 15.0) -> float:
    """Wait until ``predicate`` holds; return the seconds it took."""
    start = time.monotonic()
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.02)


def run_scenario(coro: Coroutine[Any, Any, T], *servers: Any, timeout_s: float) -> T:
    """Run one scenario on a fresh event loop; on failure print the servers' logs (``log_tails`` or ``log_tail``)."""
    try:
        return asyncio.run(asyncio.wait_for(coro, timeout_s))
    except BaseException:
        traceback.print_exc()
        for server in servers:
            print(server.log_tails() if hasattr(server, "log_tails") else server.log_tail())
        raise


class StateLog:
    """Records a session's state changes (with when); ``reached(state)`` waits for one."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.states: list[SessionState] = []
        self.at: dict[SessionState, float] = {}
        #: Every change with when it came (``time.monotonic``).
        self.changes: list[tuple[float, SessionState]] = []
        session.add_state_listener(self._record)

    def _record(self, state: SessionState) -> None:
        now = time.monotonic()
        self.states.append(state)
        self.at.setdefault(state, now)
        self.changes.append((now, state))

    def first_after(self, moment: float, state: SessionState) -> float:
        """When the session first went to ``state`` at or after ``moment`` (it must have)."""
        return next(at for at, s in self.changes if at >= moment and s is state)

    async def reached(self, state: SessionState, timeout_s: float = 20.0) -> float:
        """Wait until the session went through ``state`` (or is in it); return when it first got there."""
        await eventually(
            lambda: state in self.states or self.session.state is state,
            f"session {state.value} (saw {[s.value for s in self.states]})",
            timeout_s,
        )
        return self.at.get(state, time.monotonic())


async def next_event(events: AsyncIterator[WatchEvent], timeout_s: float = 15.0) -> WatchEvent:
    async with asyncio.timeout(timeout_s):
        return await anext(events)
