"""A proxy node's hot restart in front of a real cluster: a new process takes the listening sockets over.

The node serves hot restarts (``proxy.hot.restart.socket``); ``ProxyNode.hot_restart`` starts a new
``barnabas proxy --takeover`` process and waits until it serves and the old one has drained and exited.
Real clients work through it the whole time: a confluent-kafka producer (acks=all) and a consumer
group see no failed request and lose no acknowledged record, and every connection attempt made while
the sockets change hands, to the Kafka listener and to the admin endpoint, is accepted and answered.
The ways a hot restart can fail end in one line, and the running node serves on.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from barnabas.testing import BrokerCluster
from barnabas.testing.process import free_ports
from barnabas.testing.proxy import ProxyNode
from tests.support.polling import wait_until
from tests.support.raw_client import API_VERSIONS, RawKafkaClient, decode_response, encode_request

pytestmark = pytest.mark.timeout(180)

TIMEOUT_S = 30.0
PARTITIONS = 3
ADMIN = {"admin.listeners": "http://127.0.0.1:0"}
API_VERSIONS_REQUEST = ApiVersionsRequest(client_software_name="hot-restart", client_software_version="1")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    cluster = BrokerCluster(tmp_path_factory.mktemp("cluster"), 1, properties={"group.initial.rebalance.delay.ms": "0"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def node(cluster: BrokerCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyNode]:
    """One proxy node for every test: each leaves it serving (hot-restarted or not)."""
    directory = tmp_path_factory.mktemp("proxy")
    node = ProxyNode(directory, cluster.bootstrap, free_ports(1)[0], hot_restart=True, properties=ADMIN)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_a_producer_and_a_consumer_carry_on_through_a_hot_restart(cluster: BrokerCluster, node: ProxyNode) -> None:
    topic = f"hot-restart-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=1)
    acked: list[bytes] = []
    failed: list[str] = []
    consumed: set[bytes] = set()
    stop, produced = threading.Event(), threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 1})  # fmt: skip

        def delivered(error: KafkaError | None, message: object) -> None:
            if error is None:
                acked.append(message.value())  # type: ignore[attr-defined]
            else:
                failed.append(f"delivery: {error}")

        i = 0
        while not stop.is_set():
            producer.produce(topic, value=f"r-{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
            producer.poll(0.001)
            i += 1
        if producer.flush(TIMEOUT_S) != 0:
            failed.append("records still unacknowledged at the end")
        produced.set()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe([topic])
        deadline = None
        while not (produced.is_set() and consumed >= set(acked)):
            deadline = deadline or (time.monotonic() + TIMEOUT_S if produced.is_set() else None)
            if deadline is not None and time.monotonic() > deadline:
                break
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                failed.append(f"consume: {message.error()}")
                continue
            consumed.add(message.value() or b"")
        consumer.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(acked) >= 500 and len(consumed) >= 500, "500 records are acknowledged and consumed")
        old_pid = node.pid
        old = node.hot_restart()
        at_restart = len(acked)
        assert node.pid != old_pid and node.running
        assert old.exit_code == 0, old.tail()
        wait_until(lambda: len(acked) >= at_restart + 500, "500 more records are acknowledged by the new process")
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT_S + 10)
    assert not failed, failed[:5]
    assert set(acked) <= consumed, f"{len(set(acked) - consumed)} acknowledged records never consumed"
    log = node.log_text()
    assert f"hot restart: took over from pid {old_pid}" in log
    assert f"pid {node.pid} serves the listeners now; draining client connections" in log


def test_every_connection_opened_during_a_hot_restart_is_accepted(node: ProxyNode) -> None:
    """Kafka and admin connections opened back to back, before, during and after the handover: every one is
    accepted and answered (by one process or the other), none is refused, and some were opened right as the
    old process stopped accepting."""
    admin_port = node.admin_port
    outcomes: dict[str, list[tuple[float, str]]] = {"kafka": [], "admin": []}
    stop = threading.Event()

    def kafka_connection() -> str:
        with RawKafkaClient.connect("127.0.0.1", node.port, timeout=5) as client:
            client.send_frame(encode_request(API_VERSIONS, 3, API_VERSIONS_REQUEST, 7))
            _, answer = decode_response(API_VERSIONS, 3, client.recv_frame(5))
            return "answered" if answer.error_code == 0 else f"error {answer.error_code}"

    def admin_connection() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/healthz", timeout=5) as answer:
            return "answered" if answer.status == 200 else f"status {answer.status}"

    def keep_connecting(kind: str, connection: Callable[[], str]) -> None:
        while not stop.is_set():
            opened = time.time()
            try:
                outcomes[kind].append((opened, connection()))
            except OSError as exc:
                outcomes[kind].append((opened, repr(exc)))

    threads = [
        threading.Thread(target=keep_connecting, args=("kafka", kafka_connection)),
        threading.Thread(target=keep_connecting, args=("admin", admin_connection)),
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: all(len(done) >= 20 for done in outcomes.values()), "connections are answered")
        old = node.hot_restart()
        counts = {kind: len(done) for kind, done in outcomes.items()}
        wait_until(
            lambda: all(len(outcomes[kind]) >= counts[kind] + 20 for kind in outcomes), "the new process answers"
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT_S)
    for kind, done in outcomes.items():
        problems = [outcome for _, outcome in done if outcome != "answered"]
        assert not problems, f"{len(problems)} of {len(done)} {kind} connections: {problems[:5]}"
    handed_over = logged_at(old.log_text(this_run=True), "took the listeners over; draining")
    near = [opened for opened, _ in outcomes["kafka"] if abs(opened - handed_over) < 0.2]
    assert len(near) >= 10, f"only {len(near)} connections were opened within 200 ms of the handover"


def logged_at(log: str, text: str) -> float:
    """When the last log line holding ``text`` was written (the proxy logs local time, to the millisecond)."""
    line = [line for line in log.splitlines() if text in line][-1]
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_node_of_the_coordination_group_rejoins_it_after_a_hot_restart(
    cluster: BrokerCluster, tmp_path: Path
) -> None:
    """The new process joins the group ``proxies`` under the node id once the old one has left it."""
    properties = {**ADMIN, "coordination.url": cluster.coordination_url, "proxy.node.id": "5"}
    member = ProxyNode(tmp_path, cluster.bootstrap, free_ports(1)[0], hot_restart=True, properties=properties)
    member.start()
    try:
        old = member.hot_restart()
        assert old.exit_code == 0
        wait_until(lambda: readyz(member) == "ready", "the new process is ready: a member of the group")
        assert "proxy node 5 joined the group proxies" in member.log_text()
    finally:
        member.stop()


def readyz(node: ProxyNode) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.admin_port}/readyz", timeout=5) as answer:
            return str(answer.read().decode().strip())
    except OSError as exc:
        return repr(exc)


# -- failures: one line, and the running node serves on ---------------------------------------------------


def takeover(node: ProxyNode, *flags: str) -> subprocess.CompletedProcess[str]:
    """``barnabas proxy --takeover`` with ``node``'s settings and ``flags`` over them, run to its end."""
    command = node.command()
    files = ("--port-file", str(node.port_file), "--admin-port-file", str(node.admin_port_file))
    command = [arg for arg in command if arg not in files]
    command += [*flags, "--takeover", "--log-level", "WARNING"]  # what it says is its error alone
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


def still_serves(node: ProxyNode, pid: int | None) -> None:
    assert node.running and node.pid == pid
    with RawKafkaClient.connect("127.0.0.1", node.port, timeout=5) as client:
        client.send_frame(encode_request(API_VERSIONS, 3, API_VERSIONS_REQUEST, 1))
        assert decode_response(API_VERSIONS, 3, client.recv_frame(5))[1].error_code == 0


def test_a_takeover_with_no_running_proxy_says_so(tmp_path: Path) -> None:
    socket_path = tmp_path / "nobody.sock"
    result = subprocess.run(
        [sys.executable, "-m", "barnabas", "proxy", "--listen", "127.0.0.1:0", "--bootstrap", "127.0.0.1:1",
         "--set", f"proxy.hot.restart.socket={socket_path}", "--takeover"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert f"no proxy serves hot restarts on {socket_path}" in one_line_error(result)


def test_a_takeover_with_other_listeners_is_refused_and_the_node_serves_on(node: ProxyNode) -> None:
    pid = node.pid
    other_port = free_ports(1)[0]
    result = takeover(node, "--listen", f"127.0.0.1:{other_port}")
    error = one_line_error(result)
    assert f"listeners: the running proxy (pid {pid}) listens on PLAINTEXT://127.0.0.1:{node.port}" in error
    assert f"configured for PLAINTEXT://127.0.0.1:{other_port}" in error
    still_serves(node, pid)


def test_a_takeover_that_fails_to_start_leaves_the_node_serving(node: ProxyNode) -> None:
    pid = node.pid
    unreachable = free_ports(1)[0]
    result = takeover(
        node, "--bootstrap", f"127.0.0.1:{unreachable}", "--set", "socket.connection.setup.timeout.ms=300"
    )
    assert "cannot read the cluster" in one_line_error(result)
    wait_until(lambda: "did not take over" in node.log_text(), "the running node logs the failed takeover")
    still_serves(node, pid)
    old = node.hot_restart()  # and a later hot restart still works
    assert old.pid == pid and old.exit_code == 0


def test_a_second_proxy_on_the_same_hot_restart_socket_is_refused(node: ProxyNode) -> None:
    socket_path = node.properties["proxy.hot.restart.socket"]
    result = subprocess.run(
        [sys.executable, "-m", "barnabas", "proxy", "--listen", "127.0.0.1:0", "--bootstrap", "127.0.0.1:1",
         "--set", f"proxy.hot.restart.socket={socket_path}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert f"a proxy (pid {node.pid}) serves hot restarts on {socket_path}" in one_line_error(result)
    still_serves(node, node.pid)
