"""asyncio.Event's set, clear and wait for objects kept by the thousand, such as one per connection.

asyncio.Event keeps its waiters in a deque from the start: 760 bytes before anyone waits, plus an
instance dict. A connection holding four of them spent more on its events than Kafka spends on a
whole connection. A :class:`SlimEvent` is two slots; a list of waiters exists only while some
task waits, which for a connection's events is at most one or two at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["SlimEvent"]


class SlimEvent:
    """Set, clear, is_set and wait, as asyncio.Event, without its per-instance deque and dict."""

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        """Set the flag and wake every task waiting for it."""
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._value = False

    def call_when_set(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the flag is set: now if it is, else soon after :meth:`set`."""
        if self._value:
            callback()
            return
        self._new_waiter().add_done_callback(lambda _: callback())

    async def wait(self) -> None:
        """Return once the flag is set (at once if it is)."""
        if self._value:
            return
        waiter = self._new_waiter()
        try:
            await waiter
        finally:
            waiters = self._waiters
            if waiters is not None and waiter in waiters:  # cancelled before set(): take it out
                waiters.remove(waiter)
                if not waiters:
                    self._waiters = None

    def _new_waiter(self) -> asyncio.Future[None]:
        """A future :meth:`set` completes, the waiters' list made only now."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        return waiter
