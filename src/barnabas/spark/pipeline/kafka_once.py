"""Exactly-once delivery of a micro-batch's rows to Kafka topics, from `foreachBatch`, without transactions.

Spark re-runs an uncommitted micro-batch after a crash with the same id and the same rows (its offset
log is a write-ahead log and state is versioned per batch), so a sink can skip what an earlier attempt
already sent. Before sending batch N, the writer records the topics' end offsets in a marker file
(`<marker_dir>/N.json`, written once, atomically); every record it sends carries the header
`spark.batch: N`. A replay of N reads the topics from the marker's offsets to their current end, and
sends only the rows not found there with that header (compared as a multiset of topic, key, value and
headers). Rules: this writer must be the only producer of batch-tagged records to its topics; rows are
collected to the driver, so use it for small outputs (alerts, dead letters), not bulk data.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql import DataFrame

BATCH_HEADER = "spark.batch"
TIMEOUT_S = 60.0
MARKERS_KEPT = 20

Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class OutRow:
    """One record to send: the Kafka sink's columns."""

    topic: str
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


class ExactlyOnceKafkaWriter:
    """A `foreachBatch` function that sends each batch's rows (key, value, topic, headers) exactly once."""

    def __init__(self, bootstrap: str, topics: Sequence[str], marker_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.marker_dir = marker_dir

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        rows = [
            OutRow(
                row["topic"],
                None if row["key"] is None else bytes(row["key"]),
                bytes(row["value"]),
                tuple((h["key"], bytes(h["value"])) for h in row["headers"] or ()),
            )
            for row in frame.collect()
        ]
        self.deliver(rows, batch_id)

    def deliver(self, rows: Iterable[OutRow], batch_id: int) -> int:
        """Send the rows of `batch_id` that no earlier attempt sent; return how many were sent now.

        Raises RuntimeError when a record cannot be delivered (Spark then fails the batch; a rerun
        resumes it).
        """
        start = self._marker(batch_id)
        already = collections.Counter(self._sent_since(start, batch_id))
        pending = []
        for row in rows:
            if already[row] > 0:
                already[row] -= 1
            else:
                pending.append(row)
        self._send(pending, batch_id)
        self._prune(batch_id)
        return len(pending)

    def _marker(self, batch_id: int) -> Offsets:
        """The topics' end offsets before the first attempt of `batch_id` sent anything."""
        marker = self.marker_dir / f"{batch_id}.json"
        if marker.exists():
            saved = json.loads(marker.read_text())
            return {topic: {int(p): offset for p, offset in parts.items()} for topic, parts in saved.items()}
        offsets = self._end_offsets()
        self.marker_dir.mkdir(parents=True, exist_ok=True)
        partial = marker.with_suffix(".tmp")
        partial.write_text(json.dumps(offsets))
        with partial.open("rb") as handle:
            os.fsync(handle.fileno())
        partial.replace(marker)
        return offsets

    def _consumer(self) -> Any:
        return Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": "barnabas-pipeline-exactly-once",
            "enable.auto.commit": False, "log_level": 0,
        })  # fmt: skip

    def _end_offsets(self) -> Offsets:
        consumer = self._consumer()
        try:
            offsets: Offsets = {}
            for topic in self.topics:
                metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
                if metadata.error is not None:
                    raise RuntimeError(f"topic {topic}: {metadata.error.str()}")
                offsets[topic] = {
                    partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)[1]
                    for partition in metadata.partitions
                }
            return offsets
        except KafkaException as exc:
            raise RuntimeError(f"reading end offsets: {exc.args[0].str()}") from None
        finally:
            consumer.close()

    def _sent_since(self, start: Offsets, batch_id: int) -> list[OutRow]:
        """Records tagged with `batch_id` between `start` and the topics' current ends."""
        end = self._end_offsets()
        tag = str(batch_id).encode()
        found: list[OutRow] = []
        consumer = self._consumer()
        try:
            for topic, partitions in end.items():
                for partition, high in partitions.items():
                    low = start.get(topic, {}).get(partition, 0)
                    if high <= low:
                        continue
                    consumer.assign([TopicPartition(topic, partition, low)])
                    position, deadline = low, time.monotonic() + TIMEOUT_S
                    while position < high:
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"{topic}[{partition}]: could not read offsets {position}..{high}")
                        message = consumer.poll(1.0)
                        if message is None or message.error() is not None:
                            continue
                        position = message.offset() + 1
                        headers = tuple((k, bytes(v or b"")) for k, v in message.headers() or ())
                        if (BATCH_HEADER, tag) in headers:
                            kept = tuple(h for h in headers if h[0] != BATCH_HEADER)
                            found.append(OutRow(topic, message.key(), message.value(), kept))
        finally:
            consumer.close()
        return found

    def _send(self, rows: list[OutRow], batch_id: int) -> None:
        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error.str())

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all"})
        tag = str(batch_id).encode()
        for row in rows:
            while True:
                try:
                    producer.produce(
                        row.topic, key=row.key, value=row.value, headers=[*row.headers, (BATCH_HEADER, tag)],
                        on_delivery=delivered,
                    )  # fmt: skip
                    break
                except BufferError:
                    producer.poll(0.1)
        remaining = producer.flush(TIMEOUT_S)
        if failures or remaining:
            reason = failures[0] if failures else f"{remaining} records unsent after {TIMEOUT_S:.0f} s"
            raise RuntimeError(f"batch {batch_id}: {reason}")

    def _prune(self, batch_id: int) -> None:
        """Drop markers of batches Spark can no longer replay (it replays only the last uncommitted one)."""
        for marker in self.marker_dir.glob("*.json"):
            if marker.stem.isdigit() and int(marker.stem) < batch_id - MARKERS_KEPT:
                marker.unlink(missing_ok=True)
