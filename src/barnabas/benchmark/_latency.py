"""End-to-end latency at a fixed rate: paced producer processes and timing consumer processes.

Rules this module keeps:

- A paced producer sends ``rate`` records per second on a fixed schedule (record i is due at
  start + i / rate) for ``duration_s``; it never waits for acknowledgements to send more (an open
  loop), and reports how far it fell behind the schedule.
- Each record's value starts with the producer's ``time.monotonic_ns()`` taken just before
  ``produce()``: CLOCK_MONOTONIC is one clock for every process on the machine, with nanosecond
  resolution (the record's CreateTime has only milliseconds). A consumer's latency for a record is
  its own ``time.monotonic_ns()`` when the record comes out of ``consume()`` minus that stamp.
- Latencies go into a log-bucket histogram (``Histogram``: buckets 1 % wide) so consumers in
  several processes merge exactly, and percentiles are within 1 % of the true value.
- A consumer never waits for a batch to fill: it takes the records already there
  (``consume(n, 0)``), else blocks in ``poll()`` for the next one.
- Records sent in the first ``warmup_s`` (connection and fetch session set-up) are counted for
  completeness but left out of the percentiles.
- Every outcome is one message on ``events``, as in ``_workers``.
"""

from __future__ import annotations

import math
import os
import struct
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ._settings import consumer_config, producer_config

__all__ = ["Histogram", "LatencyJob", "PacedProduceJob", "latency_consumer_worker", "paced_producer_worker"]

_STAMP = struct.Struct(">q")
_READY_TIMEOUT_S = 30.0
_GO_TIMEOUT_S = 300.0
_FLUSH_TIMEOUT_S = 60.0
_KEEP_ERRORS = 5
#: Buckets per factor e of latency: ln(1.01)⁻¹, so each bucket is 1 % wide.
_PER_E = 1 / math.log1p(0.01)

#: Client settings for latency runs, on top of the throughput settings: a producer sends after at
#: most 1 ms, a consumer's fetch returns as soon as one byte is there (the long poll still waits).
LATENCY_PRODUCER = {"linger.ms": "1"}
LATENCY_CONSUMER = {"fetch.min.bytes": "1", "fetch.wait.max.ms": "100"}


class Histogram:
    """Counts of latencies (nanoseconds) in buckets 1 % wide; mergeable, picklable as a dict."""

    def __init__(self, buckets: dict[int, int] | None = None) -> None:
        self.buckets: dict[int, int] = dict(buckets or {})

    def add(self, nanoseconds: int) -> None:
        index = int(math.log(max(nanoseconds, 1)) * _PER_E)
        self.buckets[index] = self.buckets.get(index, 0) + 1

    def merge(self, other: Histogram) -> None:
        for index, count in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + count

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def percentile_ms(self, fraction: float) -> float | None:
        """The latency below which ``fraction`` of the samples lie (bucket midpoint), in ms."""
        total = self.count
        if not total:
            return None
        rank = fraction * total
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return math.exp((index + 0.5) / _PER_E) / 1e6
        return math.exp((max(self.buckets) + 0.5) / _PER_E) / 1e6


@dataclass(frozen=True)
class PacedProduceJob:
    """One paced producer process: ``rate`` records/s to ``topic`` for ``duration_s``."""

    bootstrap: str
    topic: str
    rate: float
    duration_s: float
    record_size: int
    overrides: dict[str, str]


@dataclass(frozen=True)
class LatencyJob:
    """One timing consumer process: read ``partitions`` of ``topic`` from the beginning until ``stop``."""

    bootstrap: str
    topic: str
    partitions: list[int]
    record_size: int
    warmup_s: float
    idle_timeout_s: float
    overrides: dict[str, str]
    stop: Any


def paced_producer_worker(index: int, job: PacedProduceJob, counter: Any, go: Any, events: Any) -> None:
    """Process entry point: send ``job.rate`` records per second for ``job.duration_s``."""
    try:
        events.put(("result", index, _paced_produce(index, job, counter, go, events)))
    except Exception as exc:
        events.put(("error", index, f"paced producer {index}: {type(exc).__name__}: {exc}"))


def _paced_produce(index: int, job: PacedProduceJob, counter: Any, go: Any, events: Any) -> dict[str, Any]:
    failures: list[str] = []
    failed = 0

    def on_delivery(error: Any, _message: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1
            if len(failures) < _KEEP_ERRORS:
                failures.append(error.str())

    config = producer_config(job.bootstrap, "1", {**LATENCY_PRODUCER, **job.overrides})
    config.update(on_delivery=on_delivery)
    producer = Producer(config)
    described = producer.list_topics(job.topic, timeout=_READY_TIMEOUT_S).topics.get(job.topic)
    if described is None or described.error is not None or not described.partitions:
        raise RuntimeError(f"topic {job.topic} is not available")
    value = bytearray(os.urandom(job.record_size))
    total = max(1, round(job.rate * job.duration_s))
    interval = 1.0 / job.rate
    produce, poll, stamp, clock_ns = producer.produce, producer.poll, _STAMP.pack_into, time.monotonic_ns
    topic = job.topic
    events.put(("ready", index, None))
    if not go.wait(_GO_TIMEOUT_S):
        raise RuntimeError("never told to start")

    cpu0 = time.process_time()
    start = time.monotonic()
    sent = 0
    worst_lag = 0.0
    while sent < total:
        now = time.monotonic()
        due = min(total, int((now - start) / interval) + 1)
        if due - sent > 1:
            worst_lag = max(worst_lag, (due - sent - 1) * interval)
        while sent < due:
            stamp(value, 0, clock_ns())
            try:
                produce(topic, bytes(value))
            except BufferError:  # the client's queue is full: let librdkafka drain it
                poll(0.001)
                continue
            sent += 1
        counter.value = sent
        # Serve delivery reports while waiting for the next record's slot (at most 1 ms).
        poll(max(0.0, min(0.001, start + sent * interval - time.monotonic())))
    produced = time.monotonic()
    unsent = producer.flush(_FLUSH_TIMEOUT_S)
    if unsent:
        raise RuntimeError(f"{unsent} records still unacknowledged {_FLUSH_TIMEOUT_S:.0f} s after the last produce()")
    producer.poll(0)
    return {
        "records": sent - failed,
        "failed": failed,
        "failures": failures,
        "start": start,
        "produced": produced,
        "seconds": produced - start,
        "worst_lag_s": worst_lag,
        "cpu_s": time.process_time() - cpu0,
    }


def latency_consumer_worker(index: int, job: LatencyJob, counter: Any, go: Any, events: Any) -> None:
    """Process entry point: time every record of the job's partitions until ``job.stop`` is set."""
    try:
        events.put(("result", index, _time_records(index, job, counter, go, events)))
    except Exception as exc:
        events.put(("error", index, f"latency consumer {index}: {type(exc).__name__}: {exc}"))


def _time_records(index: int, job: LatencyJob, counter: Any, go: Any, events: Any) -> dict[str, Any]:
    config = consumer_config(job.bootstrap, {**LATENCY_CONSUMER, **job.overrides})
    consumer = Consumer(config)
    histogram = Histogram()
    add = histogram.add
    try:
        consumer.list_topics(job.topic, timeout=_READY_TIMEOUT_S)
        # Assigned before "ready": the fetch session is up (and idle) when the producers start.
        consumer.assign([TopicPartition(job.topic, p, OFFSET_BEGINNING) for p in job.partitions])
        events.put(("ready", index, None))
        if not go.wait(_GO_TIMEOUT_S):
            raise RuntimeError("never told to start")
        cpu0 = time.process_time()
        warm_until = time.monotonic_ns() + int(job.warmup_s * 1e9)
        unpack, clock_ns = _STAMP.unpack_from, time.monotonic_ns
        seen = warmup = wrong_sizes = 0
        worst_ns = 0
        last_data = time.monotonic()
        consume, poll = consumer.consume, consumer.poll
        while True:
            # consume(n, timeout) waits for n records or the timeout, which would add up to the
            # timeout to every latency at low rates: take what is there, else wait for one record.
            messages = consume(10_000, 0)
            if not messages:
                first = poll(0.05)
                messages = [first] if first is not None else []
            if not messages:
                if job.stop.is_set():
                    break
                if time.monotonic() - last_data > job.idle_timeout_s:
                    raise RuntimeError(f"no records for {job.idle_timeout_s:.0f} s after {seen}")
                continue
            now = clock_ns()
            for message in messages:
                error = message.error()
                if error is not None:
                    raise RuntimeError(error.str())
                value = message.value()
                if value is None or len(value) != job.record_size:
                    wrong_sizes += 1
                    continue
                sent_ns = unpack(value, 0)[0]
                if sent_ns < warm_until:
                    warmup += 1
                    continue
                latency = now - sent_ns
                worst_ns = max(worst_ns, latency)
                add(latency)
            seen += len(messages)
            counter.value = seen
            last_data = time.monotonic()
        cpu_s = time.process_time() - cpu0
    finally:
        consumer.close()
    if wrong_sizes:
        raise RuntimeError(f"{wrong_sizes} records whose value is not {job.record_size} bytes")
    return {
        "records": seen, "warmup_records": warmup, "histogram": histogram.buckets, "max_ns": worst_ns, "cpu_s": cpu_s,
    }  # fmt: skip
