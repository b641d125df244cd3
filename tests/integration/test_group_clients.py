"""Consumer groups with real clients: kafkajs and the Java client join, consume, commit and leave.

Each case runs two driver processes in one consumer group against a barnabas broker: the group
drivers (``tests/interop/node/group_driver.js``, ``barnabas.interop.GroupDriver``; contract in
tests/interop/README.md) subscribe() to a 3-partition topic with auto-commit off and
earliest reset, process exactly ``--count`` records, commit them synchronously and leave.

* phase 1: 150 records produced (confluent-kafka, partition ``i % 3``); the driver must get each
  exactly once, in offset order per partition, and commit every partition's end offset;
* phase 2: 150 more; a new driver process in the same group must resume from the committed
  offsets — exactly the 150 new records, none of phase 1 again.

After each phase librdkafka's AdminClient checks what the broker stored: the group's committed
offsets (OffsetFetch) equal the partitions' end offsets (ListOffsets), and the group
(DescribeGroups) is Empty with no members and protocol type ``consumer`` — the driver's
close()/disconnect() sent LeaveGroup and waited for its answer, so no polling is needed.
Cases: kafkajs → kafkajs, java → java, and kafkajs → java (both use the "consumer" protocol
type, so the Java member joins the group kafkajs left and resumes from kafkajs's offsets).

Coordinator failover (kafkajs, java): a 3-broker cluster of its own, the topic replicated 3 ways
(``min.insync.replicas=2``). After phase 1 the broker coordinating the group (the leader of its
``__consumer_offsets`` partition) is killed with SIGKILL; once the others no longer list it,
phase 2 runs against the two survivors and must resume from the offsets committed on the dead
coordinator, now served by a different one. This case always starts its own cluster
(``BARNABAS_TEST_BOOTSTRAP`` does not apply); both drivers get every live broker as bootstrap.

Broker: one module-scoped barnabas with ``group.initial.rebalance.delay.ms=0`` (a new group's
first join would otherwise wait 3 s), or the broker at ``BARNABAS_TEST_BOOTSTRAP`` (host:port).
Prerequisites as for test_client_interop.py: java/javac/mvn and node/npm (missing tools fail).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, NODE_DIR, REPO, build_tools, java_command

BOOTSTRAP_ENV = "BARNABAS_TEST_BOOTSTRAP"
PARTITIONS = 3
COUNT = 150  # records per phase
DRIVER_TIMEOUT_S = 60  # each driver gives up on its own after this (its watchdog 5 s later)
KILL_AFTER_S = 90  # the test kills a driver still running by then
TIMEOUT = 30  # admin calls and producer flush

Record = tuple[int, int, str, str]  # partition, offset, key, value


@dataclass(frozen=True)
class Driver:
    """How to start one client family's group driver, or why it cannot be started."""

    command: tuple[str, ...] = ()
    problem: str | None = None
    timeout_flag: tuple[str, str] = ("--timeout-s", str(DRIVER_TIMEOUT_S))


@pytest.fixture(scope="session")
def java_group_driver() -> Driver:
    problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
    if problem:
        return Driver(problem=problem)
    return Driver(
        command=java_command("barnabas.interop.GroupDriver"),
        timeout_flag=("--timeout-ms", str(DRIVER_TIMEOUT_S * 1000)),
    )


@pytest.fixture(scope="session")
def node_group_driver() -> Driver:
    problem = build_tools(NODE_DIR / "install.sh", ("node", "npm"), "kafkajs driver install")
    if problem:
        return Driver(problem=problem)
    return Driver(command=("node", str(NODE_DIR / "group_driver.js")))


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    """This module's barnabas broker (no initial rebalance delay), or None with BARNABAS_TEST_BOOTSTRAP."""
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        yield None
        return
    data_dir = tmp_path_factory.mktemp("group-broker") / "data"
    process = BrokerProcess(data_dir, properties={"group.initial.rebalance.delay.ms": "0"}).start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def bootstrap(group_broker: BrokerProcess | None) -> str:
    return os.environ.get(BOOTSTRAP_ENV, "").strip() if group_broker is None else group_broker.bootstrap


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _tail(text: str, n: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def _broker_log(broker: BrokerProcess | BrokerCluster | None) -> str:
    if broker is None:
        return "(external broker: no log)"
    if isinstance(broker, BrokerCluster):
        alive = broker.alive()
        return "\n".join(
            f"-- broker {b.broker_id}{'' if b in alive else ' (dead)'}:\n{_broker_log(b)}" for b in broker.brokers
        )
    lines = [line for line in broker.output if "__consumer_offsets" not in line or "WARN" in line or "ERROR" in line]
    return _tail("\n".join(lines), 40)


def _failure_reason(stderr: str) -> str:
    """The driver's one-line verdict ("group-driver: ..."), else its last stderr line."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("group-driver:"):
            return line.removeprefix("group-driver:").strip()
    return lines[-1] if lines else "(no output)"


def produce(bootstrap: str, topic: str, first: int, count: int) -> dict[tuple[int, int], tuple[str, str]]:
    """Produce key-<i>/value-<i> for first <= i < first+count to partition i % 3; return (p, offset) -> (key, value)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    delivered: dict[tuple[int, int], tuple[str, str]] = {}
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            errors.append(f"{message.key()!r}: {error}")
        else:
            delivered[message.partition(), message.offset()] = (message.key().decode(), message.value().decode())

    for i in range(first, first + count):
        producer.produce(topic, key=f"key-{i}", value=f"value-{i}", partition=i % PARTITIONS, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0, "producer: messages still undelivered"
    assert not errors, f"delivery failures: {errors[:5]}"
    assert len(delivered) == count, f"{len(delivered)} distinct (partition, offset) pairs for {count} messages"
    return delivered


def end_offsets(admin: AdminClient, topic: str) -> dict[int, int]:
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}  # type: ignore[no-untyped-call]
    return {tp.partition: f.result(TIMEOUT).offset for tp, f in admin.list_offsets(request).items()}


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets for ``topic`` as the broker reports them (OffsetFetch).

    Asked by a consumer of the group that does not join it: librdkafka's admin
    ListConsumerGroupOffsets crashes the test process on a NOT_COORDINATOR answer (librdkafka
    issue 5040), which a coordinator that just moved may give.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
    finally:
        consumer.close()
    offsets: dict[int, int] = {}
    for tp in committed:
        assert tp.error is None, f"OffsetFetch {group} {topic}-{tp.partition}: {tp.error}"
        offsets[tp.partition] = tp.offset  # -1001 (OFFSET_INVALID) when nothing is committed
    return offsets


def run_driver(
    driver: Driver, bootstrap: str, topic: str, group: str, *, out: Path, broker: BrokerProcess | BrokerCluster | None
) -> Any:
    if driver.problem:
        pytest.fail(driver.problem, pytrace=False)
    command = [*driver.command, "--bootstrap", bootstrap, "--topic", topic, "--group", group]
    command += ["--count", str(COUNT), "--out", str(out), *driver.timeout_flag]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=KILL_AFTER_S, check=False)
    except subprocess.TimeoutExpired as e:  # subprocess.run has killed the driver
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(
            f"{command[0]} group driver still running after {KILL_AFTER_S} s (killed); stderr tail:\n{_tail(stderr)}"
            f"\nbroker log tail:\n{_broker_log(broker)}",
            pytrace=False,
        )
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        pytest.fail(
            f"group driver against {bootstrap}: {_failure_reason(proc.stderr)}\n"
            f"(exit {proc.returncode} after {elapsed:.1f} s; stderr tail:)\n{_tail(proc.stderr)}"
            f"\nbroker log tail:\n{_broker_log(broker)}",
            pytrace=False,
        )
    report = json.loads(out.read_text())
    print(f"{report.get('client_version')}: {elapsed:.2f} s, phases {report.get('timings_ms')}")
    return report


def phase_problems(
    report: Any,
    expected: dict[tuple[int, int], tuple[str, str]],
    earlier: set[tuple[int, int]],
    ends: dict[int, int],
    restarts_allowed_for: tuple[str, ...] = (),
) -> list[str]:
    """Every way a driver's report departs from "got exactly ``expected``, committed ``ends``".

    A consumer that restarted itself (kafkajs, after a retriable error) is one unless the error names
    one of ``restarts_allowed_for`` (Kafka error types).
    """
    problems: list[str] = []
    if report.get("errors"):
        problems.append(f"driver reported errors: {report['errors'][:5]}")
    unexpected = [r for r in report.get("restarts") or [] if not any(kind in r for kind in restarts_allowed_for)]
    if unexpected:
        problems.append(f"consumer restarted after: {unexpected[:5]}")
    records: list[Record] = [tuple(r) for r in report.get("records") or []]
    if len(records) != COUNT:
        problems.append(f"{len(records)} records processed, expected exactly {COUNT}")
    positions = collections.Counter((p, o) for p, o, _, _ in records)
    duplicated = sorted(pos for pos, n in positions.items() if n > 1)
    if duplicated:
        problems.append(f"delivered more than once: {duplicated[:10]} ({len(duplicated)} in all)")
    replayed = sorted(pos for pos in positions if pos in earlier)
    if replayed:
        problems.append(f"records of an earlier phase delivered again: {replayed[:10]} ({len(replayed)} in all)")
    missing = sorted(pos for pos in expected if pos not in positions)
    if missing:
        problems.append(f"never delivered: {missing[:10]} ({len(missing)} in all)")
    unknown = sorted(pos for pos in positions if pos not in expected and pos not in earlier)
    if unknown:
        problems.append(f"delivered records nobody produced: {unknown[:10]}")
    wrong = [(p, o, k, v) for p, o, k, v in records if (p, o) in expected and expected[p, o] != (k, v)]
    if wrong:
        problems.append(f"key/value differ from what was produced: {wrong[:5]}")
    for partition in range(PARTITIONS):
        offsets = [o for p, o, _, _ in records if p == partition]
        if offsets != sorted(offsets):
            problems.append(f"partition {partition}: offsets not in order: {offsets[:20]}")
    committed = {int(p): int(o) for p, o in (report.get("committed") or {}).items()}
    if committed != ends:
        problems.append(f"driver committed {committed}, partition end offsets are {ends}")
    return problems


def check_group_after(admin: AdminClient, bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> None:
    stored = group_offsets(bootstrap, group, topic)
    assert stored == ends, f"group {group}: broker returns committed offsets {stored}, end offsets are {ends}"
    description = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    members = [(m.member_id, m.client_id) for m in description.members]
    assert description.state == ConsumerGroupState.EMPTY and not members, (
        f"group {group} after the driver left: state {description.state}, members {members}"
    )
    assert not description.is_simple_consumer_group, (
        f"group {group}: DescribeGroups returns an empty protocol type (Kafka keeps 'consumer' for an Empty group)"
    )


CASES = [
    pytest.param("kafkajs", "kafkajs", id="kafkajs"),
    pytest.param("java", "java", id="java"),
    pytest.param("kafkajs", "java", id="kafkajs-then-java"),
]


@pytest.mark.interop
@pytest.mark.parametrize(("first", "second"), CASES)
def test_group_consume_commit_resume(
    first: str,
    second: str,
    *,
    bootstrap: str,
    admin: AdminClient,
    group_broker: BrokerProcess | None,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    fixtures = {"kafkajs": "node_group_driver", "java": "java_group_driver"}
    drivers: dict[str, Driver] = {client: request.getfixturevalue(fixtures[client]) for client in {first, second}}
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"groups-{first}-{second}-{suffix}", f"group-{first}-{second}-{suffix}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)

    earlier: set[tuple[int, int]] = set()
    for phase, client in enumerate((first, second), start=1):
        expected = produce(bootstrap, topic, (phase - 1) * COUNT, COUNT)
        ends = end_offsets(admin, topic)
        assert ends == {p: phase * COUNT // PARTITIONS for p in range(PARTITIONS)}, f"end offsets {ends}"
        report = run_driver(
            drivers[client], bootstrap, topic, group, out=tmp_path / f"phase-{phase}.json", broker=group_broker
        )
        request.node.user_properties.append((f"phase{phase}_timings_ms", report.get("timings_ms")))
        problems = phase_problems(report, expected, earlier, ends)
        if problems:
            pytest.fail(
                f"phase {phase} ({report.get('client_version')}, group {group}):\n  " + "\n  ".join(problems),
                pytrace=False,
            )
        check_group_after(admin, bootstrap, group, topic, ends)
        earlier |= set(expected)


FAILOVER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "min.insync.replicas": "2",
}


def _coordinator(admin: AdminClient, group: str) -> int:
    return int(admin.describe_consumer_groups([group])[group].result(TIMEOUT).coordinator.id)


#: Retriable errors a consumer may restart on while its group's coordinator fails over, by the Java client's
#: names and kafkajs's (which calls code 14 by its old name, GROUP_LOAD_IN_PROGRESS).
FAILOVER_RESTARTS = (
    "COORDINATOR_LOAD_IN_PROGRESS", "GROUP_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
)  # fmt: skip
#: What a group's coordinator answers until it serves the group.
_NOT_SERVING = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
)  # fmt: skip


def wait_until_coordinator_serves(admin: AdminClient, group: str, timeout_s: float = 60.0) -> None:
    """Until ``group``'s coordinator answers DescribeGroups with anything but "not serving yet".

    The first FindCoordinator creates __consumer_offsets, and a coordinator still loading its partition answers
    COORDINATOR_LOAD_IN_PROGRESS, which kafkajs retries a few times before it restarts its consumer: the first
    phase is about the group working, not about the topic's creation on a loaded machine.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.describe_consumer_groups([group])[group].result(TIMEOUT)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_SERVING:
                return  # answered: it serves the group (a group it does not know may be an error)
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.mark.interop
@pytest.mark.parametrize("client", ["kafkajs", "java"])
def test_group_resumes_after_its_coordinator_is_killed(
    client: str, *, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    fixtures = {"kafkajs": "node_group_driver", "java": "java_group_driver"}
    driver: Driver = request.getfixturevalue(fixtures[client])
    cluster = BrokerCluster(tmp_path, 3, properties=FAILOVER_PROPERTIES).start()
    try:
        topic, group = f"failover-{client}", f"failover-group-{client}"
        cluster.create_topic(topic, PARTITIONS, 3)

        def run_phase(phase: int, earlier: set[tuple[int, int]]) -> tuple[set[tuple[int, int]], AdminClient]:
            live = ",".join(b.bootstrap for b in cluster.alive())
            admin = AdminClient({"bootstrap.servers": live})
            expected = produce(live, topic, (phase - 1) * COUNT, COUNT)
            ends = end_offsets(admin, topic)
            assert ends == {p: phase * COUNT // PARTITIONS for p in range(PARTITIONS)}, f"end offsets {ends}"
            report = run_driver(driver, live, topic, group, out=tmp_path / f"phase-{phase}.json", broker=cluster)
            request.node.user_properties.append((f"phase{phase}_timings_ms", report.get("timings_ms")))
            # After the kill, the group's new coordinator may still be loading or not yet known when
            # kafkajs's own retries run out; it then restarts its consumer, which must carry on.
            allowed = FAILOVER_RESTARTS if phase == 2 else ()
            problems = phase_problems(report, expected, earlier, ends, restarts_allowed_for=allowed)
            if problems:
                pytest.fail(
                    f"phase {phase} ({report.get('client_version')}, group {group}, brokers {live}):\n  "
                    + "\n  ".join(problems),
                    pytrace=False,
                )
            check_group_after(admin, live, group, topic, ends)
            return earlier | set(expected), admin

        wait_until_coordinator_serves(AdminClient({"bootstrap.servers": cluster.bootstrap}), group)
        earlier, admin = run_phase(1, set())
        coordinator = _coordinator(admin, group)
        killed = time.monotonic()
        cluster.brokers[coordinator].kill()
        cluster.wait_for(lambda md: coordinator not in md.brokers, f"broker {coordinator} (coordinator) declared dead")
        print(
            f"coordinator {coordinator} killed; the others stopped listing it {time.monotonic() - killed:.2f} s later"
        )

        _, survivors = run_phase(2, earlier)
        moved = _coordinator(survivors, group)
        assert moved != coordinator, f"group {group} is still coordinated by the killed broker {coordinator}"
        assert moved in {b.broker_id for b in cluster.alive()}, f"new coordinator {moved} is not a live broker"
    finally:
        cluster.stop()


# ---------------------------------------------------------------- the phase checker itself (no broker)


def _phase_two() -> tuple[dict[str, Any], dict[tuple[int, int], tuple[str, str]], set[tuple[int, int]]]:
    """A correct phase-2 report: records 150..299 at offsets 50..99 of partition i % 3."""
    expected = {
        (i % PARTITIONS, 50 + (i - COUNT) // PARTITIONS): (f"key-{i}", f"value-{i}") for i in range(COUNT, 2 * COUNT)
    }
    earlier = {(p, o) for p in range(PARTITIONS) for o in range(50)}
    records = [[p, o, k, v] for (p, o), (k, v) in sorted(expected.items())]
    report = {"records": records, "committed": {str(p): 100 for p in range(PARTITIONS)}, "errors": []}
    return report, expected, earlier


def test_phase_checker_accepts_a_correct_report() -> None:
    report, expected, earlier = _phase_two()
    assert phase_problems(report, expected, earlier, dict.fromkeys(range(PARTITIONS), 100)) == []


def test_phase_checker_allows_only_the_restarts_it_is_told_of() -> None:
    report, expected, earlier = _phase_two()
    report["restarts"] = ["KafkaJSProtocolError COORDINATOR_LOAD_IN_PROGRESS: The coordinator is loading"]
    ends = dict.fromkeys(range(PARTITIONS), 100)
    assert phase_problems(report, expected, earlier, ends, restarts_allowed_for=FAILOVER_RESTARTS) == []
    assert any("consumer restarted" in p for p in phase_problems(report, expected, earlier, ends))


@pytest.mark.parametrize(
    ("change", "wanted"),
    [
        (lambda r: r["errors"].append("consumer crashed"), "driver reported errors"),
        (lambda r: r["records"].pop(), "never delivered: [(2, 99)]"),
        (lambda r: r["records"].__setitem__(0, r["records"][1]), "delivered more than once"),
        (lambda r: r["records"].__setitem__(0, [0, 49, "key-147", "value-147"]), "earlier phase delivered again"),
        (lambda r: r["records"].__setitem__(0, [0, 100, "key-300", "value-300"]), "nobody produced"),
        (lambda r: r["records"][3].__setitem__(3, "value-x"), "key/value differ"),
        (lambda r: r["records"].__setitem__(slice(0, 2), r["records"][1::-1]), "partition 0: offsets not in order"),
        (lambda r: r["committed"].update({"1": 99}), "driver committed"),
        (lambda r: r["committed"].pop("2"), "driver committed"),
        (lambda r: r["records"].append([0, 50, "key-150", "value-150"]), "151 records processed"),
        (lambda r: r.update(restarts=["KafkaJSProtocolError REBALANCE_IN_PROGRESS: ..."]), "consumer restarted"),
    ],
)
def test_phase_checker_reports_each_defect(change, wanted: str) -> None:  # type: ignore[no-untyped-def]
    report, expected, earlier = _phase_two()
    change(report)
    problems = phase_problems(report, expected, earlier, dict.fromkeys(range(PARTITIONS), 100))
    assert any(wanted in p for p in problems), problems
