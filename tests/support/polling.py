"""Waiting for a condition another process brings about: polled, never a sleep standing in for it."""

from __future__ import annotations

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
