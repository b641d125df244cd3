"""One Apache Kafka 4 broker (KRaft, the jars bench/kafka-server/build.sh resolves) for tests that compare with it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from barnabas.benchmark._kafka import KafkaCluster, find_kafka_lib
from barnabas.benchmark._settings import BenchError


@contextmanager
def kafka_peer(directory: Path, settings: Mapping[str, str] | None = None) -> Iterator[KafkaCluster]:
    """A started one-broker Kafka cluster in ``directory``, stopped by pid on exit; a test fails if it cannot start."""
    try:
        cluster = KafkaCluster(directory, 1, find_kafka_lib(), settings=dict(settings or {})).start()
    except BenchError as exc:
        pytest.fail(f"Apache Kafka did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
