"""Streaming reads: Trigger.AvailableNow in maxOffsetsPerTrigger steps, and a restart from the checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.spark.records import numbered, produce
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(300)


def run_available_now(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> list[int]:
    """One AvailableNow run into a Parquet sink; returns the input rows of each micro-batch."""
    query = (
        spark.readStream.format("barnabas")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "300")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the AvailableNow run did not finish"
    assert query.exception() is None
    return [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]]


def test_restart_from_checkpoint_has_no_duplicates_and_no_gaps(
    spark: Any, spark_broker: BrokerProcess, new_topic: Callable[[int], str], tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = new_topic(2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first_records = numbered(2, 1000)
    produce(spark_broker.bootstrap, topic, first_records)

    first = run_available_now(spark, spark_broker.bootstrap, topic, out, checkpoint)
    # maxOffsetsPerTrigger pro-rated over two equal backlogs: 300, 300, 300, then the last 100.
    assert first == [300, 300, 300, 100]

    # While the query is down the topic grows a partition; the restart reads it from its start.
    admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result(30)
    second_records = numbered(3, 600, first=1000)
    produce(spark_broker.bootstrap, topic, second_records)
    second = run_available_now(spark, spark_broker.bootstrap, topic, out, checkpoint)
    assert sum(second) == 600
    assert all(rows <= 300 for rows in second)

    # The offset each record got: partitions number their records in the order they were produced.
    expected: dict[tuple[int, int], str] = {}
    next_offset = [0, 0, 0]
    for record in first_records + second_records:
        expected[(record.partition, next_offset[record.partition])] = record.value.decode()
        next_offset[record.partition] += 1
    # Spark's reader of a file sink honours _spark_metadata: only committed files.
    written = [(row.partition, row.offset, row.value) for row in spark.read.parquet(str(out)).collect()]
    assert len(written) == len(set(written)) == 1600
    assert {(p, o): v for p, o, v in written} == expected
