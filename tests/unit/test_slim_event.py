"""SlimEvent behaves as asyncio.Event (set, clear, is_set, wait, cancelled waiters) and calls back once set."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from barnabas.slim_event import SlimEvent


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_wait_returns_at_once_when_set() -> None:
    async def scenario() -> None:
        event = SlimEvent(True)
        assert event.is_set()
        await asyncio.wait_for(event.wait(), 1)

    run(scenario)


def test_set_wakes_every_waiter_and_clear_makes_them_wait_again() -> None:
    async def scenario() -> None:
        event = SlimEvent()
        waiters = [asyncio.ensure_future(event.wait()) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters)
        event.set()
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        event.clear()
        again = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0)
        assert not again.done()
        event.set()
        await asyncio.wait_for(again, 1)

    run(scenario)


def test_a_cancelled_waiter_is_forgotten_and_the_others_still_woken() -> None:
    async def scenario() -> None:
        event = SlimEvent()
        cancelled = asyncio.ensure_future(event.wait())
        kept = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert event._waiters is not None and len(event._waiters) == 1
        event.set()
        await asyncio.wait_for(kept, 1)
        assert event._waiters is None

    run(scenario)


def test_set_twice_and_a_waiter_after_set_then_clear() -> None:
    async def scenario() -> None:
        event = SlimEvent()
        event.set()
        event.set()
        event.clear()
        assert not event.is_set()
        waiter = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0)
        event.set()
        await asyncio.wait_for(waiter, 1)

    run(scenario)


def test_call_when_set_calls_at_once_when_set_else_after_set() -> None:
    async def scenario() -> None:
        calls: list[str] = []
        SlimEvent(True).call_when_set(lambda: calls.append("already set"))
        assert calls == ["already set"]
        event = SlimEvent()
        event.call_when_set(lambda: calls.append("later"))
        await asyncio.sleep(0)
        assert calls == ["already set"]
        event.set()
        await asyncio.sleep(0)
        assert calls == ["already set", "later"]

    run(scenario)
