"""The five client families over SASL_SSL with SCRAM-SHA-512 and over mutual TLS: produce, a group, admin.

One broker (tests.support.secure.SecureBroker) serves both listeners; certificates come from trustme.
For each family and each listener the client creates a topic through its admin API, produces
acks=all, consumes every record in a consumer group and commits, all over that listener; the
broker, asked on its PLAINTEXT listener, must then hold the topic with the partitions asked for
and the group's offsets at the partitions' ends.

confluent-kafka, kafka-python and aiokafka run in this process. kafkajs and the Java client run
their interop drivers with ``--client-config`` (tests/interop/README.md): the interop driver
creates a topic, produces, reads it back, lists offsets and deletes it, and the group driver
consumes a topic produced over PLAINTEXT in a group, commits and reads its commits back.
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.interop.common import problems_in
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, NODE_DIR, REPO, build_tools, java_command
from tests.support.kafka_python import with_topic_metadata
from tests.support.requests import unique
from tests.support.secure import SecureBroker, Transport
from tests.support.tls import Certificates, make_certificates

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

COUNT, PARTITIONS = 20, 2
TIMEOUT_S = 30
VALUES = [f"value-{i}" for i in range(COUNT)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[SecureBroker]:
    started = SecureBroker(tmp_path_factory.mktemp("secure-broker") / "data", certs).start()
    yield started
    started.kill()


@dataclass(frozen=True)
class Round:
    """One family's round on one listener: its topic and group, a scratch directory, the PLAINTEXT bootstrap."""

    transport: Transport
    topic: str
    group: str
    work: Path
    plaintext: str


# -- the Python clients, in this process ----------------------------------------------------------


def confluent(round_: Round) -> list[str]:
    config = round_.transport.librdkafka()
    admin = AdminClient(config)
    admin.create_topics([NewTopic(round_.topic, PARTITIONS, 1)])[round_.topic].result(timeout=TIMEOUT_S)
    produce_with_librdkafka(config, round_.topic)
    consumer = Consumer({**config, "group.id": round_.group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([round_.topic])
    values: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def kafka_python(round_: Round) -> list[str]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonTopic

    config = round_.transport.kafka_python()
    admin = KafkaAdminClient(**config)
    try:
        admin.create_topics([KafkaPythonTopic(round_.topic, PARTITIONS, 1)], timeout_ms=TIMEOUT_S * 1000)
    finally:
        admin.close()
    producer = KafkaProducer(acks="all", **config)
    try:
        for future in [producer.send(round_.topic, value.encode()) for value in VALUES]:
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = with_topic_metadata(KafkaConsumer(round_.topic, group_id=round_.group, auto_offset_reset="earliest",
                                                 enable_auto_commit=False, **config))  # fmt: skip
    values: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < COUNT and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value.decode() for record in records)
        consumer.commit()
    finally:
        consumer.close()
    return values


def aiokafka(round_: Round) -> list[str]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioTopic

    async def run() -> list[str]:
        config = round_.transport.aiokafka()
        admin = AIOKafkaAdminClient(**config)
        await admin.start()
        try:
            await admin.create_topics([AioTopic(round_.topic, PARTITIONS, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(acks="all", **config)
        await producer.start()
        try:
            sent = [await producer.send(round_.topic, value.encode()) for value in VALUES]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(round_.topic, group_id=round_.group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, **config)  # fmt: skip
        await consumer.start()
        values: list[str] = []
        try:
            while len(values) < COUNT:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(record.value.decode() for record in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    async def bounded() -> list[str]:
        async with asyncio.timeout(TIMEOUT_S * 2):
            return await run()

    return asyncio.run(bounded())


# -- kafkajs and the Java client, through their drivers ------------------------------------------------


@functools.cache
def build_problem(family: str) -> str | None:
    """Why the family's tools cannot run (their build or install failed), or None."""
    if family == "java":
        return build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
    return build_tools(NODE_DIR / "install.sh", ("node", "npm"), "kafkajs driver install")


def run_tool(command: tuple[str, ...], out: Path) -> Any:
    """Run one driver to its JSON report (``out``); its stderr tail is the failure when it exits non-zero."""
    proc = subprocess.run([*command, "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=TIMEOUT_S * 3, check=False)  # fmt: skip
    assert proc.returncode == 0, f"{' '.join(command[:6])}…: {proc.stderr.strip()[-2000:]}"
    return json.loads(out.read_text())


def driven(family: str, interop: tuple[str, ...], group: tuple[str, ...], timeout: tuple[str, str]) -> Callable[
    [Round], list[str]
]:  # fmt: skip
    """A family run by its drivers: the interop driver's round on a topic of its own, then the group driver's."""

    def run(round_: Round) -> list[str]:
        if (problem := build_problem(family)) is not None:
            pytest.fail(problem, pytrace=False)
        transport, work = round_.transport, round_.work
        config = transport.kafkajs(work / "client.json") if family == "kafkajs" else transport.java(work / "client.jp")
        common = ("--bootstrap", transport.bootstrap, "--client-config", str(config), *timeout, "--count", str(COUNT))
        own_topic = ("--topic", f"{round_.topic}-own", "--mode", "plain", "--partitions", str(PARTITIONS))
        report = run_tool((*interop, *common, *own_topic), work / "interop.json")
        assert not problems_in(report, COUNT, PARTITIONS), problems_in(report, COUNT, PARTITIONS)
        create_and_produce_over_plaintext(round_)
        report = run_tool((*group, *common, "--topic", round_.topic, "--group", round_.group), work / "group.json")
        assert not report["errors"], report["errors"]
        return [value for _, _, _, value in report["records"]]

    return run


def create_and_produce_over_plaintext(round_: Round) -> None:
    admin = AdminClient({"bootstrap.servers": round_.plaintext})
    admin.create_topics([NewTopic(round_.topic, PARTITIONS, 1)])[round_.topic].result(timeout=TIMEOUT_S)
    produce_with_librdkafka({"bootstrap.servers": round_.plaintext}, round_.topic)


def produce_with_librdkafka(config: dict[str, str], topic: str) -> None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i, value in enumerate(VALUES):
        producer.produce(topic, value.encode(), key=f"key-{i}", on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None] * COUNT


FAMILIES: dict[str, Callable[[Round], list[str]]] = {
    "confluent": confluent,
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
    "kafkajs": driven("kafkajs", ("node", str(NODE_DIR / "driver.js")), ("node", str(NODE_DIR / "group_driver.js")),
                      ("--timeout-s", str(TIMEOUT_S))),
    "java": driven("java", java_command("barnabas.interop.InteropDriver"), java_command("barnabas.interop.GroupDriver"),
                   ("--timeout-ms", str(TIMEOUT_S * 1000))),
}  # fmt: skip


# -- the matrix ---------------------------------------------------------------------------------


def stored_state(plaintext: str, topic: str, group: str) -> tuple[int, dict[int, int], dict[int, int]]:
    """(partitions, end offsets, the group's committed offsets) of ``topic``, as the broker tells a PLAINTEXT client."""
    admin = AdminClient({"bootstrap.servers": plaintext})
    partitions = len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)
    spec = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}  # type: ignore[no-untyped-call]
    ends = {tp.partition: f.result(TIMEOUT_S).offset for tp, f in admin.list_offsets(spec).items()}
    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    fetched = admin.list_consumer_group_offsets([asked])[group].result(TIMEOUT_S)
    return partitions, ends, {tp.partition: tp.offset for tp in fetched.topic_partitions}


@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_client_family_produces_consumes_in_a_group_and_administers(
    broker: SecureBroker, family: str, listener: str, tmp_path: Path
) -> None:
    transport = broker.sasl_ssl() if listener == "SASL_SSL" else broker.mtls()
    round_ = Round(transport, unique(f"{family}-{listener}"), unique(f"{family}-group"), tmp_path, broker.bootstrap)
    consumed = FAMILIES[family](round_)
    assert sorted(consumed) == sorted(VALUES), "every record exactly once"
    partitions, ends, committed = stored_state(broker.bootstrap, round_.topic, round_.group)
    assert partitions == PARTITIONS, "the topic was made by the admin call (auto-creation would give 1 partition)"
    assert sum(ends.values()) == COUNT
    assert committed == ends, "the group committed every partition's end"
