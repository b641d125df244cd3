"""Send generated telemetry to a topic with an idempotent producer, creating the pipeline's topics first.

Idempotence matters: the generator's duplicates are the only duplicates the job should see, so a
producer retry must not add more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .generator import Record

TIMEOUT_S = 30.0


def ensure_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create each missing topic with the given partition count (existing topics are left alone).

    Raises RuntimeError with one line when the cluster cannot be reached or a topic cannot be created.
    """
    # log_level 0: an unreachable cluster is reported once, by the exception, not by librdkafka's retries.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        existing = admin.list_topics(timeout=TIMEOUT_S).topics
    except KafkaException as exc:
        raise RuntimeError(f"cannot reach {bootstrap}: {exc.args[0].str()}") from None
    missing = [NewTopic(name, num_partitions=count) for name, count in topics.items() if name not in existing]
    if not missing:
        return
    for name, future in admin.create_topics(missing, operation_timeout=TIMEOUT_S).items():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise RuntimeError(f"cannot create topic {name}: {exc.args[0].str()}") from None


def produce(bootstrap: str, topic: str, records: Iterable[Record], on_sent: Callable[[int], None]) -> int:
    """Send every record; return how many were acknowledged. Raises RuntimeError on a delivery failure."""
    failures: list[str] = []
    acked = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal acked
        if error is None:
            acked += 1
        else:
            failures.append(error.str())

    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
    })  # fmt: skip
    for sent, record in enumerate(records, start=1):
        while True:
            try:
                producer.produce(topic, key=record.key, value=record.value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        if sent % 500 == 0:
            producer.poll(0)
            on_sent(sent)
    remaining = producer.flush(TIMEOUT_S)
    if failures or remaining:
        reason = failures[0] if failures else f"{remaining} records still unsent after {TIMEOUT_S:.0f} s"
        raise RuntimeError(f"producing to {topic} failed: {reason}")
    on_sent(acked)
    return acked
