"""The shipped telemetry pipeline end to end, its driver killed -9 mid-batch and restarted.

A real broker, the real `barnabas pipeline` command in its own process group (Python driver, JVM and
Python workers), a SIGKILL of that whole group while a micro-batch is planned but not committed
(preferably while the alerts writer is sending it), then the same command again. The expected output
is computed here from the generator's records alone: the distinct readings per device and one-minute
window, the readings above the threshold, the malformed lines. The file sinks must hold each window
exactly once (read through Spark, which honours `_spark_metadata`, and through Delta's log); the alerts
and dead-letter topics must hold each expected record exactly once (the pipeline's default
`kafka_once` writer), none missing, none invented.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from barnabas.spark.pipeline.generator import Kind, Reading, Record, TelemetrySpec, telemetry
from barnabas.spark.pipeline.produce import ensure_topics, produce
from barnabas.testing import process_table
from tests.support.broker_process import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Unique names: the broker is shared by every Spark test of the session.
TOPIC, ALERTS, DEAD_LETTERS = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("telemetry", "alerts", "dead-letters"))
SPEC = TelemetrySpec(readings=1800, seed=11, malformed_rate=0.02)
MAX_OFFSETS_PER_TRIGGER = 600
THRESHOLD = 80.0
WATERMARK_DELAY = timedelta(seconds=30)
EVENTS = "alerts-and-dead-letters"
QUERIES = ("aggregates", "aggregates-delta", EVENTS)
# What a dead letter's error header starts with, per kind of malformed line the generator writes.
ERROR_PREFIXES = {
    "truncated": "malformed JSON: ",
    "not-json": "malformed JSON: ",
    "wrong-type": "field 'value': expected a number",
    "missing-field": "missing field(s): device_id",
    "bad-timestamp": "field 'ts': not an ISO-8601 timestamp",
    "not-an-object": "not a JSON object",
}
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
RUN_TIMEOUT_S = 420.0


@dataclass
class Driver:
    """One `barnabas pipeline run` process group, its output in files."""

    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    @classmethod
    def start(cls, bootstrap: str, out: Path, name: str) -> Driver:
        command = [
            sys.executable, "-m", "barnabas", "pipeline", "run", "telemetry", "--bootstrap", bootstrap,
            "--out", str(out), "--topic", TOPIC, "--alerts-topic", ALERTS, "--dead-letter-topic", DEAD_LETTERS,
            "--threshold", str(THRESHOLD),
            "--max-offsets-per-trigger", str(MAX_OFFSETS_PER_TRIGGER),
            "--spark-conf", "spark.ui.enabled=false", "--spark-conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
        ]  # fmt: skip
        stdout, stderr = out.parent / f"{name}.out", out.parent / f"{name}.err"
        with stdout.open("wb") as o, stderr.open("wb") as e:
            proc = subprocess.Popen(command, stdout=o, stderr=e, start_new_session=True)
        return cls(proc, stdout, stderr)

    def batches(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.read_text().splitlines() if line.startswith("{")]

    def describe(self) -> str:
        """The run's output without JVM stack frames and Ivy's resolution report (the causes stay)."""
        noise = ("\tat ", "\t... ", "\tfound ", "\t[", ":: ", "\tconfs", "\t|", "\t-")
        stderr = [line for line in self.stderr.read_text().splitlines() if not line.startswith(noise)]
        return f"stdout:\n{self.stdout.read_text()[-3000:]}\nstderr:\n" + "\n".join(stderr)[-8000:]

    def kill_group(self) -> None:
        """SIGKILL every process of the group (driver, JVM, Python workers) and wait until none is left."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _live_group_members(self.proc.pid):
            assert time.monotonic() < deadline, f"process group {self.proc.pid} survived SIGKILL"
            time.sleep(0.05)

    def stop_group(self) -> None:
        if self.proc.poll() is None or _live_group_members(self.proc.pid):
            self.kill_group()


def _sent_by_in_flight_writer(consumer: Any, out: Path, flying: dict[str, int]) -> int:
    """Records the alerts writer sent for its uncommitted batch: end offsets now minus its marker's."""
    if EVENTS not in flying:
        return 0
    marker = out / "checkpoints" / f"{EVENTS}-sent" / f"{flying[EVENTS]}.json"
    if not marker.exists():
        return 0
    sent = 0
    for topic, partitions in json.loads(marker.read_text()).items():
        for partition, start in partitions.items():
            sent += consumer.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=10)[1] - start
    return sent


def _live_group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are not zombies (read from /proc)."""
    return [pid for pid, state, _, group in process_table() if group == pgid and state != "Z"]


def _batch_ids(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(path.name) for path in directory.iterdir() if path.name.isdigit()}


def _in_flight(out: Path) -> dict[str, int]:
    """Per query, the batch planned in its offset log but not yet in its commit log."""
    flying = {}
    for query in QUERIES:
        checkpoint = out / "checkpoints" / query
        pending = _batch_ids(checkpoint / "offsets") - _batch_ids(checkpoint / "commits")
        if pending:
            flying[query] = min(pending)
    return flying


@pytest.fixture
def drivers() -> Iterator[list[Driver]]:
    started: list[Driver] = []
    yield started
    for driver in started:
        driver.stop_group()


def test_pipeline_survives_driver_kill_with_exactly_once_files(
    spark_broker: BrokerProcess, spark: Any, tmp_path: Path, drivers: list[Driver]
) -> None:
    records = list(telemetry(SPEC))
    ensure_topics(spark_broker.bootstrap, {TOPIC: 3, ALERTS: 1, DEAD_LETTERS: 1})
    assert produce(spark_broker.bootstrap, TOPIC, records, lambda _sent: None) == len(records)
    out = tmp_path / "out"

    first = Driver.start(spark_broker.bootstrap, out, "first")
    drivers.append(first)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    watcher = Consumer({"bootstrap.servers": spark_broker.bootstrap, "group.id": "pipeline-test-watcher"})
    try:
        while True:
            # Best: the alerts writer has sent part of a batch that Spark has not committed yet; failing
            # that, any batch in flight once the aggregates query has committed three.
            committed = len(_batch_ids(out / "checkpoints" / "aggregates" / "commits"))
            flying = _in_flight(out)
            sent = _sent_by_in_flight_writer(watcher, out, flying)
            if committed >= 1 and (sent or (committed >= 3 and flying)):
                break
            assert first.proc.poll() is None, f"driver exited before the kill:\n{first.describe()}"
            assert time.monotonic() < deadline, f"no batch in flight after a commit:\n{first.describe()}"
            time.sleep(0.01)
        first.kill_group()
        sent_by_dead_attempt = _sent_by_in_flight_writer(watcher, out, flying)
    finally:
        watcher.close()
    in_flight_at_kill = _in_flight(out)
    assert in_flight_at_kill, "every planned batch got committed before the kill landed"

    second = Driver.start(spark_broker.bootstrap, out, "second")
    drivers.append(second)
    try:
        assert second.proc.wait(timeout=RUN_TIMEOUT_S) == 0, second.describe()
    except subprocess.TimeoutExpired:
        pytest.fail(f"restarted driver did not finish in {RUN_TIMEOUT_S} s:\n{second.describe()}")
    assert _in_flight(out) == {}
    # The restart re-ran each interrupted batch under its original id (the offset log's write-ahead entry).
    replayed = {}
    for batch in second.batches():
        replayed.setdefault(batch["query"], batch["batch"])
    for query, batch_id in in_flight_at_kill.items():
        assert replayed.get(query) == batch_id, (in_flight_at_kill, replayed)

    expected = _expected_windows(records)
    parquet = spark.read.parquet(str(out / "aggregates"))
    _assert_windows(parquet.collect(), expected)
    delta_files = _delta_live_files(out / "aggregates-delta")
    _assert_windows(spark.read.parquet(*delta_files).collect(), expected)

    readings = _distinct_readings(records)
    alerts = _read_topic(spark_broker.bootstrap, ALERTS)
    alert_ids = collections.Counter(json.loads(message.value())["reading_id"] for message in alerts)
    expected_alerts = {r.reading_id for r in readings.values() if r.value > THRESHOLD}
    assert set(alert_ids) == expected_alerts
    assert max(alert_ids.values()) == 1, "an alert was sent twice"

    dead = _read_topic(spark_broker.bootstrap, DEAD_LETTERS)
    malformed = {record.value: record.malformed_kind for record in records if record.kind is Kind.MALFORMED}
    assert sorted(message.value() for message in dead) == sorted(malformed), "a dead letter missing or sent twice"
    for message in dead:
        headers = {key: value.decode() for key, value in message.headers()}
        assert headers["error"].startswith(ERROR_PREFIXES[malformed[message.value()]]), headers
        assert headers["source.topic"] == TOPIC and int(headers["source.offset"]) >= 0, headers

    print(
        f"records {len(records)} (readings {len(readings)}, duplicates "
        f"{sum(r.kind is Kind.DUPLICATE for r in records)}, malformed {len(malformed)}); "
        f"killed with {in_flight_at_kill} in flight, the alerts writer's dead attempt having sent "
        f"{sent_by_dead_attempt} records; windows {len(expected)}; "
        f"orphan parquet files {_orphans(out / 'aggregates')}; alerts {len(alerts)} for {len(expected_alerts)} "
        f"readings; dead letters {len(dead)} for {len(malformed)} lines"
    )


def _distinct_readings(records: list[Record]) -> dict[str, Reading]:
    return {record.reading.reading_id: record.reading for record in records if record.reading is not None}


def _expected_windows(records: list[Record]) -> dict[tuple[str, datetime], list[float]]:
    """Values per (device, window start) for every window the final watermark has closed."""
    readings = _distinct_readings(records)
    watermark = max(r.ts for r in readings.values()) - WATERMARK_DELAY
    windows: dict[tuple[str, datetime], list[float]] = collections.defaultdict(list)
    for reading in readings.values():
        start = reading.ts.replace(second=0, microsecond=0)
        if start + timedelta(minutes=1) <= watermark:
            windows[(reading.device_id, start.replace(tzinfo=None))].append(reading.value)
    return windows


def _assert_windows(rows: list[Any], expected: dict[tuple[str, datetime], list[float]]) -> None:
    keys = [(row.device_id, row.window_start) for row in rows]
    assert len(keys) == len(set(keys)), "a window was written twice"
    got = {(row.device_id, row.window_start): row for row in rows}
    assert got.keys() == expected.keys()
    for key, values in expected.items():
        row = got[key]
        assert row.readings == len(values), key
        assert (row.min_value, row.max_value) == (min(values), max(values)), key
        assert row.avg_value == pytest.approx(sum(values) / len(values)), key


def _delta_live_files(table: Path) -> list[str]:
    """Data files of the table's latest version, replayed from its JSON commit log."""
    live: set[str] = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    assert live, f"no data files in {table}"
    return [str(table / path) for path in sorted(live)]


def _orphans(directory: Path) -> int:
    """Parquet files on disk that `_spark_metadata` never committed (left by the killed batch)."""
    committed = set()
    for log in (directory / "_spark_metadata").iterdir():
        if log.name.startswith("."):
            continue  # Hadoop checksum files
        for line in log.read_text().splitlines()[1:]:
            committed.add(Path(json.loads(line)["path"].removeprefix("file:")).name)
    return len({path.name for path in directory.glob("*.parquet")} - committed)


def _read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic`, read by assignment from each partition's start to its end offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pipeline-test", "enable.auto.commit": False})
    messages: list[Any] = []
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + 60
            read = 0
            while read < high - low:
                assert time.monotonic() < deadline, f"{topic}[{partition}]: read {read} of {high - low}"
                message = consumer.poll(1.0)
                if message is None or message.error():
                    continue
                messages.append(message)
                read += 1
    finally:
        consumer.close()
    return messages
