"""The telemetry job's DataFrame steps, from Kafka-shaped rows to the rows each sink writes.

Rules: every step takes and returns DataFrames (no I/O, no query start), so the job wires them and a
test can run them on a static frame. Spark alone decides whether a record is a reading (`from_json` with
an explicit schema, every field present and of its type); a record that is not one is a dead letter,
never dropped. Event time is the reading's `ts`; the watermark delay bounds how late a reading may be.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from .errors import reading_error

CORRUPT = "_corrupt_record"
READING_FIELDS = ("reading_id", "device_id", "ts", "metric", "value")
READING_SCHEMA = StructType([
    StructField("reading_id", StringType()),
    StructField("device_id", StringType()),
    StructField("ts", TimestampType()),
    StructField("metric", StringType()),
    StructField("value", DoubleType()),
    StructField(CORRUPT, StringType()),
])  # fmt: skip


def parse(raw: DataFrame) -> DataFrame:
    """Kafka rows plus a `reading` struct parsed from the value (null fields where it does not parse)."""
    reading = F.from_json(
        F.col("value").cast("string"),
        READING_SCHEMA,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "allowSingleQuotes": "false"},
    )
    return raw.select("key", "value", "topic", "partition", "offset", reading.alias("reading"))


def is_reading() -> Column:
    """True for parsed rows that are complete readings: parsed, not corrupt, every field non-null."""
    condition = F.col("reading").isNotNull() & F.col(f"reading.{CORRUPT}").isNull()
    for name in READING_FIELDS:
        condition = condition & F.col(f"reading.{name}").isNotNull()
    return F.coalesce(condition, F.lit(False))


def readings(parsed: DataFrame) -> DataFrame:
    """The readings, one column per field."""
    return parsed.where(is_reading()).select(*(F.col(f"reading.{name}").alias(name) for name in READING_FIELDS))


def deduplicated(rows: DataFrame, watermark_delay: str) -> DataFrame:
    """Readings with retried sends removed: one row per `reading_id` within the watermark delay."""
    return rows.withWatermark("ts", watermark_delay).dropDuplicatesWithinWatermark(["reading_id"])


def window_aggregates(deduped: DataFrame, window: str) -> DataFrame:
    """Per device, metric and tumbling window: count, mean, min and max (append mode: final windows only)."""
    return (
        deduped.groupBy(F.window("ts", window).alias("window"), "device_id", "metric")
        .agg(
            F.count("*").alias("readings"),
            F.avg("value").alias("avg_value"),
            F.min("value").alias("min_value"),
            F.max("value").alias("max_value"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "device_id",
            "metric",
            "readings",
            "avg_value",
            "min_value",
            "max_value",
        )
    )


def alerts(deduped: DataFrame, threshold: float, topic: str) -> DataFrame:
    """Kafka sink rows for readings above `threshold`, keyed by device, once per reading id."""
    body = F.to_json(
        F.struct(
            "reading_id",
            "device_id",
            F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("ts"),
            "metric",
            "value",
            F.lit(threshold).alias("threshold"),
        )
    )
    return deduped.where(F.col("value") > threshold).select(
        F.col("device_id").cast("binary").alias("key"),
        body.cast("binary").alias("value"),
        F.lit(topic).alias("topic"),
        F.array(_header("alert", F.lit("threshold"))).alias("headers"),
    )


def dead_letters(parsed: DataFrame, topic: str) -> DataFrame:
    """Kafka sink rows for records that are not readings: the original key and bytes, the reason in headers.

    Headers follow Kafka Connect's dead-letter queue: the error text and where the record came from.
    """
    error = F.udf(reading_error, StringType(), useArrow=True)
    return parsed.where(~is_reading()).select(
        "key",
        "value",
        F.lit(topic).alias("topic"),
        F.array(
            _header("error", error(F.col("value"))),
            _header("source.topic", F.col("topic")),
            _header("source.partition", F.col("partition").cast("string")),
            _header("source.offset", F.col("offset").cast("string")),
        ).alias("headers"),
    )


def _header(key: str, value: Column) -> Column:
    return F.struct(F.lit(key).alias("key"), value.cast("binary").alias("value"))
