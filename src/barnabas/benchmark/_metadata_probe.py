"""Metadata request latency and rate with many partitions: librdkafka clients asking in a loop.

Rules this module keeps:

- Each process asks for the metadata of all topics (``list_topics()``: one MetadataRequest per call,
  librdkafka does not answer it from its cache) back to back for ``duration_s``, one request at a
  time, and times each call, decoding into Python objects included (the same cost for every system).
- Before reporting ready, each process asks untimed for ``warmup_s`` (a JVM broker's Metadata path
  is several times slower until the JIT has compiled it).
- Every answer must list ``partitions`` partitions for ``topic``; anything else is an error.
- Latencies go into the same 1 %-bucket histogram as the latency workload.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from ._latency import Histogram

__all__ = ["MetadataJob", "metadata_worker"]

_GO_TIMEOUT_S = 300.0
_REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class MetadataJob:
    """One process asking for all topics' metadata for ``duration_s``."""

    bootstrap: str
    topic: str
    partitions: int
    duration_s: float
    warmup_s: float = 0.0


def metadata_worker(index: int, job: MetadataJob, counter: Any, go: Any, events: Any) -> None:
    """Process entry point: time Metadata requests for ``job.duration_s``."""
    try:
        events.put(("result", index, _ask(index, job, counter, go, events)))
    except Exception as exc:
        events.put(("error", index, f"metadata client {index}: {type(exc).__name__}: {exc}"))


def _check(metadata: Any, job: MetadataJob) -> None:
    found = metadata.topics.get(job.topic)
    got = len(found.partitions) if found is not None else 0
    if got != job.partitions:
        raise RuntimeError(f"Metadata listed {got} partitions of {job.topic}, not {job.partitions}")


def _ask(index: int, job: MetadataJob, counter: Any, go: Any, events: Any) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": job.bootstrap, "log_level": 0})
    _check(admin.list_topics(timeout=_REQUEST_TIMEOUT_S), job)  # connected, and the topic is complete
    warm_until = time.monotonic() + job.warmup_s
    while time.monotonic() < warm_until:
        admin.list_topics(timeout=_REQUEST_TIMEOUT_S)
    histogram = Histogram()
    events.put(("ready", index, None))
    if not go.wait(_GO_TIMEOUT_S):
        raise RuntimeError("never told to start")
    start = time.monotonic()
    deadline = start + job.duration_s
    requests = 0
    now = start
    while now < deadline:
        began = time.monotonic_ns()
        metadata = admin.list_topics(timeout=_REQUEST_TIMEOUT_S)
        histogram.add(time.monotonic_ns() - began)
        _check(metadata, job)
        requests += 1
        counter.value = requests
        now = time.monotonic()
    return {"requests": requests, "start": start, "end": now, "histogram": histogram.buckets}
