"""Passes over every partition that let the event loop run between slices of their work.

A broker holding tens of thousands of partitions walks all of them on every metadata change (the
replica manager, the controller's elections). Done in one go, a pass held the event loop for
seconds: requests waited, and the broker's own coordination session went unrenewed past its TTL.
Such a pass asks :meth:`TimeSlices.due` as it goes and yields (``await asyncio.sleep(0)``) when
its slice is used up. ``due`` is a plain call, not a coroutine: it costs a clock read per step.
"""

from __future__ import annotations

import time

__all__ = ["SLICE_S", "TimeSlices"]

#: How long a pass runs before it lets the event loop serve.
SLICE_S = 0.01


class TimeSlices:
    """The clock of one pass."""

    __slots__ = ("_began", "_slice_s")

    def __init__(self, slice_s: float | None = None) -> None:
        """Args: ``slice_s`` is the slice's length (default ``SLICE_S``, read now)."""
        self._slice_s = SLICE_S if slice_s is None else slice_s
        self._began = time.monotonic()

    def due(self) -> bool:
        """Whether the pass should yield now (the next slice starts when it says so)."""
        now = time.monotonic()
        if now - self._began <= self._slice_s:
            return False
        self._began = now
        return True
