"""The Arrow schema `read()` yields is exactly the one PySpark derives from the Spark schema."""

from __future__ import annotations

import subprocess
import sys

import pytest

from barnabas.spark.schema import arrow_schema, kafka_schema


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_equals_pysparks_conversion(include_headers: bool) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    expected = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
    assert arrow_schema(include_headers).equals(expected)


def test_spark_schema_fields() -> None:
    assert [f.name for f in kafka_schema(True).fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert kafka_schema(False).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int>"
    )


def test_importing_the_package_does_not_import_pyspark() -> None:
    heavy = "('pyspark', 'pyarrow', 'confluent_kafka')"
    code = f"import sys, barnabas.spark; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
