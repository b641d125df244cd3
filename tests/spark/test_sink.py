"""The `barnabas` sink: batch and streaming writes read back with the `barnabas` source."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.spark.records import numbered, produce
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(300)


def read_back(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    df = (
        spark.read.format("barnabas")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    return sorted(df.collect(), key=lambda row: (row.partition, row.offset))


def test_batch_writer_round_trip_with_headers_and_explicit_partitions(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str]
) -> None:
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

    topic = new_topic(3)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    data = [(f"k{n}", f"v{n}".encode(), n % 3, [("n", b"%d" % n)] if n % 2 else None) for n in range(30)]
    df = spark.createDataFrame(data, schema)
    df.write.format("barnabas").option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic).mode(
        "append"
    ).save()

    got = read_back(spark, spark_broker.bootstrap, topic)
    assert len(got) == 30
    by_key = {row.key.decode(): row for row in got}
    for key, value, partition, headers in data:
        row = by_key[key]
        assert (row.value, row.partition, row.topic) == (value, partition, topic)
        assert ([tuple(h) for h in row.headers] if row.headers else None) == headers

    # A topic column instead of the option; overwrite and a missing value column are refused.
    spark.createDataFrame([(topic, "extra")], "topic string, value string").write.format("barnabas").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap
    ).mode("append").save()
    assert [row.value for row in read_back(spark, spark_broker.bootstrap, topic)].count(b"extra") == 1
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        df.write.format("barnabas").option("kafka.bootstrap.servers", spark_broker.bootstrap).option(
            "topic", topic
        ).mode("overwrite").save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.select("key").write.format("barnabas").option("kafka.bootstrap.servers", spark_broker.bootstrap).option(
            "topic", topic
        ).mode("append").save()


def test_streaming_writer_round_trip(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str], tmp_path: Path
) -> None:
    source, sink = new_topic(2), new_topic(2)
    produce(spark_broker.bootstrap, source, numbered(2, 200))
    query = (
        spark.readStream.format("barnabas")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
        .writeStream.format("barnabas")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    got = read_back(spark, spark_broker.bootstrap, sink)
    assert sorted((row.key, row.value, row.partition) for row in got) == sorted(
        (f"k{n}".encode(), f"V-{n}".encode(), n % 2) for n in range(200)
    )


def test_keyed_rows_land_in_the_same_partitions_as_with_the_jvm_sink(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str]
) -> None:
    ours, jvm = new_topic(5), new_topic(5)
    df = spark.createDataFrame([(f"key-{n}", f"v{n}") for n in range(50)], "key string, value string")
    for fmt, topic in (("barnabas", ours), ("kafka", jvm)):
        df.write.format(fmt).option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic).mode(
            "append"
        ).save()
    placed = {
        topic: {row.key: row.partition for row in read_back(spark, spark_broker.bootstrap, topic)}
        for topic in (ours, jvm)
    }
    assert len(placed[ours]) == 50
    assert placed[ours] == placed[jvm]
    assert len(set(placed[ours].values())) > 1
