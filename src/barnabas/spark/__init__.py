"""Spark integration: the `barnabas` data source and sink (Spark's Kafka source, in Python).

    import barnabas.spark
    barnabas.spark.register(spark)          # or spark.dataSource.register(BarnabasDataSource)
    spark.readStream.format("barnabas").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "events").load()

Importing this package is cheap: PySpark, pyarrow and confluent-kafka load when a source is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT_NAME", "BarnabasDataSource", "register"]

FORMAT_NAME = "barnabas"


def register(spark: SparkSession) -> None:
    """Register format `barnabas` with a SparkSession (needs the `spark` extra: pyspark ≥ 4.2)."""
    from .source import BarnabasDataSource

    spark.dataSource.register(BarnabasDataSource)


def __getattr__(name: str) -> Any:
    if name == "BarnabasDataSource":
        from .source import BarnabasDataSource

        return BarnabasDataSource
    raise AttributeError(name)
