"""A producer and a consumer running through failures, and the check that nothing acked was lost.

Kafka's ReplicationTest (tests/kafkatest/tests/core/replication_test.py) re-done: an idempotent
acks=all producer writes numbered values round-robin over the partitions while a consumer reads
every partition from the start; afterwards every acknowledged value must have been consumed
exactly once, and each partition's values must come in the order they were produced. Beyond
Kafka's check (Jepsen's queue checker): each acknowledged value must sit at the offset its
acknowledgement named, no value may appear that was never sent (or on a partition it was not sent
to), and each partition's high watermark must lie past every offset acknowledged on it. ``client``
settings (librdkafka's: security.protocol, ssl.*, sasl.*) go to every client it makes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition


@dataclass
class WorkloadResult:
    acked: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))  # partition -> values
    failed: list[str] = field(default_factory=list)
    consumed: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (offset, value)
    #: partition -> {offset: value} as the delivery reports named them.
    acked_at: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    #: How many values the producer handed out (0 .. sent-1, value v to partition v % partitions).
    sent: int = 0
    partitions: int = 0
    #: Each partition's high watermark as a fresh consumer found it (``Workload.read_back``).
    ends: dict[int, int] = field(default_factory=dict)

    @property
    def acked_count(self) -> int:
        return sum(len(values) for values in self.acked.values())

    def problems(self) -> list[str]:
        """Every way the run broke the guarantees (empty when it kept them)."""
        found = []
        for partition, values in sorted(self.acked.items()):
            consumed = self.consumed.get(partition, [])
            offsets = [offset for offset, _ in consumed]
            if offsets != sorted(set(offsets)):
                found.append(f"partition {partition}: offsets not strictly increasing")
            seen = [value for _, value in consumed]
            if len(seen) != len(set(seen)):
                found.append(f"partition {partition}: {len(seen) - len(set(seen))} values consumed twice")
            missing = set(values) - set(seen)
            if missing:
                found.append(f"partition {partition}: {len(missing)} acked values lost, e.g. {sorted(missing)[:5]}")
            if seen != sorted(seen):
                found.append(f"partition {partition}: values out of produce order")
            at = dict(consumed)
            moved = [(o, v) for o, v in self.acked_at.get(partition, {}).items() if o in at and at[o] != v]
            if moved:
                found.append(f"partition {partition}: {len(moved)} acked offsets hold another value, e.g. {moved[:3]}")
            end = self.ends.get(partition)
            highest = max(self.acked_at.get(partition, {}), default=-1)
            if end is not None and end <= highest:
                found.append(f"partition {partition}: high watermark {end} not past acked offset {highest}")
        for partition, consumed in sorted(self.consumed.items()):
            unknown = [v for _, v in consumed if not 0 <= v < self.sent or v % max(self.partitions, 1) != partition]
            if self.sent and unknown:
                found.append(f"partition {partition}: {len(unknown)} values never sent there, e.g. {unknown[:5]}")
        return found


def _ring_logger(lines: deque[str]) -> logging.Logger:
    """A logger that keeps its records' text in ``lines`` and nowhere else."""

    class Ring(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.created:.3f} {record.getMessage()}")

    logger = logging.getLogger(f"workload-{id(lines)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Ring())
    return logger


class Workload:
    """Produce and consume in background threads until ``finish()``.

    The client callbacks only append to deques (atomic, no lock): with a lock taken in a librdkafka
    delivery callback, a run once left the producer, the consumer and the test all waiting on it.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, client: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self._client = dict(client or {})
        self.partitions = partitions
        self.result = WorkloadResult()
        self._acked: deque[tuple[int, int, int]] = deque()  # (partition, offset, value)
        self._sent = 0
        self._failed: deque[str] = deque()
        self._consumed: deque[tuple[int, int, int]] = deque()  # (partition, offset, value)
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        #: The producer's fatal error, if it had one (it then stops producing).
        self.fatal: str | None = None
        self._producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
            **self._client,
        })  # fmt: skip
        #: The consumer client's own debug lines (the last few thousand), for a run that fails.
        self.consumer_log: deque[str] = deque(maxlen=5000)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"replication-check-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
                # librdkafka 2.16's re-bootstrap (all known brokers down at once, which back-to-back
                # restarts bring about) once wedged this consumer for good, close() included, while a
                # fresh consumer read every record: keep to the brokers it knows.
                "metadata.recovery.strategy": "none",
                "debug": "consumer,fetch,topic",
                **self._client,
            },
            logger=_ring_logger(self.consumer_log),
        )
        self._threads = [
            threading.Thread(target=self._produce, name="workload producer", daemon=True),
            threading.Thread(target=self._consume, name="workload consumer", daemon=True),
        ]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def acked_count(self) -> int:
        return len(self._acked)

    def wait_acked(self, at_least: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.acked_count() < at_least:
            if self.fatal is not None:
                raise AssertionError(f"the producer stopped with a fatal error: {self.fatal}")
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.acked_count()} values acked, wanted {at_least}")
            time.sleep(0.05)

    def finish(self, timeout_s: float = 120.0) -> WorkloadResult:
        """Stop producing, wait for every delivery report, then consume until all acked were seen."""
        self._stop_producing.set()
        self._threads[0].join(timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = {(partition, value) for partition, _, value in list(self._consumed)}
            if all((partition, value) in seen for partition, _, value in list(self._acked)):
                break
            time.sleep(0.1)
        self._stop_consuming.set()
        self._threads[1].join(timeout_s)
        return self._collect()

    def read_back(self, bootstrap: str, timeout_s: float = 60.0) -> dict[int, list[tuple[int, int]]]:
        """Everything in the topic, read by a fresh consumer from offset 0 to each partition's end.

        Tells acknowledged records that are gone apart from a live consumer that stopped reading.
        """
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"read-back-{time.monotonic_ns()}", **self._client}
        )
        found: dict[int, list[tuple[int, int]]] = defaultdict(list)
        try:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                for p in range(self.partitions)
            }
            self.result.ends = dict(ends)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(
                (found[p][-1][0] + 1 if found[p] else 0) < end for p, end in ends.items()
            ):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    found[message.partition()].append((message.offset(), int(message.value())))
        finally:
            consumer.close()
        return found

    def _collect(self) -> WorkloadResult:
        result = WorkloadResult(sent=self._sent, partitions=self.partitions)
        for partition, offset, value in list(self._acked):
            result.acked[partition].append(value)
            result.acked_at[partition][offset] = value
        result.failed = list(self._failed)
        for partition, offset, value in list(self._consumed):
            result.consumed[partition].append((offset, value))
        self.result = result
        return result

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():  # an idempotent producer that lost sequence sync never delivers again
            self.fatal = str(error)
            self._stop_producing.set()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self._acked.append((message.partition(), message.offset(), int(message.value())))
        else:
            self._failed.append(str(error))

    def _produce(self) -> None:
        sequence = 0
        while not self._stop_producing.is_set():
            try:
                self._producer.produce(
                    self.topic,
                    str(sequence).encode(),
                    partition=sequence % self.partitions,
                    on_delivery=self._on_delivery,
                )
                sequence += 1
                self._sent = sequence
            except BufferError:
                self._producer.poll(0.05)
                continue
            self._producer.poll(0)
            if sequence % 50 == 0:
                time.sleep(0.01)  # a steady trickle, not a flood: failures land mid-stream
        remaining = self._producer.flush(1 if self.fatal is not None else 120)
        if remaining:
            self._failed.append(f"{remaining} messages still undelivered at the end")

    def _consume(self) -> None:
        self._consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self._stop_consuming.is_set():
                message = self._consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:  # librdkafka goes on by itself; kept for a failed run
                    self.consumer_log.append(f"{time.time():.3f} CONSUMER ERROR {message.error()}")
                    continue
                self._consumed.append((message.partition(), message.offset(), int(message.value())))
        finally:
            self._consumer.close()
