"""The `barnabas` source beside Spark's JVM Kafka connector: same schema, same refusals, same rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from barnabas.spark.options import OptionError, parse_source_options
from tests.spark.records import Sent, numbered, produce
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(300)

# Recent enough that retention (7 days by default) keeps the records.
BASE_MS = (int(time.time()) - 3600) * 1000


def reader(spark: Any, fmt: str, bootstrap: str, **options: str) -> Any:
    return spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in df.collect()), key=lambda row: (row[2], row[3], row[4]))


@pytest.mark.parametrize("include_headers", ["false", "true"])
def test_schema_is_the_jvm_kafka_sources(spark: Any, spark_broker: BrokerProcess, include_headers: str) -> None:
    options = {"subscribe": "anything", "includeHeaders": include_headers}
    ours = reader(spark, "barnabas", spark_broker.bootstrap, **options).schema
    jvm = reader(spark, "kafka", spark_broker.bootstrap, **options).schema
    assert ours == jvm
    assert ours.json() == jvm.json()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"subscribe": "a", "assign": '{"a":[0]}'},
        {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
        {"subscribe": "a", "kafka.enable.auto.commit": "false"},
        {"subscribe": "a", "kafka.value.deserializer": "x"},
        {"subscribe": "a", "startingOffsets": "latest"},
        {"subscribe": "a", "endingOffsets": "earliest"},
        {"subscribe": "a", "minPartitions": "-1"},
        {"assign": "a-0"},
    ],
    ids=lambda options: ",".join(options) or "none",
)
def test_refusals_match_the_jvm_kafka_source(spark: Any, spark_broker: BrokerProcess, options: dict[str, str]) -> None:
    with pytest.raises(OptionError) as expected:
        parse_source_options({"kafka.bootstrap.servers": spark_broker.bootstrap, **options}, streaming=False)
    message = str(expected.value).strip().splitlines()[0]
    for fmt in ("kafka", "barnabas"):
        # Py4J (JVM) and PySpark (Python worker) wrap the error in different exception types.
        with pytest.raises(Exception) as refused:
            reader(spark, fmt, spark_broker.bootstrap, **options).collect()
        assert message in str(refused.value), fmt


def test_batch_read_of_an_offset_range(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str]
) -> None:
    topic = new_topic(3)
    sent = [
        Sent(p, f"k{p}-{j}".encode() if j % 5 else None, f"{p}:{j}".encode(), BASE_MS + j * 1000, (("n", b"%d" % j),))
        for j in range(30)
        for p in range(3)
    ]
    produce(spark_broker.bootstrap, topic, sent)

    df = reader(
        spark,
        "barnabas",
        spark_broker.bootstrap,
        assign=f'{{"{topic}": [0, 2]}}',
        startingOffsets=f'{{"{topic}": {{"0": 5, "2": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 20, "2": -1}}}}',
        includeHeaders="true",
    )
    got = rows(df)
    expected = [(0, j) for j in range(5, 20)] + [(2, j) for j in range(30)]
    assert [(row[3], row[4]) for row in got] == expected
    for key, value, row_topic, partition, offset, timestamp, timestamp_type, headers in got:
        assert row_topic == topic
        assert value == f"{partition}:{offset}".encode()
        assert key == (f"k{partition}-{offset}".encode() if offset % 5 else None)
        assert timestamp == datetime.fromtimestamp((BASE_MS + offset * 1000) / 1000, UTC).replace(tzinfo=None)
        assert timestamp_type == 0
        assert [tuple(h) for h in headers] == [("n", b"%d" % offset)]

    # By timestamp: the first offset at or after each timestamp (KafkaConsumer.offsetsForTimes).
    by_time = reader(
        spark,
        "barnabas",
        spark_broker.bootstrap,
        subscribe=topic,
        startingTimestamp=str(BASE_MS + 10_000),
        endingOffsetsByTimestamp=json.dumps(
            {topic: {"0": BASE_MS + 20_000, "1": BASE_MS + 12_500, "2": BASE_MS + 10_000}}
        ),
    )
    got = [(row[3], row[4]) for row in rows(by_time)]
    assert got == [(0, j) for j in range(10, 20)] + [(1, j) for j in range(10, 13)]

    # An empty topic plans no range: PySpark then runs one task with InputPartition(None), which reads nothing.
    assert reader(spark, "barnabas", spark_broker.bootstrap, subscribe=new_topic(1)).count() == 0

    # minPartitions splits the three ranges into six tasks without losing or repeating a record.
    split = reader(spark, "barnabas", spark_broker.bootstrap, subscribe=topic, minPartitions="6")
    assert split.rdd.getNumPartitions() == 6
    assert sorted((row.partition, row.offset) for row in split.select("partition", "offset").collect()) == sorted(
        (p, j) for p in range(3) for j in range(30)
    )


def test_jvm_connector_and_barnabas_read_the_same_rows(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str]
) -> None:
    topic = new_topic(2)
    records = [
        Sent(r.partition, r.key if n % 3 else None, r.value, headers=(("h", b"x"), ("n", b"%d" % n)) if n % 2 else ())
        for n, r in enumerate(numbered(2, 60))
    ]
    produce(spark_broker.bootstrap, topic, records)
    options = {"subscribe": topic, "includeHeaders": "true"}
    jvm = rows(reader(spark, "kafka", spark_broker.bootstrap, **options))
    ours = rows(reader(spark, "barnabas", spark_broker.bootstrap, **options))
    assert len(ours) == 60
    assert ours == jvm

    # The JVM connector streams from barnabas too (readStream + Trigger.AvailableNow into a memory table).
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .options(startingOffsets="earliest", **options)
        .load()
        .writeStream.format("memory")
        .queryName("jvm_stream")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert rows(spark.table("jvm_stream")) == ours


def test_fail_on_data_loss_when_the_range_starts_below_the_log_start(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str]
) -> None:
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient

    topic = new_topic(1)
    produce(spark_broker.bootstrap, topic, numbered(1, 50))
    admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 20)]).values():
        future.result(30)
    options = {"assign": json.dumps({topic: [0]}), "startingOffsets": json.dumps({topic: {"0": 10}})}
    with pytest.raises(Exception, match=r"Offsets \[10, 20\) of .*-0 are gone \(log start 20\)"):
        reader(spark, "barnabas", spark_broker.bootstrap, **options).collect()
    kept = reader(spark, "barnabas", spark_broker.bootstrap, failOnDataLoss="false", **options)
    assert [row.offset for row in kept.orderBy("offset").collect()] == list(range(20, 50))
