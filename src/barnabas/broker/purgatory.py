"""Fetch requests waiting for data (Kafka's DelayedFetch purgatory), keyed by partition.

A waiting fetch registers one future under each partition it reads; an append to any of them
completes the future and the fetch re-reads. Wake-ups are hints: the waiter always re-checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

__all__ = ["FetchWaiters"]

TopicPartition = tuple[str, int]


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[bool]]] = {}

    async def wait(
        self,
        partitions: Iterable[TopicPartition],
        timeout_s: float,
        also: Callable[[Callable[[], None] | None], None] | None = None,
    ) -> bool:
        """Return when one of ``partitions`` gets data or ``timeout_s`` passes; whether one was notified.

        ``also`` is handed a function that wakes this wait, and None once it is over (a fetch session's
        quiet partitions wake it through their logs).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiting.setdefault(key, set()).add(future)
        handle = loop.call_later(max(timeout_s, 0.0), _settle, future)
        if also is not None:
            also(lambda: _settle(future, True))
        try:
            return await future
        finally:
            if also is not None:
                also(None)
            handle.cancel()
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiting[key]

    def notify(self, partition: TopicPartition) -> None:
        """Wake every fetch waiting on ``partition``."""
        for future in self._waiting.pop(partition, ()):
            if not future.done():
                future.set_result(True)

    def notify_all(self) -> None:
        """Wake every waiting fetch (shutdown, topic deletion)."""
        for key in list(self._waiting):
            self.notify(key)


def _settle(future: asyncio.Future[bool], woken: bool = False) -> None:
    if not future.done():
        future.set_result(woken)
