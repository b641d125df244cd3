"""The pipeline's exactly-once Kafka writer against a real broker: replays send only what is missing.

An attempt that died after sending part of a batch is the same writer delivering a prefix of the
batch's rows (the marker is written before the first send, the sent records carry the batch header).
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from barnabas.spark.pipeline.kafka_once import BATCH_HEADER, ExactlyOnceKafkaWriter, OutRow
from barnabas.spark.pipeline.produce import ensure_topics
from tests.support.broker_process import BrokerProcess


def _topics(bootstrap: str) -> tuple[str, str]:
    alerts, dead = f"alerts-{uuid.uuid4().hex[:8]}", f"dead-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {alerts: 2, dead: 1})
    return alerts, dead


def _rows(alerts: str, dead: str, batch: int) -> list[OutRow]:
    rows = [OutRow(alerts, f"device-{i % 3}".encode(), f"alert {batch}/{i}".encode()) for i in range(40)]
    rows += [OutRow(dead, None, f"bad {batch}/{i}".encode(), (("error", b"malformed JSON"),)) for i in range(10)]
    return rows


def _read(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes, dict[str, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-once-test", "enable.auto.commit": False})
    records = []
    try:
        for partition in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            consumer.assign([TopicPartition(topic, partition, low)])
            while high > low and (message := consumer.poll(10)) is not None:
                assert message.error() is None, message.error()
                records.append((message.key(), message.value(), dict(message.headers() or [])))
                if message.offset() + 1 >= high:
                    break
    finally:
        consumer.close()
    return records


def test_a_replayed_batch_sends_only_what_its_dead_attempt_did_not(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    alerts, dead = _topics(spark_broker.bootstrap)
    writer = ExactlyOnceKafkaWriter(spark_broker.bootstrap, [alerts, dead], tmp_path / "markers")
    rows = _rows(alerts, dead, 7)
    # Attempt 1 of batch 7 "dies" after 23 rows; attempt 2 sends the other 27; attempt 3 sends nothing.
    assert writer.deliver(rows[:23], 7) == 23
    assert writer.deliver(list(reversed(rows)), 7) == len(rows) - 23
    assert writer.deliver(rows, 7) == 0
    # The next batch may carry equal rows: they are new records.
    assert writer.deliver(rows[:5], 8) == 5

    sent = _read(spark_broker.bootstrap, alerts) + _read(spark_broker.bootstrap, dead)
    batches = collections.Counter(headers[BATCH_HEADER] for _, _, headers in sent)
    assert batches == {b"7": len(rows), b"8": 5}
    tagged_7 = collections.Counter((key, value) for key, value, headers in sent if headers[BATCH_HEADER] == b"7")
    assert tagged_7 == collections.Counter((row.key, row.value) for row in rows)
    assert all(headers["error"] == b"malformed JSON" for key, _, headers in sent if key is None)


def test_equal_rows_within_a_batch_are_each_sent_once(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    alerts, dead = _topics(spark_broker.bootstrap)
    writer = ExactlyOnceKafkaWriter(spark_broker.bootstrap, [alerts, dead], tmp_path / "markers")
    twice = [OutRow(alerts, b"k", b"same")] * 2
    assert writer.deliver(twice[:1], 0) == 1
    assert writer.deliver(twice, 0) == 1
    assert [value for _, value, _ in _read(spark_broker.bootstrap, alerts)] == [b"same", b"same"]
