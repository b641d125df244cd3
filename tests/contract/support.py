"""Helpers the per-backend contract test modules share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["eventually"]


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
