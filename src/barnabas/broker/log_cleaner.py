"""The log cleaner's driver: passes run on a worker thread, planned and swapped on the event loop.

Rules this module keeps (Kafka's LogCleaner.CleanerThread, re-expressed for one event loop):

- The maintenance tick calls :meth:`LogCleanerService.poke`; a pass starts when none is running
  and the backoff is over. After a pass that cleaned a log the next one may start at the next
  tick; after finding nothing to clean the service waits ``log.cleaner.backoff.ms``.
- Planning (which log, which range) and the swap touch the logs, so they run on the loop; they
  are cheap. The pass itself (decoding, filtering, writing ``.cleaned`` files) runs in
  ``asyncio.to_thread`` and reads nothing but its job, so produce and fetch are served meanwhile.
- :meth:`LogCleanerService.close` asks a pass in flight to stop at its next batch and waits for
  the thread, so the logs are never closed under it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from barnabas.log import CleaningJob, LogManager

__all__ = ["LogCleanerService"]

log = logging.getLogger(__name__)


class LogCleanerService:
    """Runs the log manager's cleaner, one pass at a time, off the event loop."""

    def __init__(self, logs: LogManager, *, backoff_ms: int, clock_ms: Callable[[], int]) -> None:
        self._logs = logs
        self._backoff_ms = backoff_ms
        self._clock_ms = clock_ms
        self._task: asyncio.Task[None] | None = None
        self._idle_until_ms = 0
        self._closed = False
        #: Passes swapped in since start, for logs and tests.
        self.passes = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def poke(self, now_ms: int) -> None:
        """Start a pass if the cleaner is enabled, idle and past its backoff."""
        if self._closed or self.running or now_ms < self._idle_until_ms or not self._logs.cleaner.config.enable:
            return
        job = self._logs.begin_cleaning(now_ms)
        if job is None:
            self._idle_until_ms = now_ms + self._backoff_ms
            return
        self._task = asyncio.get_running_loop().create_task(self._run(job), name=f"log cleaner {job.name}")

    async def _run(self, job: CleaningJob) -> None:
        cleaner = self._logs.cleaner
        try:
            result = await asyncio.to_thread(cleaner.clean, job)
        except Exception as exc:
            cleaner.abandon(job, exc)
            if not cleaner.stopping:
                log.warning("cleaning %s did not finish: %s", job.name, exc)
            return
        if cleaner.stopping:
            cleaner.abandon(job)
            result.discard()
            return
        try:
            if cleaner.finish(result, self._clock_ms()):
                self.passes += 1
        except Exception:
            log.exception("swapping in the cleaned segments of %s failed", job.name)
            result.discard()

    async def close(self) -> None:
        """Stop starting passes, make a pass in flight stop, and wait for its thread."""
        self._closed = True
        self._logs.cleaner.stopping = True
        if self._task is not None:
            await asyncio.shield(self._task)
            self._task = None
