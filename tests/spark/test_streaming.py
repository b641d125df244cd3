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
    topic = new_topic(2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(spark_broker.bootstrap, topic, numbered(2, 1000))

    first = run_available_now(spark, spark_broker.bootstrap, topic, out, checkpoint)
    # maxOffsetsPerTrigger pro-rated over two equal backlogs: 300, 300, 300, then the last 100.
    assert first == [300, 300, 300, 100]

    produce(spark_broker.bootstrap, topic, numbered(2, 500, first=1000))
    second = run_available_now(spark, spark_broker.bootstrap, topic, out, checkpoint)
    assert sum(second) == 500
    assert all(rows <= 300 for rows in second)

    # Spark's reader of a file sink honours _spark_metadata: only committed files.
    written = [(row.partition, row.offset, row.value) for row in spark.read.parquet(str(out)).collect()]
    assert len(written) == len(set(written)) == 1500
    assert {(p, o) for p, o, _ in written} == {(p, o) for p in range(2) for o in range(750)}
    # Records are produced round-robin: the n-th record went to partition n % 2 at offset n // 2.
    assert all(value == f"v-{2 * offset + partition}" for partition, offset, value in written)
