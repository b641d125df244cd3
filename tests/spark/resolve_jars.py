"""Resolve Spark's JVM Kafka connector from Maven Central into the Ivy cache before the tests run.

`make test-deps` runs this so the Spark tests' session (same `spark.jars.packages`) starts from the cache
rather than downloading during a timed test. Spark's own resolver (Ivy, via `spark.jars.packages`) does the
work, so the transitive dependencies (kafka-clients, commons-pool2, spark-token-provider-kafka) land exactly
where the test session looks for them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from barnabas.spark.pipeline.session import DELTA_PACKAGE  # the telemetry pipeline's Delta table
from tests.spark.jvm_connector import SPARK_KAFKA_PACKAGE

REQUIRED_JARS = (
    "spark-sql-kafka-0-10_2.13", "kafka-clients", "commons-pool2", "spark-token-provider-kafka",
    "delta-spark_4.2_2.13", "delta-storage",
)  # fmt: skip


def main() -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("barnabas-resolve-jars")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.jars.packages", f"{SPARK_KAFKA_PACKAGE},{DELTA_PACKAGE}")
        .getOrCreate()
    )
    try:
        jars = spark.sparkContext.getConf().get("spark.jars", "")
    finally:
        spark.stop()
    missing = [name for name in REQUIRED_JARS if name not in jars]
    if missing:
        print(f"resolve_jars: not resolved: {', '.join(missing)}; spark.jars={jars}", file=sys.stderr)
        return 1
    print(f"resolve_jars: {SPARK_KAFKA_PACKAGE}, {DELTA_PACKAGE} and their dependencies are in the Ivy cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
