"""The JVM Kafka connector's Maven coordinates, shared by the jar resolver, the tests and the benchmark."""

from __future__ import annotations

# Maven Central serves spark-sql-kafka-0-10_2.13 up to 4.2.0 here; it must match the installed pyspark.
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
