"""The queue workload: a producer, a consumer in a group, and what they saw, recorded for the checker.

Kafka's ReplicationTest (tests/kafkatest/tests/core/replication_test.py) re-done: an idempotent
acks=all producer writes numbered values round-robin over the partitions while a consumer reads
every partition from the start and commits its position to a consumer group every half second;
afterwards ``barnabas.testing.checker.WorkloadResult.problems()`` names what went wrong: an
acknowledged value lost, read twice, out of order, at another offset than acknowledged, a value
never sent, a high watermark behind an acknowledged offset, committed group offsets going
backwards. ``client`` settings (librdkafka's: security.protocol, ssl.*, sasl.*) go to every client
it makes. Run it against any Kafka-compatible cluster::

    workload = Workload("broker:9092", "queue", partitions=3).start()
    workload.wait_acked(1000)
    ...  # faults
    result = workload.finish()
    result.consumed = workload.read_back("broker:9092")  # what the log holds, read from offset 0
    assert not result.problems(), result.problems()

Rules it keeps:

- The client callbacks only append to deques (atomic, no lock): with a lock taken in a librdkafka
  delivery callback, a run once left the producer, the consumer and the test all waiting on it.
- The consumer is assigned its partitions (a consumer group without group management, as Kafka's
  simple consumers commit): a rebalance would re-read records and blur the exactly-once check.
- One commit is in flight at a time, so the order commits are acknowledged in is the order they
  were sent in; a commit's acknowledgement is what ``on_commit`` reports for each partition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from .checker import WorkloadResult

__all__ = ["Workload", "WorkloadResult"]

#: How often the consumer commits its position.
COMMIT_INTERVAL_S = 0.5


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


def _record(message: Message) -> tuple[int, int, int]:
    """(partition, offset, value) of a record; -1 for what it lacks (the checker calls such a value never sent)."""
    raw = message.value()
    try:
        value = int(raw) if raw is not None else -1
    except ValueError:
        value = -1
    partition, offset = message.partition(), message.offset()
    return (-1 if partition is None else partition), (-1 if offset is None else offset), value


class Workload:
    """Produce and consume in background threads until ``finish()``.

    Args:
        bootstrap: the cluster's bootstrap servers.
        topic: an existing topic with ``partitions`` partitions.
        partitions: how many partitions it has; value ``v`` goes to partition ``v % partitions``.
        client: librdkafka settings added to every client's (security, for one).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, client: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self._bootstrap = bootstrap
        self._client = dict(client or {})
        self.partitions = partitions
        self.result = WorkloadResult()
        self._acked: deque[tuple[int, int, int]] = deque()  # (partition, offset, value)
        self._sent = 0
        self._failed: deque[str] = deque()
        self._consumed: deque[tuple[int, int, int]] = deque()  # (partition, offset, value)
        self._commits: deque[tuple[int, int]] = deque()  # (partition, offset) as acknowledged
        self._commit_failures: deque[str] = deque()
        self._commit_in_flight = threading.Event()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._finished = False
        #: The producer's fatal error, if it had one (it then stops producing).
        self.fatal: str | None = None
        #: The consumer group the consumer commits to.
        self.group = f"replication-check-{time.monotonic_ns()}"
        self._producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "retry.backoff.ms": 100,
            # No exponential backoff with jitter between retries: librdkafka 2.16's idempotent producer
            # once failed a 100-cycle partition run with "Unable to reconstruct MessageSet" (its own
            # consistency check; librdkafka #4736 traced that error to messages of one batch retried on
            # different backoffs).
            "retry.backoff.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
            **self._client,
        })  # fmt: skip
        #: The consumer client's own debug lines (the last few thousand), for a run that fails.
        self.consumer_log: deque[str] = deque(maxlen=5000)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "on_commit": self._on_commit,
                "topic.metadata.refresh.interval.ms": 1000,
                # librdkafka 2.16's re-bootstrap (all known brokers down at once, which back-to-back
                # restarts bring about) once wedged this consumer for good, close() included, while a
                # fresh consumer read every record: keep to the brokers it knows.
                "metadata.recovery.strategy": "none",
                "debug": "consumer,fetch,topic,cgrp",
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
        """Wait until ``at_least`` values are acknowledged.

        Raises:
            AssertionError: the producer failed fatally, or the time ran out.
        """

        def stopped() -> str | None:
            return f"the producer stopped with a fatal error: {self.fatal}" if self.fatal is not None else None

        _wait_for(self.acked_count, at_least, timeout_s, stopped, lambda: "values acked")

    def committed_count(self) -> int:
        """Partition offsets the group's coordinator has acknowledged so far."""
        return len(self._commits)

    def wait_committed(self, at_least: int, timeout_s: float = 60.0) -> None:
        """Wait until ``at_least`` partition offsets are acknowledged as committed.

        Raises:
            AssertionError: the time ran out (the last commit failures named).
        """
        _wait_for(
            self.committed_count, at_least, timeout_s, lambda: None,
            lambda: f"offsets committed (last failures: {list(self._commit_failures)[-3:]})",
        )  # fmt: skip

    def finish(self, timeout_s: float = 120.0) -> WorkloadResult:
        """Stop producing, wait for every delivery report, consume until all acked were seen, read the group's offsets.

        A second call returns the first one's result.
        """
        if self._finished:
            return self.result
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
        result = self._collect()
        try:
            result.group_offsets = self.group_offsets(timeout_s=min(timeout_s, 60.0))
        except KafkaException as exc:
            result.group_offsets_error = str(exc)
        self._finished = True
        return result

    def group_offsets(self, timeout_s: float = 60.0) -> dict[int, int]:
        """The consumer group's committed offset per partition (partitions without one left out).

        Read by a consumer of the group that never joins it (OffsetFetch through its own group
        handle), not by the AdminClient: librdkafka's ListConsumerGroupOffsets crashes the
        process (SIGSEGV in rd_kafka_cgrp_op, librdkafka issue 5040, open in 2.16) when the
        answer is NOT_COORDINATOR, as it is while the group's coordinator moves; a consumer asks
        for the new coordinator and tries again.

        Raises:
            KafkaException: no answer within ``timeout_s`` (the coordinator is asked again until then).
        """
        consumer = Consumer({"bootstrap.servers": self._bootstrap, "group.id": self.group, **self._client})
        wanted = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    committed = consumer.committed(wanted, timeout=max(deadline - time.monotonic(), 0.1))
                    break
                except KafkaException:  # the coordinator moving or loading: ask again while there is time
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.2)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}

    def read_back(self, bootstrap: str, timeout_s: float = 60.0) -> dict[int, list[tuple[int, int]]]:
        """Everything in the topic, read by a fresh consumer from offset 0 to each partition's end.

        Tells acknowledged records that are gone apart from a live consumer that stopped reading.
        It gives up once no record has come for ``timeout_s``, not after ``timeout_s`` in all: a
        100-cycle run's 12 million records take longer than a minute to read, and a fixed deadline
        reported the unread tail as lost.
        """
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"read-back-{time.monotonic_ns()}", **self._client}
        )
        found: dict[int, list[tuple[int, int]]] = defaultdict(list)
        try:
            ends = {p: _end_offset(consumer, TopicPartition(self.topic, p), timeout_s) for p in range(self.partitions)}
            self.result.ends = dict(ends)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(
                (found[p][-1][0] + 1 if found[p] else 0) < end for p, end in ends.items()
            ):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    partition, offset, value = _record(message)
                    found[partition].append((offset, value))
                    deadline = time.monotonic() + timeout_s
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
        for partition, offset in list(self._commits):
            result.commits[partition].append(offset)
        result.commit_failures = list(self._commit_failures)
        self.result = result
        return result

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():  # an idempotent producer that lost sequence sync never delivers again
            self.fatal = str(error)
            self._stop_producing.set()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self._acked.append(_record(message))
        else:
            self._failed.append(str(error))

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's offset_commit_cb: which partitions' offsets the coordinator took."""
        for tp in partitions:
            failure = error or tp.error
            if failure is None:
                self._commits.append((tp.partition, tp.offset))
            else:
                self._commit_failures.append(f"partition {tp.partition} offset {tp.offset}: {failure}")
        self._commit_in_flight.clear()

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

    def _commit(self, positions: dict[int, int]) -> None:
        """Commit ``positions`` (partition -> next offset to read) without waiting; ``_on_commit`` hears back."""
        self._commit_in_flight.set()
        offsets = [TopicPartition(self.topic, p, offset) for p, offset in sorted(positions.items())]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:  # refused before it was sent: no acknowledgement will come
            self._commit_failures.append(f"commit not sent: {exc}")
            self._commit_in_flight.clear()

    def _consume(self) -> None:
        self._consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        positions: dict[int, int] = {}
        committed: dict[int, int] = {}
        next_commit = time.monotonic() + COMMIT_INTERVAL_S
        try:
            while not self._stop_consuming.is_set():
                if time.monotonic() >= next_commit and positions != committed and not self._commit_in_flight.is_set():
                    committed = dict(positions)
                    self._commit(committed)
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                message = self._consumer.poll(0.2)  # also where librdkafka calls _on_commit
                if message is None:
                    continue
                if message.error() is not None:  # librdkafka goes on by itself; kept for a failed run
                    self.consumer_log.append(f"{time.time():.3f} CONSUMER ERROR {message.error()}")
                    continue
                partition, offset, value = _record(message)
                self._consumed.append((partition, offset, value))
                positions[partition] = offset + 1
        finally:
            self._consumer.close()


def _wait_for(
    count: Callable[[], int],
    at_least: int,
    timeout_s: float,
    stopped: Callable[[], str | None],
    what: Callable[[], str],
) -> None:
    """Poll ``count`` until it reaches ``at_least``; fail at once if ``stopped`` gives a reason, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while (have := count()) < at_least:
        if (reason := stopped()) is not None:
            raise AssertionError(reason)
        if time.monotonic() > deadline:
            raise AssertionError(f"only {have} {what()}, wanted {at_least}")
        time.sleep(0.05)


#: Answers to a watermark query that a leader change explains; librdkafka returns them instead of retrying.
#: OFFSET_NOT_AVAILABLE: a new leader whose high watermark has not caught up with its epoch's start (KIP-207);
#: _UNKNOWN_PARTITION: librdkafka's own word for a partition it found no leader of in its metadata in time.
_LEADER_MOVING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
}


def _end_offset(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> int:
    """The partition's high watermark, asked again while its leader moves (a Java consumer's endOffsets retries so).

    A broker's Metadata may name a new leader a moment before that broker has taken the partition up: a
    network-partition run's read-back got NOT_LEADER_FOR_PARTITION there, and librdkafka's watermark query
    gives such an answer back as final.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=10)[1])
        except KafkaException as exc:
            if exc.args[0].code() not in _LEADER_MOVING or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
