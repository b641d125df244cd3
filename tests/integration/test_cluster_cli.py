"""`barnabas cluster up/down/status` end to end: real broker processes, real librdkafka clients.

Every process a test starts (the `cluster` command and, through it, the brokers) is stopped by the test
by pid: brokers are found through cluster.json or by their data dir under the test's tmp dir in /proc,
never by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)

STOP_WAIT_S = 15.0


def _cluster(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited child of init that is not reaped yet has stopped running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _pids_under(root: Path) -> list[int]:
    """Pids of processes whose command line names a path under ``root`` (this test's brokers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if any(arg.startswith(str(root)) for arg in argv) and _running(int(entry.name)):
                found.append(int(entry.name))
    return found


def _wait_stopped(pids: list[int], timeout: float = STOP_WAIT_S) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _state(data_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())
    return document


def _broker_pids(data_dir: Path) -> list[int]:
    return [int(b["pid"]) for b in _state(data_dir)["brokers"]]


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """The cluster's directory; whatever still runs from it afterwards is SIGKILLed by pid."""
    data_dir = tmp_path / "cluster"
    yield data_dir
    for pid in _pids_under(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_stopped(_pids_under(tmp_path), 5)


def _up_detached(data_dir: Path, brokers: int = 3, *extra: str) -> str:
    done = _cluster(
        "up", "--brokers", str(brokers), "--base-port", "0", "--detach", "--data-dir", str(data_dir), *extra
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return lines[0]


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    errors: list[str] = []
    delivered: list[int] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error.str())
        else:
            delivered.append(message.partition())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), key=str(i).encode(), on_delivery=on_delivery)
    assert producer.flush(40) == 0
    assert errors == []
    assert len(delivered) == count


def _create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)
    admin.create_topics([topic], operation_timeout=30)[name].result(30)


def test_detached_cluster_serves_a_producer_and_down_stops_it(cluster_dir: Path) -> None:
    bootstrap = _up_detached(cluster_dir)
    endpoints = bootstrap.split(",")
    assert len(endpoints) == 3
    assert all(e.startswith("127.0.0.1:") and int(e.rsplit(":", 1)[1]) > 0 for e in endpoints)
    state = _state(cluster_dir)
    assert state["bootstrap"] == bootstrap
    assert [b["id"] for b in state["brokers"]] == [0, 1, 2]
    pids = _broker_pids(cluster_dir)
    assert all(_running(pid) for pid in pids)
    for broker in state["brokers"]:
        assert Path(broker["log"]).exists()
        assert Path(broker["data_dir"]) == cluster_dir.resolve() / f"broker-{broker['id']}"
    assert (cluster_dir / "coordination.db").exists()  # the shared default coordination

    _create_topic(bootstrap, "orders", partitions=3, replication_factor=3)
    _produce(bootstrap, "orders", 30)

    done = _cluster("down", "--data-dir", str(cluster_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "stopped brokers: 0, 1, 2"
    assert _wait_stopped(pids) == []
    assert not (cluster_dir / "cluster.json").exists()

    again = _cluster("down", "--data-dir", str(cluster_dir))
    assert again.returncode == 1
    assert again.stderr.strip().splitlines()[-1].startswith("barnabas cluster: no cluster.json in ")


def test_foreground_cluster_stops_its_brokers_on_sigint(cluster_dir: Path, tmp_path: Path) -> None:
    stderr_path = tmp_path / "up.err"
    with stderr_path.open("w") as stderr:
        up = subprocess.Popen(
            [sys.executable, "-m", "barnabas", "cluster", "up", "--brokers", "3", "--base-port", "0",
             "--data-dir", str(cluster_dir)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(up.stdout.readline() if up.stdout else ""))
        reader.start()
        reader.join(90)
        assert line and line[0].strip(), stderr_path.read_text()[-3000:]
        bootstrap = line[0].strip()
        assert len(bootstrap.split(",")) == 3
        state = _state(cluster_dir)
        assert state["supervisor_pid"] == up.pid
        pids = _broker_pids(cluster_dir)
        assert all(_running(pid) for pid in pids)
        _produce(bootstrap, "foreground", 5)

        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0, stderr_path.read_text()[-3000:]
        # The brokers were its children and it reaped them: they are gone, not zombies.
        assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
        assert not (cluster_dir / "cluster.json").exists()
        assert "SIGINT: stopping 3 brokers" in stderr_path.read_text()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_sigterm_to_a_foreground_cluster_via_down(cluster_dir: Path, tmp_path: Path) -> None:
    """`cluster down` on a foreground cluster asks its `cluster up` to stop them in order."""
    with (tmp_path / "up.err").open("w") as stderr:
        up = subprocess.Popen(
            [sys.executable, "-m", "barnabas", "cluster", "up", "--brokers", "2", "--base-port", "0",
             "--metadata-wait", "2", "--data-dir", str(cluster_dir)],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
        )  # fmt: skip
    try:
        assert up.stdout is not None
        assert up.stdout.readline().count(",") == 1
        pids = _broker_pids(cluster_dir)
        done = _cluster("down", "--data-dir", str(cluster_dir))
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == "stopped brokers: 0, 1"
        assert up.wait(30) == 0
        assert _wait_stopped(pids) == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_status_lists_brokers_racks_and_partitions(cluster_dir: Path) -> None:
    bootstrap = _up_detached(cluster_dir, 3, "--rack-per-broker")
    _create_topic(bootstrap, "orders", partitions=3, replication_factor=3)
    first = bootstrap.split(",")[0]

    deadline = time.monotonic() + 30
    while True:
        done = _cluster("status", "--bootstrap-server", first, "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
        orders = [p for p in report["partitions"] if p["topic"] == "orders"]
        settled = len(orders) == 3 and all(len(p["isr"]) == 3 for p in orders)
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    assert [b["id"] for b in report["brokers"]] == [0, 1, 2]
    assert [f"{b['host']}:{b['port']}" for b in report["brokers"]] == bootstrap.split(",")
    assert [b["rack"] for b in report["brokers"]] == ["rack-0", "rack-1", "rack-2"]
    assert report["controller_id"] in (0, 1, 2)
    assert [b["id"] for b in report["brokers"] if b["controller"]] == [report["controller_id"]]
    assert report["cluster_id"]
    assert sorted(p["partition"] for p in orders) == [0, 1, 2]
    for partition in orders:
        assert sorted(partition["replicas"]) == [0, 1, 2]
        assert partition["leader"] in partition["replicas"]
        assert sorted(partition["isr"]) == [0, 1, 2]
    # Preferred leaders are spread over the brokers (Kafka's round-robin placement).
    assert sorted(p["replicas"][0] for p in orders) == [0, 1, 2]
    assert report["under_replicated_partitions"] == 0
    assert report["offline_partitions"] == 0

    text = _cluster("status", "-b", bootstrap)
    assert text.returncode == 0, text.stderr[-3000:]
    assert f"3 brokers, controller {report['controller_id']}" in text.stdout
    assert "rack-2" in text.stdout
    assert "controller" in text.stdout
    assert text.stdout.strip().splitlines()[-1].endswith("0 under-replicated, 0 offline")

    assert _cluster("down", "--data-dir", str(cluster_dir)).returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_status_of_an_unreachable_cluster_is_one_line() -> None:
    started = time.monotonic()
    done = _cluster("status", "--bootstrap-server", f"127.0.0.1:{_free_port()}", "--timeout", "2")
    assert done.returncode == 1
    assert time.monotonic() - started < 30
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("barnabas cluster: cannot reach the cluster at 127.0.0.1:")


def test_a_broker_failing_at_startup_stops_the_others(cluster_dir: Path, tmp_path: Path) -> None:
    done = _cluster(
        "up", "--brokers", "2", "--base-port", "0", "--data-dir", str(cluster_dir), "--set", "log.retention.ms=abc"
    )
    assert done.returncode == 1
    reason = done.stderr.strip().splitlines()[-1]
    assert reason.startswith("barnabas cluster: broker ")
    assert "exited with code 1 during startup" in reason
    assert "log.retention.ms" in reason  # the tail of the broker's log
    assert _wait_stopped(_pids_under(tmp_path)) == []
    assert not (cluster_dir / "cluster.json").exists()


def test_up_refuses_a_second_cluster_in_the_same_dir(cluster_dir: Path) -> None:
    _up_detached(cluster_dir, 1, "--metadata-wait", "0")
    pids = _broker_pids(cluster_dir)
    again = _cluster("up", "--brokers", "1", "--base-port", "0", "--detach", "--data-dir", str(cluster_dir))
    assert again.returncode == 1
    assert "a cluster is already running from" in again.stderr.strip().splitlines()[-1]
    assert _broker_pids(cluster_dir) == pids
    assert _cluster("down", "--data-dir", str(cluster_dir)).returncode == 0
    assert _wait_stopped(pids) == []


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--brokers", "0"], "--brokers must be positive"),
        (["--brokers", "2", "--set", "nokey"], "--set 'nokey': expected KEY=VALUE"),
        (["--brokers", "2", "--base-port", "65535"], "--base-port 65535: ports 65535..65536 are not valid"),
    ],
)
def test_up_rejects_bad_arguments_with_one_line(args: list[str], reason: str, cluster_dir: Path) -> None:
    done = _cluster("up", "--data-dir", str(cluster_dir), *args)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"barnabas cluster: {reason}"]
