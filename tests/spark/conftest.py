"""One SparkSession and one broker for every Spark test (a session costs 6–10 s to start).

The session runs local[2] with the UI off, two shuffle partitions, loopback addresses and a quick-start
JVM (serial GC, C1 only), and has Spark's JVM Kafka connector on its classpath (`make test-deps`
resolves it into the Ivy cache first). Python workers run this interpreter, so they import barnabas
from the same environment.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.spark.jvm_connector import SPARK_KAFKA_PACKAGE
from tests.support.broker_process import BrokerProcess

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import barnabas.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("barnabas-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.jars.packages", SPARK_KAFKA_PACKAGE)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    barnabas.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data").start()
    yield process
    process.kill()


@pytest.fixture
def new_topic(spark_broker: BrokerProcess) -> Callable[[int], str]:
    """Create a fresh topic with the given partition count; returns its name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    def create(partitions: int) -> str:
        name = f"spark-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(30)
        return name

    return create


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
