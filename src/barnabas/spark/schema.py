"""The Kafka source's schema, as Spark's StructType and as the Arrow schema PySpark checks batches against.

Built in code, not DDL: Python workers have no SparkContext to parse DDL with. The Arrow schema must
equal `pyspark.sql.pandas.types.to_arrow_schema(kafka_schema(...), timezone="UTC")` exactly, or PySpark
refuses the batch (DATA_SOURCE_RETURN_SCHEMA_MISMATCH): timestamps in microseconds with a UTC zone,
int32 partitions, every field nullable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["arrow_schema", "headers_arrow_type", "kafka_schema"]


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka schema (KafkaRecordToRowConverter.kafkaSchema), `headers` only when asked for."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def headers_arrow_type() -> pa.DataType:
    """`array<struct<key: string, value: binary>>` in Arrow."""
    import pyarrow as pa

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.list_(pa.field("element", header))


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the batches `read()` yields."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", headers_arrow_type()))
    return pa.schema(fields)
