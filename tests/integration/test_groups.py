"""Consumer groups through real clients: commit and resume, rebalances, crashes, failover.

confluent-kafka, kafka-python and aiokafka each consume a topic in a group, commit, and a new
consumer of the same group resumes exactly after the commit. Member processes
(``tests.interop.group_member`` for those three, ``tests/interop/node/group_member.js`` for
kafkajs, ``barnabas.interop.GroupMember`` for the Java client) join, leave and are killed with
SIGKILL while the test watches the assignments they report; a rebalance storm must settle with
every partition owned once. Finally the broker coordinating a group is killed and the group
carries on, with its committed offsets, at the next leader of its ``__consumer_offsets`` partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, NODE_DIR, build_tools, java_command
from tests.support.kafka_python import with_topic_metadata
from tests.support.requests import connect

pytestmark = pytest.mark.timeout(240)

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
REPO = Path(__file__).resolve().parents[2]
PYTHON_MEMBER = (sys.executable, "-m", "tests.interop.group_member")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    started = BrokerProcess(tmp_path_factory.mktemp("groups") / "b0", properties=FAST_GROUPS).start()
    yield started
    started.kill()


def create(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, f"value-{i}".encode(), key=f"key-{i}".encode())
    assert producer.flush(30) == 0


# -- commit and resume, per client --------------------------------------------------------------


def consume_confluent(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
                consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
    return values


def consume_kafka_python(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from kafka import KafkaConsumer

    consumer = with_topic_metadata(
        KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
    )
    values: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
            consumer.commit()
    finally:
        consumer.close()
    return values


def consume_aiokafka(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[str]:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        values: list[str] = []
        try:
            async with asyncio.timeout(60):
                while len(values) < count:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        values.extend(r.value.decode() for r in records)
                    await consumer.commit()
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


CONSUMERS: dict[str, Callable[[str, str, str, int], list[str]]] = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_a_new_consumer_resumes_after_the_committed_offsets(broker: BrokerProcess, client: str) -> None:
    topic, group = f"resume-{client}", f"resumers-{client}"
    create(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 0, 90)
    consume = CONSUMERS[client]
    first = consume(broker.bootstrap, topic, group, 90)
    assert sorted(first) == sorted(f"value-{i}" for i in range(90))
    produce(broker.bootstrap, topic, 90, 60)
    second = consume(broker.bootstrap, topic, group, 60)
    assert sorted(second) == sorted(f"value-{i}" for i in range(90, 150)), "exactly what came after the commit"

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {tp.partition: tp.offset for tp in listed.topic_partitions if tp.topic == topic}
    assert sum(committed.values()) == 150 and sorted(committed) == [0, 1, 2]


# -- member processes ----------------------------------------------------------------------------


class Member:
    """A group member process (``command``: the Python group_member unless told) and the assignments it reported."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, *extra: str, command: tuple[str, ...] = PYTHON_MEMBER
    ) -> None:
        command = (*command, "--bootstrap", bootstrap, "--topic", topic, "--group", group, *extra)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in leave and stop) the client's own log
        self.proc = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        self.assigned: frozenset[int] = frozenset()
        self.errors: list[str] = []
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self._lines.put(json.loads(line))

    def drain(self) -> None:
        while True:
            try:
                report = self._lines.get_nowait()
            except queue.Empty:
                return
            if "assigned" in report:
                self.assigned = frozenset(report["assigned"])
            else:
                self.errors.append(report["error"])

    def stderr_tail(self, size: int = 2000) -> str:
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(self._stderr.tell() - size, 0))
        return self._stderr.read().decode(errors="replace")

    def leave(self) -> None:
        """Close cleanly (LeaveGroup) and wait for the process to end."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0
        self._stderr.close()

    def crash(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._stderr.close()


@pytest.fixture(scope="session")
def java_member() -> tuple[str, ...] | str:
    """The Java GroupMember command, or why it cannot run."""
    problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
    return problem or java_command("barnabas.interop.GroupMember")


@pytest.fixture(scope="session")
def node_member() -> tuple[str, ...] | str:
    """The kafkajs group_member.js command, or why it cannot run."""
    problem = build_tools(NODE_DIR / "install.sh", ("node", "npm"), "kafkajs driver install")
    return problem or ("node", str(NODE_DIR / "group_member.js"))


@pytest.fixture
def member_command(request: pytest.FixtureRequest, client: str) -> tuple[str, ...]:
    """How to start one member process of ``client``."""
    if client not in ("kafkajs", "java"):
        return (*PYTHON_MEMBER, "--client", client)
    command: tuple[str, ...] | str = request.getfixturevalue("node_member" if client == "kafkajs" else "java_member")
    if isinstance(command, str):
        pytest.fail(command, pytrace=False)
    return command


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


def wait_for_split(live: list[Member], partitions: int, what: str, timeout_s: float = 60.0) -> None:
    """Until the live members own every partition exactly once, each of them at least one."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in live:
            member.drain()
        for member in live:
            if (code := member.proc.poll()) is not None:
                pytest.fail(f"a member exited (code {code}) while waiting for {what}:\n{member.stderr_tail()}")
        owned = [p for m in live for p in m.assigned]
        if sorted(owned) == list(range(partitions)) and all(m.assigned for m in live[:partitions]):
            return
        if time.monotonic() >= deadline:
            idle = "".join(f"\n--- a member owning nothing:\n{m.stderr_tail()}" for m in live if not m.assigned)
            pytest.fail(f"timed out waiting for {what}: {[sorted(m.assigned) for m in live]}{idle}")
        time.sleep(0.05)


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka", "kafkajs", "java"])
def test_members_join_leave_and_crash(
    broker: BrokerProcess, members: list[Member], client: str, member_command: tuple[str, ...]
) -> None:
    topic, group = f"rebalanced-{client}", f"rebalancers-{client}"
    create(broker.bootstrap, topic, 6)

    def member() -> Member:
        return Member(broker.bootstrap, topic, group, command=member_command)

    members.append(member())
    wait_for_split(members, 6, "the first member owning everything")
    members.append(member())
    wait_for_split(members, 6, "two members sharing")
    assert {len(m.assigned) for m in members} == {3}, "range (kafkajs: round robin) splits 6 partitions 3 and 3"

    crashed = members.pop()
    crashed.crash()  # no LeaveGroup: the coordinator finds out when its session times out
    wait_for_split(members, 6, "the survivor owning everything after the crash")

    members.append(member())
    wait_for_split(members, 6, "a third member joining")
    leaving = members.pop(0)
    leaving.leave()
    wait_for_split(members, 6, "the last member owning everything after a clean leave")
    assert all(not m.errors for m in members), [m.errors for m in members]


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka", "kafkajs", "java"])
def test_a_rebalance_storm_settles(
    broker: BrokerProcess, members: list[Member], client: str, member_command: tuple[str, ...]
) -> None:
    """Five members join at once and two leave: every partition ends up owned once, without a join loop.

    confluent-kafka members use cooperative-sticky (incremental rebalances); the others their default.
    """
    topic, group = f"stormy-{client}", f"storm-{client}"
    create(broker.bootstrap, topic, 10)
    strategy = ("--strategy", "cooperative-sticky") if client == "confluent" else ()
    members.extend(Member(broker.bootstrap, topic, group, *strategy, command=member_command) for _ in range(5))
    wait_for_split(members, 10, "five members sharing ten partitions")
    for member in members[:2]:
        member.leave()
    del members[:2]
    wait_for_split(members, 10, "three members sharing after two left")
    generations = broker.log_text().count(f"group {group} stabilised at generation")
    assert generations <= 12, f"the group rebalanced {generations} times: a join loop"
    assert all(not m.errors for m in members), [m.errors for m in members]


# -- coordinator failover --------------------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_the_group_survives_the_loss_of_its_coordinator(tmp_path: Path, client: str) -> None:
    cluster = BrokerCluster(tmp_path, 3, properties={**FAST_GROUPS, "min.insync.replicas": "2"}).start()
    try:
        topic, group = "guarded", "survivors"
        cluster.create_topic(topic, 3, 3)
        produce(cluster.bootstrap, topic, 0, 60)
        assert sorted(CONSUMERS[client](cluster.bootstrap, topic, group, 60)) == sorted(f"value-{i}" for i in range(60))
        admin = cluster.admin()
        coordinator = admin.describe_consumer_groups([group])[group].result(timeout=30).coordinator.id
        other = next(b for b in cluster.brokers if b.broker_id != coordinator)
        with connect(other) as raw:  # a broker that does not coordinate the group says so
            request = HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None)
            assert raw.request(12, 4, request).error_code == ErrorCode.not_coordinator
        cluster.brokers[coordinator].kill()
        cluster.wait_for(lambda md: coordinator not in md.brokers, "the coordinator declared dead")
        produce(cluster.bootstrap, topic, 60, 30)
        resumed = CONSUMERS[client](cluster.bootstrap, topic, group, 30)
        assert sorted(resumed) == sorted(f"value-{i}" for i in range(60, 90)), "resumed from the commits"
        survivors = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in cluster.alive())})
        moved = survivors.describe_consumer_groups([group])[group].result(timeout=30).coordinator.id
        assert moved != coordinator
    finally:
        cluster.stop()


# -- the CLI --------------------------------------------------------------------------------------


def groups_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", "groups", "--bootstrap", broker.bootstrap, *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_groups_cli_lists_describes_resets_and_deletes(broker: BrokerProcess) -> None:
    topic, group = "cli-topic", "cli-group"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 0, 40)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 60
    try:
        while consumed < 40 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed += 1
                consumer.commit(message=message, asynchronous=False)
        listed = groups_cli(broker, "list")
        assert listed.returncode == 0 and group in listed.stdout and "Stable" in listed.stdout
        refused = groups_cli(broker, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert refused.stderr.strip().endswith("is inactive, but the current state is Stable."), refused.stderr
    finally:
        consumer.close()
    produce(broker.bootstrap, topic, 40, 10)
    described = groups_cli(broker, "describe", group, "--json")
    assert described.returncode == 0, described.stderr
    lags = [p["lag"] for p in json.loads(described.stdout)["partitions"] if p["topic"] == topic]
    assert len(lags) == 2 and sum(lags) == 10, described.stdout
    assert groups_cli(broker, "describe", group).stdout.startswith(f"group {group}: Empty")

    dry_run = groups_cli(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "3")
    assert dry_run.returncode == 0 and "dry run" in dry_run.stdout
    done = groups_cli(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--execute")
    assert done.returncode == 0, done.stderr
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 3, 1: 3}

    assert groups_cli(broker, "delete", group).returncode == 0
    gone = groups_cli(broker, "delete", group)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


# -- the offsets topic under compaction --------------------------------------------------------------


def test_the_offsets_topic_stays_small_under_repeated_commits(tmp_path: Path) -> None:
    """4 MiB of commits to one group: the cleaner keeps the latest per partition, and a restart loads it."""
    properties = {**FAST_GROUPS, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "1048576",
                  "log.cleaner.backoff.ms": "100"}  # fmt: skip
    broker = BrokerProcess(tmp_path / "b0", properties=properties).start()
    try:
        topic, group = "busy", "committer"
        create(broker.bootstrap, topic, 12)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        written = 0
        offset = 0
        while written < 4 * 1024 * 1024:
            offset += 1
            consumer.commit(offsets=[TopicPartition(topic, p, offset) for p in range(12)], asynchronous=False)
            written += 12 * 60  # a commit record is at least ~60 bytes
        consumer.close()
        partition_dir = tmp_path / "b0" / "__consumer_offsets-0"
        deadline = time.monotonic() + 60
        while sum(segment_sizes(partition_dir).values()) > 1_300_000:
            assert time.monotonic() < deadline, segment_sizes(partition_dir)
            time.sleep(0.1)
        broker.stop()
        broker.start()  # the new coordinator loads the compacted partition
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        assert {tp.partition: tp.offset for tp in listed.topic_partitions} == dict.fromkeys(range(12), offset)
    finally:
        broker.kill()


def segment_sizes(partition_dir: Path) -> dict[str, int]:
    """Each segment file's size, skipping any the broker deletes between listing and stat."""
    sizes = {}
    for segment in partition_dir.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            sizes[segment.name] = segment.stat().st_size
    return sizes
