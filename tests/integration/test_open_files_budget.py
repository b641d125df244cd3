"""A broker serves more partitions than it may open files: idle segments give their descriptors back.

The broker runs under ``prlimit --nofile`` (soft and hard limit 512, which the broker cannot
raise), with twice as many partitions as that. Every partition is written, the broker is killed
(-9) and started again, which recovers and opens every partition's log, and every acknowledged
record is read back. Kafka holds a descriptor per segment and would stop at the limit.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.requests import unique

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)"),
]

OPEN_FILES_LIMIT = 512
PARTITIONS = 2 * OPEN_FILES_LIMIT
RECORDS_PER_PARTITION = 3


class FewFilesBroker(BrokerProcess):
    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={OPEN_FILES_LIMIT}", "--", *super().command()]


def open_descriptors(broker: BrokerProcess) -> int:
    assert broker.process.pid is not None
    return len(os.listdir(f"/proc/{broker.process.pid}/fd"))


def test_a_broker_serves_twice_as_many_partitions_as_it_may_open_files(tmp_path: Path) -> None:
    broker = FewFilesBroker(tmp_path / "data").start()
    try:
        check_every_record_survives_a_restart(broker)
    finally:
        broker.kill()


def check_every_record_survives_a_restart(broker: BrokerProcess) -> None:
    topic = unique("many")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=120)

    acknowledged: set[tuple[int | None, bytes | None]] = set()
    failures: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            acknowledged.add((message.partition(), message.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    for round_ in range(RECORDS_PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(topic, f"{partition}-{round_}".encode(), partition=partition, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert failures == []
    assert len(acknowledged) == PARTITIONS * RECORDS_PER_PARTITION
    assert open_descriptors(broker) < OPEN_FILES_LIMIT

    broker.kill()
    broker.start()  # recovery reads and opens every partition's log
    assert open_descriptors(broker) < OPEN_FILES_LIMIT
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read: set[tuple[int | None, bytes | None]] = set()
        while len(read) < len(acknowledged):
            messages = consumer.consume(1000, timeout=30)
            assert messages, f"{len(read)} of {len(acknowledged)} read back before the consumer got nothing for 30 s"
            for message in messages:
                assert message.error() is None, message.error()
                read.add((message.partition(), message.value()))
    finally:
        consumer.close()
    assert read == acknowledged
    assert not [line for line in broker.output if "Too many open files" in line]
