"""`barnabas pipeline`: generate fills a topic with exactly the generator's records; errors are one line."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from barnabas.spark.pipeline.generator import TelemetrySpec, telemetry
from tests.support.broker_process import BrokerProcess


def _barnabas(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", "pipeline", *args], check=False, capture_output=True, text=True, timeout=120
    )


def test_generate_produces_the_generators_records(spark_broker: BrokerProcess) -> None:
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    done = _barnabas(
        "generate", "telemetry", "--bootstrap", spark_broker.bootstrap, "--topic", topic, "--partitions", "2",
        "--readings", "500", "--seed", "5", "--malformed-rate", "0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = sorted(r.value for r in telemetry(TelemetrySpec(readings=500, seed=5, malformed_rate=0.1)))
    consumer = Consumer({"bootstrap.servers": spark_broker.bootstrap, "group.id": "cli-test"})
    try:
        total = sum(
            high - low
            for low, high in (
                consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30) for partition in (0, 1)
            )
        )
        consumer.assign([TopicPartition(topic, partition, 0) for partition in (0, 1)])
        values = []
        while len(values) < total and (message := consumer.poll(10)) is not None:
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    assert sorted(values) == expected


def test_errors_are_one_line_with_a_non_zero_exit(tmp_path: Path) -> None:
    done = _barnabas("run", "telemetry", "--out", str(tmp_path), "--spark-conf", "no-equals-sign")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["barnabas pipeline: --spark-conf 'no-equals-sign': expected KEY=VALUE"]
    assert _barnabas("run", "unknown-pipeline", "--out", str(tmp_path)).returncode == 2
    help_text = _barnabas("run", "--help").stdout
    for option in ("--generate", "--source", "--kafka-delivery", "--max-offsets-per-trigger", "--follow", "--no-delta"):
        assert option in help_text
