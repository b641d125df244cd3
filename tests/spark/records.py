"""Producing known records for the Spark tests and reading a topic back with librdkafka."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Producer


@dataclass(frozen=True)
class Sent:
    partition: int
    key: bytes | None
    value: bytes
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


def produce(bootstrap: str, topic: str, records: Iterable[Sent]) -> None:
    """Produce records in order and wait until every one is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(str(error))

    for record in records:
        producer.produce(
            topic,
            record.value,
            record.key,
            partition=record.partition,
            timestamp=record.timestamp_ms or 0,
            headers=list(record.headers) or None,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def numbered(partitions: int, count: int, first: int = 0, prefix: str = "v") -> list[Sent]:
    """`count` records spread round-robin over `partitions`, values `prefix-<n>` from `first`."""
    return [Sent(n % partitions, f"k{n}".encode(), f"{prefix}-{n}".encode()) for n in range(first, first + count)]
