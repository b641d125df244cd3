"""When a log manager's periodic duties are due, as Kafka's scheduler runs them.

Kafka's LogManager schedules retention and the time-based flusher at a fixed rate after
``log.initial.task.delay.ms``, and each log checks for expired producer ids every
``producer.id.expiration.check.interval.ms``. barnabas ticks its log maintenance often (at most a
second apart, for delayed file deletion and checkpoints) and asks a :class:`Periodic` per duty
whether it is due, so retention does not plan every log's segments every second.
"""

from __future__ import annotations

__all__ = ["Periodic"]


class Periodic:
    """A duty due ``first_ms`` after the first tick it is asked at, then every ``interval_ms`` (fixed rate)."""

    __slots__ = ("_next_ms", "first_ms", "interval_ms")

    def __init__(self, interval_ms: int, first_ms: int | None = None) -> None:
        self.interval_ms = interval_ms
        self.first_ms = interval_ms if first_ms is None else first_ms
        self._next_ms: int | None = None

    def due(self, now_ms: int) -> bool:
        """Whether the duty runs at ``now_ms``; if so, the next run is one interval after this one was due.

        A tick that comes late (a busy loop, a paused process) runs it once, not once per missed interval.
        """
        if self._next_ms is None:
            self._next_ms = now_ms + self.first_ms
        if now_ms < self._next_ms:
            return False
        self._next_ms += self.interval_ms
        if self._next_ms <= now_ms:
            self._next_ms = now_ms + self.interval_ms
        return True
