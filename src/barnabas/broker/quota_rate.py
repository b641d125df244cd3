"""Kafka's quota arithmetic: a rate over sampled windows, a token bucket, and the throttle time of each.

Rules this module keeps (Kafka's SampledStat, WindowedSum, Rate and QuotaUtils.throttleTime):

- Values are summed into ``samples`` windows of ``window_ms`` each (plus one overlapping the oldest);
  a window is complete once ``window_ms`` passed since it started, and the next record starts the
  oldest one over. A window with no event for ``samples * window_ms`` is reset (purged).
- The rate is the sum over the windows divided by the time they cover, which counts at least
  ``samples - 1`` whole windows: a first burst is not measured over a few milliseconds.
- Over the bound, the throttle time is how long no further value may come for the rate to fall to
  the bound: ``(rate - bound) / bound * window``, rounded to the millisecond.
- The controller mutation quota is a token bucket instead (Kafka's TokenBucket, KIP-599), so a burst
  costs only the time to earn it back: credits refill at the quota's rate up to a burst of
  ``samples * window * rate``; a new bucket starts full; a debt of ``d`` credits is ``d / rate``
  seconds of throttle, rounded half up as Java's Math.round does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Rate", "TokenBucket"]


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0
        self.events = 0


class Rate:
    """A per-second rate of recorded values (bytes, or percent of a thread's time)."""

    __slots__ = ("_current", "_samples", "last_record_ms", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        #: When a value was last recorded (idle sensors are dropped after a while).
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms``."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_ms = now_ms
        self.last_record_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the windows cover: since the oldest began, but at least ``samples - 1`` whole windows."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long to hold the client back for the rate to come down to ``bound`` (0 when within it)."""
        rate = self.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.window_size_ms(now_ms))

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_ms >= expire_ms:
                sample.reset(now_ms)


class TokenBucket:
    """Credits spent by what is recorded and earned back at the quota's rate (Kafka's TokenBucket)."""

    __slots__ = ("_credits", "last_update_ms")

    def __init__(self) -> None:
        #: None until first used: Kafka's bucket starts empty at time 0, so its first refill fills it.
        self._credits: float | None = None
        #: When the credits were last brought up to date (idle buckets are dropped after a while).
        self.last_update_ms = 0

    def credits(self, rate: float, burst: float, now_ms: int) -> float:
        """The credits left at ``now_ms`` (below 0: in debt) for a refill ``rate`` per second."""
        return self._refill(rate, burst, now_ms)

    def record(self, value: float, rate: float, burst: float, now_ms: int) -> None:
        """Spend ``value`` credits at ``now_ms``, however deep into debt that goes."""
        self._credits = min(burst, self._refill(rate, burst, now_ms) - value)

    @staticmethod
    def throttle_ms(credits: float, rate: float) -> int:
        """How long the bucket takes to refill a debt back to zero (ControllerMutationQuotaManager.throttleTimeMs)."""
        if credits >= 0:
            return 0
        return math.floor(-credits / rate * 1000 + 0.5)  # Java's Math.round, not Python's half-to-even

    def _refill(self, rate: float, burst: float, now_ms: int) -> float:
        if self._credits is None:
            credits = burst
        else:
            credits = min(burst, self._credits + rate * (now_ms - self.last_update_ms) / 1000)
        self._credits = credits
        self.last_update_ms = now_ms
        return credits
