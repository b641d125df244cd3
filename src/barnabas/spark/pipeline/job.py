"""The telemetry Structured Streaming job: readings in, windowed aggregates, alerts and dead letters out.

Queries, each with its own checkpoint under `<out>/checkpoints/` (a checkpoint belongs to one sink):

- `aggregates`: per device, metric and one-minute window, in append mode, to Parquet at
  `<out>/aggregates`. Spark's file sink commits each batch in `_spark_metadata`, so read it with Spark
  (or anything honouring that log): after a driver crash the replayed batch may leave orphan files.
- `aggregates-delta`: the same rows to a Delta table at `<out>/aggregates-delta`, when the Delta jar
  loads (Delta's streaming sink is exactly-once through its transaction log).
- `alerts-and-dead-letters`: readings above the threshold to the alerts topic and records that are not
  readings to the dead-letter topic, one query (the `topic` column routes). By default through
  `kafka_once` (foreachBatch, exactly-once: a replayed batch sends only what its first attempt did not);
  with `kafka_delivery="at-least-once"` through the Kafka sink of the `sink` format, which sends a
  replayed batch's records again.

Rules: the source format is one setting (`barnabas`, the Python data source, or `kafka`, Spark's JVM
connector; both take Spark-Kafka option names), and so is the sink's. Rows that fail parsing are never
dropped. The generator's event-time rules (see `generator`) must fit inside `watermark_delay`.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from .. import register
from . import transforms
from .kafka_once import ExactlyOnceKafkaWriter
from .session import build_session

log = logging.getLogger(__name__)

AGGREGATES = "aggregates"
AGGREGATES_DELTA = "aggregates-delta"
EVENTS = "alerts-and-dead-letters"
INITIALIZE_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Everything the job needs; `trigger_seconds=None` means availableNow (drain what is there, then stop)."""

    bootstrap: str
    out: Path
    input_topic: str = "telemetry"
    alerts_topic: str = "alerts"
    dead_letter_topic: str = "telemetry-dead-letters"
    source: str = "barnabas"
    sink: str = "barnabas"
    threshold: float = 80.0
    window: str = "1 minute"
    watermark_delay: str = "30 seconds"
    max_offsets_per_trigger: int | None = None
    trigger_seconds: float | None = None
    delta: bool = True
    kafka_delivery: str = "exactly-once"
    master: str = "local[2]"
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    def checkpoint(self, query: str) -> Path:
        return self.out / "checkpoints" / query


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """One finished micro-batch of one query, as reported to the caller."""

    query: str
    batch_id: int
    input_rows: int
    watermark: str | None

    def to_line(self) -> str:
        return json.dumps({
            "query": self.query, "batch": self.batch_id, "input_rows": self.input_rows, "watermark": self.watermark,
        })  # fmt: skip


def run(config: PipelineConfig, on_batch: Callable[[BatchProgress], None], should_stop: Callable[[], bool]) -> bool:
    """Start every query and return when all have finished (availableNow), `should_stop()` says so, or
    SIGINT/SIGTERM arrive; True when stopped early. Queries stop cleanly: a stopped query resumes its
    interrupted batch on the next run.

    Raises the first query's StreamingQueryException if one fails.
    """
    uses_kafka = "kafka" in (config.source, config.sink)
    session = build_session(
        master=config.master, kafka_connector=uses_kafka, delta=config.delta, conf=config.spark_conf
    )
    spark = session.spark
    # Replace PySpark's SIGINT handler (it cancels jobs with a Py4J call from inside the signal handler,
    # re-entering a call the main thread is in) with a flag the watch loop polls.
    signalled = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _signum, _frame: signalled.set())
    if "barnabas" in (config.source, config.sink):
        register(spark)
    parsed = transforms.parse(_read(spark, config))
    deduped = transforms.deduplicated(transforms.readings(parsed), config.watermark_delay)
    aggregates = transforms.window_aggregates(deduped, config.window)
    events = transforms.alerts(deduped, config.threshold, config.alerts_topic).unionByName(
        transforms.dead_letters(parsed, config.dead_letter_topic)
    )
    starters: dict[str, Callable[[], StreamingQuery]] = {
        AGGREGATES: lambda: _file_query(aggregates, "parquet", config, AGGREGATES, "aggregates")
    }
    if session.delta:
        starters[AGGREGATES_DELTA] = lambda: _file_query(
            aggregates, "delta", config, AGGREGATES_DELTA, "aggregates-delta"
        )
    else:
        log.warning("no Delta table this run: writing Parquet only")
    starters[EVENTS] = lambda: _kafka_query(events, config)
    queries: dict[str, StreamingQuery] = {}
    for name, start in starters.items():
        queries[name] = _initialized(start())
    try:
        _watch(queries, on_batch, lambda: signalled.is_set() or should_stop())
        return signalled.is_set() or should_stop()
    finally:
        for query in queries.values():
            if query.isActive:
                query.stop()
        spark.stop()


def _initialized(query: StreamingQuery) -> StreamingQuery:
    """Wait until `query` has created its sources before the next query starts.

    Each `barnabas` source starts a Python planner process that must connect back to the JVM within
    Spark's fixed 10 s (PythonWorkerFactory); started together on a busy machine, they can miss it.
    """
    deadline = time.monotonic() + INITIALIZE_TIMEOUT_S
    while query.isActive and query.status["message"] == "Initializing sources" and time.monotonic() < deadline:
        query.awaitTermination(1)
    return query


def _read(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    reader = (
        spark.readStream.format(config.source)
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.input_topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
    )
    if config.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    return reader.load()


def _file_query(frame: DataFrame, fmt: str, config: PipelineConfig, name: str, directory: str) -> StreamingQuery:
    writer = frame.writeStream.format(fmt).outputMode("append").queryName(name)
    return _triggered(writer, config).start(
        str(config.out / directory), checkpointLocation=str(config.checkpoint(name))
    )


def _kafka_query(frame: DataFrame, config: PipelineConfig) -> StreamingQuery:
    writer = (
        frame.writeStream.outputMode("append")
        .queryName(EVENTS)
        .option("checkpointLocation", str(config.checkpoint(EVENTS)))
    )
    if config.kafka_delivery == "exactly-once":
        markers = config.out / "checkpoints" / f"{EVENTS}-sent"
        topics = [config.alerts_topic, config.dead_letter_topic]
        writer = writer.foreachBatch(ExactlyOnceKafkaWriter(config.bootstrap, topics, markers))
    else:
        writer = writer.format(config.sink).option("kafka.bootstrap.servers", config.bootstrap)
    return _triggered(writer, config).start()


def _triggered(writer: DataStreamWriter, config: PipelineConfig) -> DataStreamWriter:
    if config.trigger_seconds is None:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{config.trigger_seconds} seconds")


def _watch(
    queries: Mapping[str, StreamingQuery], on_batch: Callable[[BatchProgress], None], should_stop: Callable[[], bool]
) -> None:
    """Report each query's new batches until every query has ended or the caller asks to stop."""
    reported: dict[str, int] = {name: -1 for name in queries}
    while True:
        for name, query in queries.items():
            for progress in query.recentProgress:
                _report(name, progress, reported, on_batch)
            failure = query.exception()
            if failure is not None:
                raise failure
        active = [query for query in queries.values() if query.isActive]
        if should_stop() or not active:
            return
        active[0].awaitTermination(1)


def _report(name: str, progress: Any, reported: dict[str, int], on_batch: Callable[[BatchProgress], None]) -> None:
    batch_id = int(progress.batchId)
    if batch_id <= reported[name]:
        return
    reported[name] = batch_id
    watermark = (progress.eventTime or {}).get("watermark")
    on_batch(BatchProgress(name, batch_id, int(progress.numInputRows), watermark))
