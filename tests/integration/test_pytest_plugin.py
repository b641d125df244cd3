"""The shipped pytest plugin, used exactly as an outside project would: a throwaway project directory
with nothing but a test file, run by pytest with the installed barnabas (its fixtures come from the
``pytest11`` entry point, not from this repository's conftest), on two xdist workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

USER_TESTS = """
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


def read_one(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.value()
    finally:
        consumer.close()
    return None


@pytest.mark.parametrize("n", range(4))
def test_a_topic_of_its_own(barnabas_bootstrap, barnabas_topic, n):
    producer = Producer({"bootstrap.servers": barnabas_bootstrap})
    producer.produce(barnabas_topic, str(n).encode())
    assert producer.flush(10) == 0
    assert read_one(barnabas_bootstrap, barnabas_topic) == str(n).encode()


@pytest.mark.barnabas_topic(partitions=3, config={"cleanup.policy": "compact"})
def test_a_shaped_topic(barnabas_bootstrap, barnabas_topic):
    topics = AdminClient({"bootstrap.servers": barnabas_bootstrap}).list_topics(barnabas_topic, timeout=10).topics
    assert len(topics[barnabas_topic].partitions) == 3


def test_a_producer_rides_out_its_leader_crashing(barnabas_cluster):
    barnabas_cluster.create_topic("orders", 1, 3)
    producer = Producer({"bootstrap.servers": barnabas_cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    producer.produce("orders", b"before")
    assert producer.flush(10) == 0
    barnabas_cluster.kill(barnabas_cluster.leader_of("orders", 0))
    producer.produce("orders", b"after")
    assert producer.flush(60) == 0


def test_the_next_test_finds_the_cluster_healed(barnabas_cluster):
    assert len(barnabas_cluster.alive()) == 3
    assert len(barnabas_cluster.metadata().brokers) == 3


def test_a_failure_shows_the_brokers_log(barnabas_broker):
    assert False, "failing on purpose"
"""


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--basetemp", str(project / "tmp"), *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def test_an_outside_project_gets_a_broker_a_topic_per_test_and_a_healing_cluster(tmp_path: Path) -> None:
    project = tmp_path / "someone-elses-project"
    project.mkdir()
    (project / "test_with_kafka.py").write_text(USER_TESTS)
    done = run_pytest(project, "-n", "2", "-q", "-rf")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "7 passed" in done.stdout and "1 failed" in done.stdout, done.stdout
    assert "FAILED test_with_kafka.py::test_a_failure_shows_the_brokers_log" in done.stdout
    assert re.search(r"barnabas broker 0 log -+\n\S+ \S+ INFO barnabas\.", done.stdout), done.stdout
    leftovers = subprocess.run(["pgrep", "-f", str(project / "tmp")], capture_output=True, text=True, check=False)
    assert leftovers.stdout == "", "every broker the plugin started is stopped"
