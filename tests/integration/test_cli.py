"""The `barnabas` client commands as a user runs them: real processes against a real broker.

Every case here was a surprise once: a read-only command that created a topic, a delete that took
every group's offsets with it, an unreachable cluster that hung for minutes in hundreds of client
log lines, tracebacks for bad values, a wait forever on a partition that does not exist.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]


def barnabas(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the real command; stdin is closed unless given."""
    return subprocess.run(
        [sys.executable, "-m", "barnabas", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def ok(*args: str, stdin: bytes | None = None) -> str:
    done = barnabas(*args, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a failed command (asserting it failed, in one line, without a traceback)."""
    err = done.stderr.decode()
    assert done.returncode != 0, (done.stdout, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("cli") / "data").start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    """A topic with 3 partitions and 30 keyed records, 10 per partition."""
    ok("topics", "create", "cli", "--partitions", "3", "-b", broker.bootstrap)
    lines = b"".join(f"k{i}:v{i}\n".encode() for i in range(30))
    for partition in range(3):
        part = b"".join(f"k{i}:v{i}\n".encode() for i in range(partition * 10, partition * 10 + 10))
        ok("produce", "cli", "--key-separator", ":", "--partition", str(partition), "-b", broker.bootstrap, stdin=part)
    assert lines
    return "cli"


def topic_names(broker: BrokerProcess) -> set[str]:
    return {row["topic"] for row in json.loads(ok("topics", "list", "--internal", "--json", "-b", broker.bootstrap))}


# --- read-only commands create nothing; internal topics are kept ---------------------------------


def test_describing_a_missing_topic_is_an_error_and_creates_nothing(broker: BrokerProcess) -> None:
    assert one_line_error(barnabas("topics", "describe", "typo", "-b", broker.bootstrap)) == (
        "barnabas topics: topic typo does not exist"
    )
    assert "typo" not in topic_names(broker)


def test_a_dry_run_reset_on_a_missing_topic_creates_nothing(broker: BrokerProcess) -> None:
    done = barnabas("groups", "reset-offsets", "g", "--topic", "nosuch", "--to-latest", "-b", broker.bootstrap)
    assert one_line_error(done) == "barnabas groups: topic nosuch does not exist"
    assert "nosuch" not in topic_names(broker)


def test_internal_topics_cannot_be_deleted_and_are_listed_only_on_request(broker: BrokerProcess, topic: str) -> None:
    ok("consume", topic, "--group", "keeper", "--offset", "earliest", "-n", "1", "-b", broker.bootstrap)
    done = barnabas("topics", "delete", "__consumer_offsets", "-b", broker.bootstrap)
    assert (
        one_line_error(done) == "barnabas topics: topic __consumer_offsets is an internal topic and cannot be deleted"
    )
    assert "__consumer_offsets" in topic_names(broker)
    listed = {row["topic"] for row in json.loads(ok("topics", "list", "--json", "-b", broker.bootstrap))}
    assert topic in listed and "__consumer_offsets" not in listed


# --- an unreachable cluster: one line, soon -----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "list"],
        ["produce", "t"],
        ["produce", "t", "--count", "10"],
        ["consume", "t"],
        ["groups", "list"],
        ["groups", "describe", "g"],
        ["cluster", "status"],
        ["cluster", "log-dirs"],
        ["cluster", "cordon", "--broker", "1"],
        ["cluster", "unregister", "--broker", "1"],
        ["groups", "delete-offsets", "g", "--topic", "t"],
        ["partitions", "reassignments"],
        ["partitions", "reassign", "--topic", "t", "-p", "0", "--replicas", "0"],
        ["pipeline", "generate", "telemetry", "-n", "1"],
    ],
    ids=" ".join,
)
def test_an_unreachable_cluster_is_one_line_within_the_timeout(command: list[str]) -> None:
    started = time.monotonic()
    done = barnabas(*command, "-b", f"127.0.0.1:{free_port()}", "--timeout", "2")
    line = one_line_error(done)
    assert " cannot reach the cluster at 127.0.0.1:" in line and " within 2 s" in line, line
    assert time.monotonic() - started < 20


# --- bad values: one line, never a traceback -----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "create", "x", "--partitions", "-5"],
        ["topics", "create", "x", "--replication-factor", "0"],
        ["topics", "create", "x", "--config", "retention.ms"],
        ["topics", "create", "bad/name"],
        ["topics", "alter-config", "cli"],
        ["topics", "add-partitions", "cli", "--partitions", "2"],
        ["topics", "describe"],
        ["produce", "cli", "--count", "-5"],
        ["produce", "cli", "--size", "x"],
        ["produce", "cli", "--header", "novalue"],
        ["produce", "cli", "--partition", "99"],
        ["produce", "__consumer_offsets", "--count", "1"],
        ["produce", "cli", "--format", "%k%v"],
        ["produce", "cli", "--format", "%v", "--count", "1"],
        ["consume", "cli", "--partition", "99"],
        ["consume", "cli", "--max-messages", "0"],
        ["consume", "cli", "--offset", "abc"],
        ["consume", "cli", "--format", "%z"],
        ["consume", "cli", "--group", "g", "--partition", "0"],
        ["consume", "cli", "--idle-timeout", "-1"],
        ["consume", "nosuch"],
        ["groups", "reset-offsets", "g", "--topic", "cli", "--to-offset", "-5", "--execute"],
        ["groups", "reset-offsets", "g", "--topic", "cli", "--to-datetime", "yesterday"],
        ["groups", "describe", "nosuch"],
        ["groups", "describe"],
        ["groups", "delete", "nosuch"],
        ["topics", "list", "-X", "nonsense"],
        ["topics", "list", "-X", "no.such.setting=1"],
        ["topics", "list", "--command-config", "/nonexistent/client.properties"],
        ["topics", "list", "--timeout", "0"],
        ["cluster", "status", "--timeout", "-1"],
        ["pipeline", "generate", "telemetry", "-n", "0"],
        ["pipeline", "generate", "telemetry", "-n", "5", "--duplicate-rate", "2"],
        ["records", "delete", "cli", "--before", "-1"],
        ["records", "delete", "cli", "--before", "1", "--partition", "7"],
        ["records", "delete", "__consumer_offsets", "--all"],
        ["partitions", "elect-leaders", "--partition", "0"],
        ["partitions", "elect-leaders", "--topic", "nosuch"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0", "--replicas", "0,0"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0", "--replicas", "0,7"],
        ["partitions", "reassign", "--topic", "cli", "-p", "9", "--replicas", "0"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0", "--replicas", "zero"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0"],
        ["partitions", "reassign", "--topic", "nosuch", "-p", "0", "--replicas", "0"],
        ["partitions", "reassign", "--file", "/nonexistent/plan.json"],
        ["partitions", "reassign", "--file", "/dev/null"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0", "--cancel"],
        ["partitions", "reassign", "--topic", "cli", "-p", "0", "--replicas", "0", "--wait", "0"],
        ["groups", "delete-offsets", "nosuch", "--topic", "cli"],
        ["groups", "delete-offsets", "g", "--topic", "nosuch"],
        ["groups", "delete-offsets", "g", "--topic", "cli:x"],
        ["groups", "delete-offsets", "g", "--topic", "cli:7"],
        ["groups", "delete-offsets", "g", "--topic", ":0"],
        ["cluster", "log-dirs", "--topic", "nosuch"],
        ["nosuchcommand"],
    ],
    ids=" ".join,
)
def test_bad_values_get_one_line_and_a_failing_exit(broker: BrokerProcess, topic: str, command: list[str]) -> None:
    assert topic == "cli"
    line = one_line_error(barnabas(*command, "-b", broker.bootstrap))
    assert line.startswith("barnabas"), line


# --- what each command does ---------------------------------------------------------------------


def test_connection_options_go_anywhere_on_the_line(broker: BrokerProcess, topic: str) -> None:
    before = ok("-b", broker.bootstrap, "topics", "list")
    assert topic in before
    assert ok("topics", "-b", broker.bootstrap, "list") == before
    assert ok("topics", "list", "--bootstrap-server", broker.bootstrap) == before
    done = barnabas("topics", "list", env={"BARNABAS_BOOTSTRAP": broker.bootstrap})
    assert done.returncode == 0 and done.stdout.decode() == before


def test_client_settings_come_from_a_properties_file_and_x(broker: BrokerProcess, tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(f"# a Kafka client config\nbootstrap.servers={broker.bootstrap}\nclient.id: cli-test\n")
    assert "cli" in ok("topics", "list", "--command-config", str(properties), "-b", "127.0.0.1:1")
    assert "cli" in ok("topics", "list", "-X", f"bootstrap.servers={broker.bootstrap}", "-b", "127.0.0.1:1")


def test_produce_sends_binary_stdin_unchanged_and_sums_up(broker: BrokerProcess) -> None:
    ok("topics", "create", "binary", "--partitions", "1", "-b", broker.bootstrap)
    values = [os.urandom(40).replace(b"\n", b"") for _ in range(5)]
    summary = ok("produce", "binary", "-b", broker.bootstrap, stdin=b"\n".join(values) + b"\n")
    assert summary.startswith("produced 5 records ("), summary
    out = barnabas("consume", "binary", "--offset", "earliest", "-n", "5", "-f", "%v\\n", "-b", broker.bootstrap)
    assert out.returncode == 0
    assert out.stdout.split(b"\n")[:5] == values


def test_produce_with_headers_to_a_partition_and_consume_with_a_format(broker: BrokerProcess) -> None:
    ok("topics", "create", "formatted", "--partitions", "2", "-b", broker.bootstrap)
    ok("produce", "formatted", "--partition", "1", "-H", "a=1", "-H", "b=2", "--key-separator", "=",
       "-b", broker.bootstrap, stdin=b"key=value\n")  # fmt: skip
    out = ok("consume", "formatted", "-o", "earliest", "-n", "1", "-f", "%t %p %o %k %v [%h] 100%%\\n",
             "-b", broker.bootstrap)  # fmt: skip
    assert out == "formatted 1 0 key value [a=1,b=2] 100%\n"
    record = json.loads(ok("consume", "formatted", "-o", "earliest", "-n", "1", "--json", "-b", broker.bootstrap))
    assert (record["partition"], record["key"], record["value"], record["headers"]) == (
        1,
        "key",
        "value",
        {"a": "1", "b": "2"},
    )


def test_produce_by_a_template_reads_what_consume_writes_by_it(broker: BrokerProcess) -> None:
    ok("topics", "create", "templated", "-p", "2", "-b", broker.bootstrap)
    written = b"1|h=x|k1|first value\n0||k2|second\n1|a=1,b=2|k3|third"
    out = ok("produce", "templated", "--format", "%p|%h|%k|%v\\n", "-b", broker.bootstrap, stdin=written)
    assert out.startswith("produced 3 records"), out
    read = ok("consume", "templated", "--offset", "earliest", "-n", "3", "--format", "%p|%h|%k|%v\\n",
              "-b", broker.bootstrap)  # fmt: skip
    assert sorted(read.splitlines()) == sorted(written.decode().splitlines())
    done = barnabas("produce", "templated", "-f", "%k %v\\n", "-b", broker.bootstrap, stdin=b"k v\nno-space\n")
    assert done.stdout.decode().startswith("produced 1 records"), "what came before the bad record is sent"
    assert one_line_error(done) == "barnabas produce: --format: record 2 ends before its %k"


def test_pipeline_generate_sums_up_as_json(broker: BrokerProcess) -> None:
    summary = json.loads(ok("pipeline", "generate", "telemetry", "-n", "20", "--topic", "generated", "--json",
                            "-b", broker.bootstrap))  # fmt: skip
    assert (summary["topic"], summary["readings"]) == ("generated", 20) and summary["seconds"] > 0
    described = json.loads(ok("topics", "describe", "generated", "--json", "-b", broker.bootstrap))
    assert sum(p["latest_offset"] for p in described["partitions"]) >= 20


def test_consume_offsets_from_the_end_by_number_and_by_time(broker: BrokerProcess, topic: str) -> None:
    last = ok("consume", topic, "-p", "0", "-o", "-2", "-n", "2", "-f", "%o\\n", "-b", broker.bootstrap)
    assert last.split() == ["8", "9"]
    third = ok("consume", topic, "-p", "1", "-o", "3", "-n", "1", "-f", "%o %k\\n", "-b", broker.bootstrap)
    assert third == "3 k13\n"
    everything = ok("consume", topic, "-p", "2", "-o", "@0", "-n", "1", "-f", "%o\\n", "-b", broker.bootstrap)
    assert everything == "0\n"


def test_a_reader_that_goes_away_ends_consume_quietly(broker: BrokerProcess, topic: str) -> None:
    command = [sys.executable, "-m", "barnabas", "consume", topic, "-o", "earliest", "-b", broker.bootstrap]
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    try:
        reader.stdout.readline()
        reader.stdout.close()  # `| head -1`
        assert reader.wait(60) == 0
    finally:
        reader.kill()  # stopped by pid whatever happened (a no-op once it has exited)
        reader.wait()
    assert b"Traceback" not in reader.stderr.read()


def test_a_reader_that_goes_away_after_the_last_record_ends_consume(broker: BrokerProcess) -> None:
    """`consume T | head -1` on a topic of one record: nothing more is ever written, so no write can fail;
    consume must notice the closed pipe while it waits."""
    ok("topics", "create", "single", "-p", "1", "-b", broker.bootstrap)
    ok("produce", "single", "-b", broker.bootstrap, stdin=b"only\n")
    command = [sys.executable, "-m", "barnabas", "consume", "single", "-o", "earliest", "-b", broker.bootstrap]
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    try:
        assert reader.stdout.readline() == b"only\n"
        reader.stdout.close()
        assert reader.wait(30) == 0
    finally:
        reader.kill()  # stopped by pid whatever happened (a no-op once it has exited)
        reader.wait()
    assert b"Traceback" not in reader.stderr.read()


def test_topics_describe_alter_config_and_add_partitions(broker: BrokerProcess) -> None:
    ok("topics", "create", "grown", "-p", "1", "-c", "retention.ms=60000", "-b", broker.bootstrap)
    ok("produce", "grown", "-b", broker.bootstrap, stdin=b"a\nb\nc\n")
    described = json.loads(ok("topics", "describe", "grown", "--json", "-b", broker.bootstrap))
    assert described["configs"] == {"retention.ms": "60000"}
    assert [(p["earliest_offset"], p["latest_offset"]) for p in described["partitions"]] == [(0, 3)]
    ok("topics", "alter-config", "grown", "--set", "retention.ms=120000", "--set", "segment.ms=3600000",
       "-b", broker.bootstrap)  # fmt: skip
    ok("topics", "alter-config", "grown", "--delete", "segment.ms", "-b", broker.bootstrap)
    described = json.loads(ok("topics", "describe", "grown", "--json", "-b", broker.bootstrap))
    assert described["configs"] == {"retention.ms": "120000"}
    assert ok("topics", "add-partitions", "grown", "--partitions", "4", "-b", broker.bootstrap).strip() == (
        "topic grown: 1 -> 4 partitions"
    )
    assert len(json.loads(ok("topics", "describe", "grown", "--json", "-b", broker.bootstrap))["partitions"]) == 4
    assert "exists already" in ok("topics", "create", "grown", "--if-not-exists", "-b", broker.bootstrap)
    ok("topics", "delete", "grown", "-b", broker.bootstrap)
    assert "does not exist" in ok("topics", "delete", "grown", "--if-exists", "-b", broker.bootstrap)


def test_a_keyless_record_to_a_compacted_topic_says_why_it_was_refused(broker: BrokerProcess) -> None:
    ok("topics", "create", "compacted", "-p", "1", "-c", "cleanup.policy=compact", "-b", broker.bootstrap)
    line = one_line_error(barnabas("produce", "compacted", "-b", broker.bootstrap, stdin=b"no key\n"))
    assert "topic compacted is compacted and every record needs a key" in line, line


def test_groups_describe_reset_and_delete(broker: BrokerProcess, topic: str) -> None:
    ok("consume", topic, "--group", "readers", "--offset", "earliest", "-n", "30", "-b", broker.bootstrap)
    report = json.loads(ok("groups", "describe", "readers", "--json", "-b", broker.bootstrap))
    assert {(p["partition"], p["committed"], p["lag"]) for p in report["partitions"]} == {
        (0, 10, 0),
        (1, 10, 0),
        (2, 10, 0),
    }
    assert "readers" in {g["group"] for g in json.loads(ok("groups", "list", "--json", "-b", broker.bootstrap))}
    every = json.loads(ok("groups", "describe", "--all-groups", "--members", "--json", "-b", broker.bootstrap))
    assert "readers" in {g["group"] for g in every}

    def committed() -> dict[int, int]:
        document = json.loads(ok("groups", "describe", "readers", "--json", "-b", broker.bootstrap))
        return {p["partition"]: p["committed"] for p in document["partitions"]}

    plan = json.loads(ok("groups", "reset-offsets", "readers", "--all-topics", "--shift-by", "-4", "--json",
                         "-b", broker.bootstrap))  # fmt: skip
    assert [p["new"] for p in plan["partitions"]] == [6, 6, 6] and committed() == {0: 10, 1: 10, 2: 10}, "dry run"
    out = ok("groups", "reset-offsets", "readers", "--topic", topic, "--to-offset", "99999999", "--execute",
             "-b", broker.bootstrap)  # fmt: skip
    assert "is higher than the latest offset; it is set to 10" in out
    assert committed() == {0: 10, 1: 10, 2: 10}, "clamped to the log end, as Kafka's tool does"
    ok("groups", "reset-offsets", "readers", "--topic", topic, "--to-datetime", "2000-01-01T00:00:00", "--execute",
       "-b", broker.bootstrap)  # fmt: skip
    assert committed() == {0: 0, 1: 0, 2: 0}
    ok("groups", "delete", "readers", "-b", broker.bootstrap)
    assert one_line_error(barnabas("groups", "describe", "readers", "-b", broker.bootstrap)) == (
        "barnabas groups: consumer group readers does not exist"
    )


def test_records_delete_moves_the_log_start_and_elections_report_each_partition(broker: BrokerProcess) -> None:
    ok("topics", "create", "trimmed", "-p", "2", "-b", broker.bootstrap)
    for partition in (0, 1):
        ok("produce", "trimmed", "-p", str(partition), "-b", broker.bootstrap, stdin=b"a\nb\nc\nd\n")
    assert ok("records", "delete", "trimmed", "--before", "3", "-p", "0", "-b", broker.bootstrap).strip() == (
        "trimmed-0: records before 3 deleted"
    )
    starts = json.loads(ok("records", "delete", "trimmed", "--all", "-p", "1", "--json", "-b", broker.bootstrap))
    assert starts["log_start_offsets"] == {"1": 4}
    described = json.loads(ok("topics", "describe", "trimmed", "--json", "-b", broker.bootstrap))
    assert [(p["earliest_offset"], p["latest_offset"]) for p in described["partitions"]] == [(3, 4), (4, 4)]
    outcomes = json.loads(ok("partitions", "elect-leaders", "--topic", "trimmed", "--json", "-b", broker.bootstrap))
    assert outcomes == {"trimmed-0": "not needed", "trimmed-1": "not needed"}


def test_log_dirs_and_topic_sizes_count_the_bytes_on_disk(broker: BrokerProcess) -> None:
    ok("topics", "create", "sized", "-p", "2", "-b", broker.bootstrap)
    ok("produce", "sized", "-p", "1", "-b", broker.bootstrap, stdin=b"x" * 1000 + b"\n")
    log_dirs = json.loads(ok("cluster", "log-dirs", "--topic", "sized", "--json", "-b", broker.bootstrap))
    on_disk = {
        r["partition"]: sum(f.stat().st_size for f in Path(r["log_dir"], f"sized-{r['partition']}").glob("*.log"))
        for r in log_dirs["replicas"]
    }
    assert {r["partition"]: r["size_bytes"] for r in log_dirs["replicas"]} == on_disk
    assert on_disk[0] == 0 and on_disk[1] > 1000
    (volume,) = log_dirs["log_dirs"]
    assert volume["broker"] == 0 and 0 < volume["usable_bytes"] <= volume["total_bytes"]
    described = json.loads(ok("topics", "describe", "sized", "--json", "-b", broker.bootstrap))
    assert [p["size_bytes"] for p in described["partitions"]] == [on_disk[0], on_disk[1]]
    assert "size" in ok("topics", "describe", "sized", "-b", broker.bootstrap).splitlines()[1]


def test_groups_delete_offsets_removes_them_but_not_while_a_member_reads(broker: BrokerProcess, topic: str) -> None:
    ok("consume", topic, "--group", "pruned", "--offset", "earliest", "-n", "30", "-b", broker.bootstrap)
    assert json.loads(ok("groups", "delete-offsets", "pruned", "--topic", f"{topic}:0,2", "--json",
                         "-b", broker.bootstrap)) == {f"{topic}-0": "deleted", f"{topic}-2": "deleted"}  # fmt: skip
    report = json.loads(ok("groups", "describe", "pruned", "--json", "-b", broker.bootstrap))
    assert {p["partition"] for p in report["partitions"]} == {1}
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pruned", "auto.offset.reset": "earliest"})
    try:
        member.subscribe([topic])
        while not member.assignment():
            member.poll(0.2)
        line = one_line_error(barnabas("groups", "delete-offsets", "pruned", "--topic", topic, "-b", broker.bootstrap))
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in line, line
    finally:
        member.close()


def test_partitions_reassign_moves_nothing_it_cannot_and_lists_moves(broker: BrokerProcess, tmp_path: Path) -> None:
    ok("topics", "create", "moved", "-p", "2", "-b", broker.bootstrap)
    assert ok("partitions", "reassign", "--topic", "moved", "-p", "1", "--replicas", "0", "--wait",
              "-b", broker.bootstrap).strip() == "moved-1: done"  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [0]}]}))
    assert json.loads(
        ok("partitions", "reassign", "--file", str(plan), "--wait", "--json", "-b", broker.bootstrap)
    ) == {"moved-0": "done"}
    assert json.loads(ok("partitions", "reassignments", "--json", "-b", broker.bootstrap)) == {}
    assert ok("partitions", "reassignments", "-b", broker.bootstrap).strip() == "no reassignment in progress"
    line = one_line_error(barnabas("partitions", "reassign", "--topic", "moved", "-p", "0", "--replicas", "0,3",
                                   "-b", broker.bootstrap))  # fmt: skip
    assert line == "barnabas partitions: moved-0: broker 3 is not in the cluster (brokers: 0)", line


# --- the broker's own lines ----------------------------------------------------------------------


def test_a_misspelt_setting_in_the_environment_stops_the_broker(tmp_path: Path) -> None:
    done = barnabas(
        "broker", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
        env={"BARNABAS_LOG_RETENSION_MS": "5"},
    )  # fmt: skip
    line = one_line_error(done)
    assert "BARNABAS_LOG_RETENSION_MS (did you mean BARNABAS_LOG_RETENTION_MS?)" in line, line


def test_the_broker_logs_what_a_person_can_read(broker_factory: Callable[..., BrokerProcess]) -> None:
    """No warning about its own files, one line per topic event, "closed" on a clean stop, no warning
    when a reader hangs up."""
    fresh = broker_factory().start()
    ok("topics", "create", "chatty", "-p", "20", "-b", fresh.bootstrap)
    ok("produce", "chatty", "--count", "2000", "--size", "1000", "-b", fresh.bootstrap)
    ok(
        "consume", "chatty", "--group", "g", "-o", "earliest", "-n", "1", "-b", fresh.bootstrap
    )  # creates the offsets topic
    reader = subprocess.Popen(
        [sys.executable, "-m", "barnabas", "consume", "chatty", "-o", "earliest", "-b", fresh.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert reader.stdout is not None
    reader.stdout.readline()
    reader.stdout.close()
    reader.wait(60)
    assert fresh.stop() == 0
    fresh.start()
    assert fresh.stop() == 0
    text = fresh.log_text()
    warnings = [line for line in text.splitlines() if " WARNING " in line or " ERROR " in line]
    assert warnings == [], warnings
    assert "not a partition dir" not in text
    assert "-> lost" not in text and "closed" in text
    offsets_lines = [line for line in text.splitlines() if "__consumer_offsets" in line and " INFO " in line]
    assert 1 <= len(offsets_lines) <= 6, offsets_lines


def test_the_readme_quickstart_works_as_written(broker_factory: Callable[..., BrokerProcess]) -> None:
    """The README's quickstart block, run line by line in the repository as a new user would (the broker
    `make run` starts is stood in for by one on a free port, named by BARNABAS_BOOTSTRAP)."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```", 2)[1]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands[0] == "source .venv/bin/activate"
    fresh = broker_factory().start()
    done = subprocess.run(
        ["bash", "-e", "-c", "\n".join(commands)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "BARNABAS_BOOTSTRAP": fresh.bootstrap},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "created topic orders" in done.stdout
    assert "hello, barnabas" in done.stdout
    assert "topic orders: 3 partitions" in done.stdout


def test_bash_completion_completes_commands_and_actions() -> None:
    script = ok("completion", "bash")
    probe = (
        f"{script}\n"
        'COMP_WORDS=(barnabas top); COMP_CWORD=1; _shtab_barnabas; echo "${COMPREPLY[@]}"\n'
        'COMP_WORDS=(barnabas topics al); COMP_CWORD=2; _shtab_barnabas; echo "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.split("\n")[:2] == ["topics", "alter-config"], done.stderr
