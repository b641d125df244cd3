"""Listeners on values and key sets, written once over any Metastore's watch hints.

Rules: notifications are hints, so a listener is never handed an event to apply; on every hint
(including the Resync that starts each watch and follows every reconnect) the registry re-reads the
state and calls the listener with the *current* state if it differs from what that listener last
saw. A listener therefore sees the state once at registration, every change that survives
coalescing, and always converges to the truth. Callbacks may be plain functions or coroutines; an
exception in one is logged and does not stop its watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .api import Metastore, Versioned
from .errors import CoordinationError

__all__ = ["ListenerRegistry", "Registration"]

log = logging.getLogger(__name__)

ValueListener = Callable[[Versioned | None], Awaitable[None] | None]
KeySetListener = Callable[[dict[str, Versioned]], Awaitable[None] | None]

#: Pause before re-reading after the backend could not be reached.
RETRY_DELAY_S = 0.5


class Registration:
    """A running listener; ``cancel()`` stops it."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self._task = task

    async def cancel(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def active(self) -> bool:
        return not self._task.done()


class ListenerRegistry:
    def __init__(self, metastore: Metastore) -> None:
        self.metastore = metastore
        self._registrations: set[Registration] = set()

    def add_value_listener(self, key: str, listener: ValueListener) -> Registration:
        """Call ``listener(value or None)`` now and whenever ``key``'s version or presence changes."""

        async def read() -> Any:
            return await self.metastore.get(key)

        def fingerprint(value: Versioned | None) -> object:
            return None if value is None else (value.version, value.session_id, value.value)

        return self._start(key, read, fingerprint, listener)

    def add_keyset_listener(
        self, prefix: str, listener: KeySetListener, *, include_values: bool = False
    ) -> Registration:
        """Call ``listener({key: value})`` now and whenever the set of keys under ``prefix`` changes
        (with ``include_values``, also whenever any of their versions changes)."""

        async def read() -> Any:
            return await self.metastore.list(prefix)

        def fingerprint(found: dict[str, Versioned]) -> object:
            if include_values:
                return frozenset((key, value.version) for key, value in found.items())
            return frozenset(found)

        return self._start(prefix, read, fingerprint, listener)

    def _start(
        self,
        prefix: str,
        read: Callable[[], Awaitable[Any]],
        fingerprint: Callable[[Any], object],
        listener: Callable[[Any], Awaitable[None] | None],
    ) -> Registration:
        task = asyncio.get_running_loop().create_task(
            self._run(prefix, read, fingerprint, listener), name=f"listener {prefix}"
        )
        registration = Registration(task)
        self._registrations.add(registration)
        task.add_done_callback(lambda _: self._registrations.discard(registration))
        return registration

    async def _run(
        self,
        prefix: str,
        read: Callable[[], Awaitable[Any]],
        fingerprint: Callable[[Any], object],
        listener: Callable[[Any], Awaitable[None] | None],
    ) -> None:
        unset = object()
        last: object = unset
        while True:
            events = self.metastore.watch(prefix)
            try:
                async for _ in events:
                    state = await read()
                    mark = fingerprint(state)
                    if mark == last:
                        continue
                    last = mark
                    await _call(listener, state, prefix)
                return  # the watch ended: the metastore closed
            except CoordinationError as exc:
                log.warning("listener on %r: %s; re-reading in %.1f s", prefix, exc, RETRY_DELAY_S)
                await asyncio.sleep(RETRY_DELAY_S)
            finally:
                await events.aclose()

    async def close(self) -> None:
        """Stop every listener."""
        for registration in list(self._registrations):
            await registration.cancel()


async def _call(listener: Callable[[Any], Awaitable[None] | None], state: Any, prefix: str) -> None:
    try:
        result = listener(state)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("listener on %r failed", prefix)
