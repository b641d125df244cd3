"""The pipeline driver's SparkSession: which jars it asks Maven for, and Delta when they resolve.

Jars come through `spark.jars.packages` (Ivy, which reads ~/.m2 before Maven Central, so
`scripts/resolve-spark-jars.sh` makes a run offline-safe). A Delta jar that does not resolve is not an
error: the session is built again without it and the job skips the Delta table, saying so in one line.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# Local-mode defaults: Spark's 200 shuffle partitions cost 200 tasks (and state stores) per batch.
LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


@dataclass(frozen=True, slots=True)
class Session:
    spark: SparkSession
    delta: bool


def build_session(
    *, master: str, kafka_connector: bool, delta: bool, conf: Mapping[str, str], app_name: str = "barnabas-telemetry"
) -> Session:
    """A session with the connector when the job reads or writes `format("kafka")`, and Delta if asked.

    Raises PySparkException when Spark cannot start even without Delta.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    packages = [KAFKA_CONNECTOR] if kafka_connector else []
    if delta:
        try:
            return Session(_start(master, app_name, [*packages, DELTA_PACKAGE], {**DELTA_CONF, **conf}), True)
        except PySparkException as exc:
            log.warning("Delta table disabled: %s did not load (%s)", DELTA_PACKAGE, str(exc).splitlines()[0])
    return Session(_start(master, app_name, packages, dict(conf)), False)


def _start(master: str, app_name: str, packages: list[str], conf: dict[str, str]) -> SparkSession:
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**LOCAL_CONF, **conf} if master.startswith("local") else dict(conf)
    if packages:
        settings["spark.jars.packages"] = ",".join(packages)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
