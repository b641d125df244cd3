"""Waiting for a condition another process brings about: polled, never a sleep standing in for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = 60.0, interval_s: float = 0.05) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` if it is not within ``timeout_s``.

    ``interval_s`` is how often it is asked: a condition that costs a round trip to a broker may
    want fewer asks.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval_s)


async def until(condition: Callable[[], object], what: str, timeout_s: float = 20.0, interval_s: float = 0.01) -> None:
    """:func:`wait_until` on an event loop: the loop's own tasks (a broker's, a watch's) run meanwhile."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(interval_s)
