"""Producer and consumer processes (confluent-kafka), each started with ``spawn``.

Rules this module keeps:

- A worker connects and fetches metadata first, reports ``("ready", index)``, then waits for the
  shared ``go`` event, so process start-up, imports and connection set-up are never timed.
- Times are ``time.monotonic()`` (CLOCK_MONOTONIC, one clock for every process on the machine),
  so the parent can compute one aggregate rate from the earliest start and the latest end.
- A producer's time runs until ``flush()`` returns, i.e. until every record is acknowledged; its
  byte count is acknowledged records × record size (record values, not wire bytes).
- A consumer reads its assigned partitions from the given start offsets until it has seen every
  record up to the given end offsets; its time runs until the last record arrives. With end
  offsets of -1 (``barnabas bench compare``: a broker's end offsets are not trusted, Tansu's
  under-report) it reads until the parent sets the job's ``stop`` event, which the parent does
  once all consumers together have seen every acknowledged record.
- Every outcome, including a failure, is one message on the ``events`` queue:
  ``("result", index, dict)`` or ``("error", index, one-line reason)``.
- Progress goes through a shared integer (records so far), written every few thousand records.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from ._settings import consumer_config, producer_config

__all__ = ["ConsumeJob", "ProduceJob", "consumer_worker", "producer_worker"]

#: Records between progress updates, deadline checks and poll() calls in the producer loop.
_CHECK_EVERY = 1024
_READY_TIMEOUT_S = 30.0
_GO_TIMEOUT_S = 300.0
_FLUSH_TIMEOUT_S = 120.0
_CONSUME_BATCH = 10_000
_STATS_INTERVAL_MS = 2000
_KEEP_ERRORS = 5


def _stats_summary(raw: str | None, topic_names: set[str]) -> dict[str, Any]:
    """The few numbers worth keeping from librdkafka's last statistics JSON."""
    if not raw:
        return {}
    stats = json.loads(raw)
    summary: dict[str, Any] = {}
    for broker in stats.get("brokers", {}).values():
        if broker.get("nodeid", -1) < 0:
            continue  # the bootstrap placeholder
        rtt = broker.get("rtt", {})
        if rtt.get("cnt"):
            summary["rtt_ms"] = {k: rtt.get(k, 0) / 1000 for k in ("avg", "p50", "p95", "p99", "max")}
        summary["requests"] = broker.get("tx", 0)
    batch_sizes = [t["batchsize"] for n, t in stats.get("topics", {}).items() if n in topic_names]
    counts = [t["batchcnt"] for n, t in stats.get("topics", {}).items() if n in topic_names]
    if batch_sizes and batch_sizes[0].get("cnt"):
        summary["batch_bytes"] = {k: batch_sizes[0].get(k, 0) for k in ("avg", "p50", "p99")}
    if counts and counts[0].get("cnt"):
        summary["batch_records"] = {k: counts[0].get(k, 0) for k in ("avg", "p50", "p99")}
    return summary


@dataclass(frozen=True)
class ProduceJob:
    """What one producer process does."""

    bootstrap: str
    topic: str
    acks: str
    overrides: dict[str, str]
    record_size: int
    duration_s: float | None
    records: int | None


@dataclass(frozen=True)
class ConsumeJob:
    """What one consumer process does: read (topic, partition, start, end) ranges."""

    bootstrap: str
    assignment: list[tuple[str, int, int, int]]
    overrides: dict[str, str]
    record_size: int
    idle_timeout_s: float
    #: With end offsets of -1: a multiprocessing Event the parent sets when everything was read.
    stop: Any = None


def producer_worker(index: int, job: ProduceJob, counter: Any, go: Any, events: Any) -> None:
    """Process entry point: produce ``job.records`` records, or for ``job.duration_s`` seconds."""
    try:
        events.put(("result", index, _produce(index, job, counter, go, events)))
    except Exception as exc:
        events.put(("error", index, f"producer {index}: {type(exc).__name__}: {exc}"))


def _produce(index: int, job: ProduceJob, counter: Any, go: Any, events: Any) -> dict[str, Any]:
    topic, record_size, duration_s = job.topic, job.record_size, job.duration_s
    failures: list[str] = []
    failed = 0
    client_errors: list[str] = []
    last_stats: list[str] = []

    def on_delivery(error: Any, _message: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1
            if len(failures) < _KEEP_ERRORS:
                failures.append(error.str())

    def on_error(error: Any) -> None:
        if len(client_errors) < _KEEP_ERRORS:
            client_errors.append(error.str())

    def on_stats(raw: str) -> None:
        last_stats[:] = [raw]

    config = producer_config(job.bootstrap, job.acks, job.overrides)
    config.update(on_delivery=on_delivery, error_cb=on_error, stats_cb=on_stats)
    config.setdefault("statistics.interval.ms", _STATS_INTERVAL_MS)
    producer = Producer(config)
    metadata = producer.list_topics(topic, timeout=_READY_TIMEOUT_S)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None or not described.partitions:
        raise RuntimeError(f"topic {topic} is not available: {described.error if described else 'missing'}")
    value = os.urandom(record_size)
    produce = producer.produce
    poll = producer.poll
    limit = job.records if job.records is not None else 1 << 62
    events.put(("ready", index, None))
    if not go.wait(_GO_TIMEOUT_S):
        raise RuntimeError("never told to start")

    cpu0 = time.process_time()
    start = time.monotonic()
    deadline = start + duration_s if duration_s is not None else float("inf")
    sent = 0
    while sent < limit:
        try:
            produce(topic, value)
        except BufferError:  # the client's queue is full: let librdkafka drain it
            poll(0.001)
            continue
        sent += 1
        if sent % _CHECK_EVERY == 0:
            poll(0)
            counter.value = sent
            if time.monotonic() >= deadline:
                break
    produced = time.monotonic()
    unsent = producer.flush(_FLUSH_TIMEOUT_S)
    end = time.monotonic()
    counter.value = sent
    if unsent:
        raise RuntimeError(f"{unsent} records still unacknowledged {_FLUSH_TIMEOUT_S:.0f} s after the last produce()")
    producer.poll(0)
    acked = sent - failed
    return {
        "records": acked,
        "failed": failed,
        "failures": failures,
        "client_errors": client_errors,
        "bytes": acked * record_size,
        "start": start,
        "produced": produced,
        "end": end,
        "cpu_s": time.process_time() - cpu0,
        "stats": _stats_summary(last_stats[0] if last_stats else None, {topic}),
    }


def consumer_worker(index: int, job: ConsumeJob, counter: Any, go: Any, events: Any) -> None:
    """Process entry point: read every (topic, partition) of the job from its start to its end offset."""
    try:
        events.put(("result", index, _consume(index, job, counter, go, events)))
    except Exception as exc:
        events.put(("error", index, f"consumer {index}: {type(exc).__name__}: {exc}"))


def _consume(index: int, job: ConsumeJob, counter: Any, go: Any, events: Any) -> dict[str, Any]:
    assignment, record_size, idle_timeout_s = job.assignment, job.record_size, job.idle_timeout_s
    client_errors: list[str] = []
    last_stats: list[str] = []

    def on_error(error: Any) -> None:
        if len(client_errors) < _KEEP_ERRORS:
            client_errors.append(error.str())

    def on_stats(raw: str) -> None:
        last_stats[:] = [raw]

    config = consumer_config(job.bootstrap, job.overrides)
    config.update(error_cb=on_error, stats_cb=on_stats)
    config.setdefault("statistics.interval.ms", _STATS_INTERVAL_MS)
    consumer = Consumer(config)
    try:
        for topic in sorted({t for t, _, _, _ in assignment}):
            consumer.list_topics(topic, timeout=_READY_TIMEOUT_S)
        counting = any(end < 0 for _, _, _, end in assignment)
        if counting and job.stop is None:
            raise RuntimeError("end offsets of -1 need a stop event")
        expected = 1 << 62 if counting else sum(end - begin for _, _, begin, end in assignment)
        events.put(("ready", index, None))
        if not go.wait(_GO_TIMEOUT_S):
            raise RuntimeError("never told to start")

        cpu0 = time.process_time()
        start = time.monotonic()
        consumer.assign([TopicPartition(t, p, begin) for t, p, begin, _ in assignment])
        consume = consumer.consume
        seen = 0
        wrong_sizes = 0
        last_data = start
        while seen < expected:
            messages = consume(_CONSUME_BATCH, 0.5 if not counting else 0.1)
            if not messages:
                if counting and job.stop.is_set():
                    break
                if time.monotonic() - last_data > idle_timeout_s:
                    of = "" if counting else f" of {expected}"
                    raise RuntimeError(f"no records for {idle_timeout_s:.0f} s after {seen}{of}")
                continue
            for message in messages:
                error = message.error()
                if error is not None:
                    raise RuntimeError(error.str())
            # Every benchmark record has the same size; checking one per batch keeps the
            # per-record Python work (which competes with the broker for the CPU) minimal.
            if len(messages[-1].value() or b"") != record_size:
                wrong_sizes += 1
            seen += len(messages)
            counter.value = seen
            last_data = time.monotonic()
        end = last_data
        cpu_s = time.process_time() - cpu0
    finally:
        consumer.close()
    if wrong_sizes:
        raise RuntimeError(f"{wrong_sizes} batches held records whose value is not {record_size} bytes")
    return {
        "records": seen,
        "bytes": seen * record_size,
        "start": start,
        "end": end,
        "cpu_s": cpu_s,
        "client_errors": client_errors,
        "stats": _stats_summary(last_stats[0] if last_stats else None, set()),
    }
