"""Run a group of worker processes through one timed phase: start, ready, go, collect.

Rules this module keeps:

- Workers are ``spawn``ed (no inherited librdkafka threads or sockets) and every one is joined;
  a worker still alive at the end is killed by its own handle, never by name.
- A phase fails (BenchError, one line) when a worker reports an error, exits without a result,
  misses a deadline, or when the broker dies under it.
- The phase's rate is its total bytes over the span from the earliest worker start to the
  latest worker end (one CLOCK_MONOTONIC for all processes).
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._settings import BenchError

__all__ = ["WorkerGroup"]

_READY_TIMEOUT_S = 90.0
_POLL_S = 0.25


@dataclass
class WorkerGroup:
    """Worker processes that start together on one ``go`` event and each report one result."""

    label: str
    alive_check: Callable[[], str | None] = lambda: None
    context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def __post_init__(self) -> None:
        self.events: Any = self.context.Queue()
        self.go: Any = self.context.Event()
        self.counters: list[Any] = []
        self.procs: list[Any] = []

    def add(self, target: Callable[..., None], job: Any) -> None:
        """Start ``target(index, job, counter, go, events)`` in a new process."""
        counter = self.context.RawValue("q", 0)
        index = len(self.procs)
        proc = self.context.Process(
            target=target, args=(index, job, counter, self.go, self.events), name=f"{self.label}-{index}", daemon=True
        )
        proc.start()
        self.counters.append(counter)
        self.procs.append(proc)

    def progress(self) -> int:
        """Records handled so far by all workers."""
        return sum(int(c.value) for c in self.counters)

    def _next_event(self, deadline: float, waiting_for: str, tick: Callable[[], None]) -> tuple[str, int, Any]:
        while True:
            try:
                kind, index, payload = self.events.get(timeout=_POLL_S)
                return str(kind), int(index), payload
            except queue.Empty:
                pass
            tick()
            if problem := self.alive_check():
                raise BenchError(f"{self.label}: {problem}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.label}: timed out waiting for {waiting_for}")
            dead = [p for p in self.procs if p.exitcode not in (None, 0)]
            if dead:
                # A crash reported nothing; give a queued message a moment to arrive first.
                try:
                    kind, index, payload = self.events.get(timeout=1.0)
                    return str(kind), int(index), payload
                except queue.Empty:
                    raise BenchError(f"{self.label}: {dead[0].name} exited with code {dead[0].exitcode}") from None

    def wait_ready(self, tick: Callable[[], None] = lambda: None) -> None:
        """Wait until every worker has connected and is waiting for ``release``."""
        ready = 0
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while ready < len(self.procs):
            kind, _index, payload = self._next_event(deadline, "workers to connect", tick)
            if kind == "error":
                raise BenchError(str(payload))
            ready += kind == "ready"

    def release(self) -> float:
        """Start every worker at once; the monotonic time of the release."""
        released = time.monotonic()
        self.go.set()
        return released

    def collect(self, timeout_s: float, tick: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
        """Every worker's result, in worker order."""
        results: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout_s
        while len(results) < len(self.procs):
            kind, index, payload = self._next_event(deadline, "results", tick)
            if kind == "error":
                raise BenchError(str(payload))
            if kind == "result":
                results[index] = payload
        return [results[i] for i in range(len(self.procs))]

    def close(self) -> None:
        """Release anyone still waiting, join every worker, kill those that do not exit."""
        self.go.set()
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        self.events.close()
        self.events.join_thread()
