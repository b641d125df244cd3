"""The proxy in front of a real 3-broker cluster: what clients see, route and keep through failures.

Two proxy nodes (each the other's peer) front a 3-broker replicated cluster; clients bootstrap from
the proxy nodes only and must never learn a broker's address. Every client family runs the interop
driver through them (a 6-partition topic whose leaders sit on all three brokers: produce requests
are split per leader and merged), consumer groups commit through them, and the tests kill a
partition leader's broker and a proxy node under load.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest

from barnabas.protocol import ErrorCode, build_record_batch, decode_batch_records, make, request_class
from barnabas.testing import BrokerCluster, ProxySet
from tests.interop.common import problems_in
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, NODE_DIR, REPO, build_tools, java_command, kafka_tool
from tests.support.raw_client import RawKafkaClient, frame, request_header
from tests.support.requests import FETCH, METADATA, PRODUCE, timeout_ms

pytestmark = pytest.mark.timeout(300)

TIMEOUT = 30.0
PARTITIONS = 6
DRIVER_COUNT = 3_000
DRIVER_TIMEOUT_S = 120
PROBE_MS = 200
PAGE_SIZE = 4096


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    base = tmp_path_factory.mktemp("proxied-cluster")
    cluster = BrokerCluster(base, 3, properties={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def proxies(cluster: BrokerCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxySet]:
    directory = tmp_path_factory.mktemp("proxies")
    proxies = ProxySet(directory, cluster.bootstrap, 2, properties={"proxy.peer.probe.interval.ms": str(PROBE_MS)})
    proxies.start()
    try:
        yield proxies
    finally:
        proxies.stop()


def new_topic(cluster: BrokerCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=PARTITIONS, replication_factor=3, **{"min.insync.replicas": "2"})
    return name


def broker_ports(cluster: BrokerCluster) -> set[int]:
    return {broker.port for broker in cluster.brokers}


# -- what clients see ----------------------------------------------------------------------------


def test_metadata_names_only_proxy_nodes_and_every_node_agrees(cluster: BrokerCluster, proxies: ProxySet) -> None:
    topic = new_topic(cluster, "metadata")
    leaders_on = {cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    assert len(leaders_on) > 1, "the topic's leaders should sit on several brokers"
    answers = []
    for node in proxies.nodes:
        md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=TIMEOUT)
        brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
        assert set(brokers.values()) == {(n.host, n.port) for n in proxies.nodes}
        assert not {port for _, port in brokers.values()} & broker_ports(cluster)
        partitions = md.topics[topic].partitions
        assert {p.leader for p in partitions.values()} <= set(brokers)
        for p in partitions.values():
            assert p.replicas[0] == p.leader and len(set(p.replicas)) == len(p.replicas) == 2
        answers.append(({b: brokers[b] for b in sorted(brokers)}, {i: p.leader for i, p in partitions.items()}))
    assert answers[0] == answers[1], "two proxy nodes must give the same metadata"


def test_kafka_topics_describes_through_the_proxy_as_metadata_names(cluster: BrokerCluster, proxies: ProxySet) -> None:
    """kafka-topics --describe through the proxy: Admin.describeTopics asks DescribeTopicPartitions (its empty ELR
    columns say so, N/A would be Metadata's fallback), and every node it names is the proxy node Metadata names."""
    topic = new_topic(cluster, "described")
    described = kafka_tool(
        "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", proxies.bootstrap, "--describe", "--topic", topic
    )
    assert described.returncode == 0, described.stderr
    rows = [
        {key.strip(): value.strip() for key, _, value in (part.partition(":") for part in line.split("\t"))}
        for line in described.stdout.splitlines()
        if "Partition: " in line
    ]
    md = AdminClient({"bootstrap.servers": proxies.bootstrap}).list_topics(topic, timeout=TIMEOUT)
    nodes = set(md.brokers)
    assert sorted(int(row["Partition"]) for row in rows) == list(range(PARTITIONS)), described.stdout
    for row in rows:
        partition = md.topics[topic].partitions[int(row["Partition"])]
        replicas = [int(r) for r in row["Replicas"].split(",")]
        assert (int(row["Leader"]), replicas) == (partition.leader, partition.replicas)
        assert {int(row["Leader"]), *replicas} <= nodes, f"a broker's id, not a proxy node's: {row}"
        assert (row["Elr"], row["LastKnownElr"]) == ("", ""), f"Metadata answered, not DescribeTopicPartitions: {row}"


def test_broker_internal_apis_close_the_connection(proxies: ProxySet) -> None:
    node = proxies.nodes[0]
    leader_and_isr = frame(request_header(4, 5, 1, "intruder", flexible=True) + b"\x00" * 16)
    with RawKafkaClient.connect(node.host, node.port) as client:
        client.send_frame(leader_and_isr)
        assert client.is_closed(10.0), "LeaderAndIsr must close the connection"
    replica_fetch = FetchRequest(
        replica_id=1,
        max_wait=timeout_ms(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(topic="any", partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1),)),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    with RawKafkaClient.connect(node.host, node.port) as client:
        client.send_request(FETCH, 12, replica_fetch, correlation_id=7)
        assert client.is_closed(10.0), "a replica fetch must close the connection"
    assert "refused" in node.log_text() and "replica fetches are broker-internal" in node.log_text()
    with RawKafkaClient.connect(node.host, node.port) as client:  # still serving
        assert client.request(METADATA, 12, _metadata_request()).brokers


def _metadata_request() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


# -- every client family -------------------------------------------------------------------------


def _driver_command(client: str) -> list[str]:
    if client == "java":
        problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
        if problem:
            pytest.fail(problem, pytrace=False)
        return list(java_command("barnabas.interop.InteropDriver"))
    if client == "kafkajs":
        problem = build_tools(NODE_DIR / "install.sh", ("node", "npm"), "kafkajs driver install")
        if problem:
            pytest.fail(problem, pytrace=False)
        return ["node", str(NODE_DIR / "driver.js")]
    return [sys.executable, "-m", "tests.interop.py_driver", "--client", client]


@pytest.mark.interop
@pytest.mark.parametrize(
    ("client", "mode"),
    [
        ("confluent", "idempotent"),
        ("kafka-python", "plain"),
        ("aiokafka", "lz4"),
        ("kafkajs", "plain"),
        ("java", "idempotent"),
    ],
)
def test_client_family_through_the_proxy(proxies: ProxySet, client: str, mode: str, tmp_path: Path) -> None:
    """The interop driver (admin create, produce acks=all, read back every partition, list offsets,
    delete) through both proxy nodes: topics it creates get leaders on all three brokers."""
    out = tmp_path / "report.json"
    command = [
        *_driver_command(client),
        "--bootstrap", proxies.bootstrap, "--topic", f"proxied-{client}-{uuid.uuid4().hex[:8]}",
        "--mode", mode, "--count", str(DRIVER_COUNT), "--partitions", str(PARTITIONS), "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"{client}/{mode} through the proxy failed:\n{proc.stderr[-3000:]}"
    problems = problems_in(json.loads(out.read_text()), DRIVER_COUNT, PARTITIONS)
    assert not problems, f"{client}/{mode} through the proxy:\n  " + "\n  ".join(problems)


# -- consumer groups -----------------------------------------------------------------------------


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce with acks=all, idempotent; the values acknowledged."""
    acked: list[bytes] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is None:
            acked.append(message.value())
        else:
            errors.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value, key=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert not errors, errors[:3]
    return acked


def consume_all(bootstrap: str, topic: str, group: str, expected: int, members: int = 2) -> list[bytes]:
    """``members`` consumers of ``group`` read until ``expected`` records are in, committing as they go."""
    consumers = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
        for _ in range(members)
    ]  # fmt: skip
    for consumer in consumers:
        consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < expected and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
                consumer.commit(message=message, asynchronous=False)
    for consumer in consumers:
        consumer.close()
    return seen


def test_consumer_group_commits_through_the_proxy(cluster: BrokerCluster, proxies: ProxySet) -> None:
    topic = new_topic(cluster, "group")
    values = [f"g-{i}".encode() for i in range(600)]
    acked = produce_values(proxies.bootstrap, topic, values)
    group = f"proxied-{uuid.uuid4().hex[:8]}"
    seen = consume_all(proxies.bootstrap, topic, group, len(acked))
    assert sorted(seen) == sorted(acked)
    admin_consumer = Consumer({"bootstrap.servers": proxies.nodes[1].bootstrap, "group.id": group})
    committed = admin_consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
    ends = {
        p: admin_consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1] for p in range(PARTITIONS)
    }
    admin_consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == ends
    admin = AdminClient({"bootstrap.servers": proxies.bootstrap})  # kept: a dropped client cancels its calls
    listed = admin.list_consumer_groups().result(TIMEOUT)
    assert group in {g.group_id for g in listed.valid}, listed.errors


def test_admin_apis_through_the_proxy(cluster: BrokerCluster, proxies: ProxySet) -> None:
    admin = AdminClient({"bootstrap.servers": proxies.bootstrap})
    name = f"admin-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 4, 3)])[name].result(TIMEOUT)
    cluster.wait_for(lambda md: name in md.topics and len(md.topics[name].partitions) == 4, "the topic is created")
    admin.create_partitions([NewPartitions(name, 6)])[name].result(TIMEOUT)
    cluster.wait_for(lambda md: len(md.topics[name].partitions) == 6, "the partitions are added")
    admin.delete_topics([name])[name].result(TIMEOUT)
    cluster.wait_for(lambda md: name not in md.topics, "the topic is deleted")


def _produce_all(version: int, topic: str, order: list[int], acks: int, tag: str) -> tuple[Any, dict[int, bytes]]:
    """A Produce of one ~2 KiB batch to each partition in ``order`` (its records views in the proxy's split)."""
    values = {p: f"{tag}-{p}-".encode() * 200 for p in order}
    now = int(time.time() * 1000)  # an old timestamp would have retention delete the records at once
    partition_cls = request_class(PRODUCE, version, "PartitionProduceData")
    body = make(
        request_class(PRODUCE, version),
        transactional_id=None,
        acks=acks,
        timeout=timeout_ms(10_000),
        topic_data=(
            make(
                request_class(PRODUCE, version, "TopicProduceData"),
                name=topic,
                partition_data=tuple(
                    make(partition_cls, index=p, records=build_record_batch([(None, values[p])], base_timestamp_ms=now))
                    for p in order
                ),
            ),
        ),
    )
    return body, values


def _fetch_from_start(version: int, topic: str, partitions: list[int], *, max_bytes: int, partition_max: int) -> Any:
    """A consumer's Fetch of ``partitions`` from offset 0, answered at once (max_wait 0)."""
    partition_cls = request_class(FETCH, version, "FetchPartition")
    return make(
        request_class(FETCH, version),
        replica_id=-1, max_wait=timeout_ms(0), min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(make(request_class(FETCH, version, "FetchTopic"), topic=topic, partitions=tuple(
            make(partition_cls, partition=p, fetch_offset=0, current_leader_epoch=-1, log_start_offset=-1,
                 partition_max_bytes=partition_max)
            for p in partitions
        )),),
    )  # fmt: skip


def _fetch_all(client: RawKafkaClient, version: int, topic: str, order: list[int]) -> dict[int, list[bytes]]:
    """Every record value of each partition from offset 0, one Fetch split across the leaders."""
    request = _fetch_from_start(version, topic, order, max_bytes=1 << 20, partition_max=1 << 16)
    (answer,) = client.request(FETCH, version, request).responses
    assert [p.partition_index for p in answer.partitions] == order, "partitions in the request's order"
    assert {p.error_code for p in answer.partitions} == {0}, [
        (p.partition_index, p.error_code, p.high_watermark, p.log_start_offset) for p in answer.partitions
    ]
    fetched: dict[int, list[bytes]] = {}
    for p in answer.partitions:
        view, values = memoryview(p.records or b""), []
        while view:
            values += [bytes(r.value or b"") for r in decode_batch_records(view)]
            view = view[int.from_bytes(view[8:12], "big") + 12 :]
        fetched[p.partition_index] = values
    return fetched


@pytest.mark.parametrize(("produce_version", "fetch_version"), [(3, 4), (8, 11), (11, 12)])
def test_a_request_spanning_every_leader_is_split_and_merged(
    cluster: BrokerCluster, proxies: ProxySet, produce_version: int, fetch_version: int
) -> None:
    topic = new_topic(cluster, "split")
    assert len({cluster.leader_of(topic, p) for p in range(PARTITIONS)}) > 1, "leaders on several brokers"
    order = [4, 1, 5, 0, 3, 2]
    node = proxies.nodes[0]
    with RawKafkaClient.connect(node.host, node.port) as client:
        body, first = _produce_all(produce_version, topic, order, -1, "acked")
        (answer,) = client.request(PRODUCE, produce_version, body).responses
        assert [(p.index, p.error_code, p.base_offset) for p in answer.partition_responses] == [
            (p, 0, 0) for p in order
        ]
        body, second = _produce_all(produce_version, topic, order, 0, "unacked")
        client.send_request(PRODUCE, produce_version, body)  # acks=0: no answer comes
        expected = {p: [first[p], second[p]] for p in order}
        deadline = time.monotonic() + TIMEOUT
        while (fetched := _fetch_all(client, fetch_version, topic, order)) != expected:
            assert time.monotonic() < deadline, f"fetched {fetched}"
            time.sleep(0.05)  # polling until the acks=0 records are in


def test_large_fetch_answers_are_relayed_through_recycled_buffers(cluster: BrokerCluster, proxies: ProxySet) -> None:
    """A proxy node reads large Fetch answers into buffers it reuses once they are sent to the client:
    relaying many megabytes faults in a few buffers' pages, not a fresh page for every 4 KiB relayed."""
    topic = new_topic(cluster, "recycled")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50})
    for partition in range(PARTITIONS):
        for _ in range(1_100):
            producer.produce(topic, b"v" * 1_000, partition=partition)
    assert producer.flush(TIMEOUT) == 0
    node = proxies.nodes[0]
    one_leader, every_leader = [0], list(range(PARTITIONS))
    with RawKafkaClient.connect(node.host, node.port) as client:
        for partitions in (one_leader, every_leader):  # the buffers are made the first time
            _fetch_bytes(client, topic, partitions)
        before = _minor_faults(node.process.pid)
        relayed = 0
        for _ in range(8):
            relayed += _fetch_bytes(client, topic, one_leader)  # relayed whole
            relayed += _fetch_bytes(client, topic, every_leader)  # split, merged as slices
        faults = _minor_faults(node.process.pid) - before
    assert relayed > 40 << 20
    assert faults < relayed / PAGE_SIZE / 10, f"{faults} page faults relaying {relayed} bytes"


def _fetch_bytes(client: RawKafkaClient, topic: str, partitions: list[int]) -> int:
    """Bytes of records one Fetch from offset 0 returns (up to 1 MiB per partition)."""
    request = _fetch_from_start(12, topic, partitions, max_bytes=64 << 20, partition_max=1 << 20)
    (answer,) = client.request(FETCH, 12, request).responses
    assert [(p.partition_index, p.error_code) for p in answer.partitions] == [(p, 0) for p in partitions]
    return sum(len(p.records or b"") for p in answer.partitions)


def _minor_faults(pid: int) -> int:
    """Page faults the process ``pid`` took without I/O so far (minflt in /proc/PID/stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


# -- failures ------------------------------------------------------------------------------------


def test_killing_a_partition_leader_loses_no_acknowledged_record(cluster: BrokerCluster, proxies: ProxySet) -> None:
    topic = new_topic(cluster, "failover")
    victim = cluster.leader_of(topic, 0)
    acked: list[bytes] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": proxies.bootstrap, "acks": "all", "enable.idempotence": True,
                             "message.timeout.ms": 60_000})  # fmt: skip
        i = 0
        while not stop.is_set():
            value = f"f-{i}".encode()
            producer.produce(topic, value=value, partition=i % PARTITIONS,
                             on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)  # fmt: skip
            producer.poll(0.001)
            i += 1
        assert producer.flush(90) == 0

    thread = threading.Thread(target=keep_producing)
    thread.start()
    try:
        _wait(lambda: len(acked) >= 500, "500 records acknowledged before the kill")
        cluster.kill(victim)
        before = len(acked)
        _wait(lambda: len(acked) >= before + 1000, "1000 more records acknowledged after the kill", 60)
    finally:
        stop.set()
        thread.join(120)
        cluster.restart(victim)
    values = read_back(proxies.nodes[1].bootstrap, topic)
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"


@pytest.mark.parametrize("split", [False, True], ids=["one-leader", "split"])
def test_a_produce_written_to_a_broker_that_then_fails_is_answered_request_timed_out(
    cluster: BrokerCluster, tmp_path: Path, split: bool
) -> None:
    """The proxy wrote the records to their leader, which never answered (SIGSTOP outlives the proxy's
    request.timeout.ms): they may be appended once it wakes, so the client must retry them as possibly
    persisted (REQUEST_TIMED_OUT), not as refused (NOT_LEADER_OR_FOLLOWER: an idempotent producer
    timing them out would take them as never written). A partition led elsewhere is answered as usual."""
    proxies = ProxySet(tmp_path, cluster.bootstrap, 1, properties={"request.timeout.ms": "500"})
    proxies.start()
    try:
        topic = new_topic(cluster, "hung")
        leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
        victim = leaders[0]
        others = [p for p, leader in leaders.items() if leader != victim]
        order = [0, others[0]] if split else [0]
        node = proxies.nodes[0]
        with RawKafkaClient.connect(node.host, node.port) as client:
            body, _ = _produce_all(8, topic, order, 1, "hung")
            cluster.pause(victim)
            try:
                (answer,) = client.request(PRODUCE, 8, body).responses
            finally:
                cluster.resume(victim)
        codes = {p.index: p.error_code for p in answer.partition_responses}
        assert codes == {0: ErrorCode.request_timed_out, **dict.fromkeys(order[1:], ErrorCode.none)}
    finally:
        proxies.stop()


def read_back(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of ``topic`` from offset 0 up to each partition's end, by assign()."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})  # fmt: skip
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    positions = dict.fromkeys(range(PARTITIONS), 0)
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        values.append(message.value())
        positions[message.partition()] = message.offset() + 1
    consumer.close()
    assert all(positions[p] >= ends[p] for p in positions), f"read {positions}, ends {ends}"
    return values


def test_killing_a_proxy_node_leaves_the_other_serving(cluster: BrokerCluster, tmp_path: Path) -> None:
    proxies = ProxySet(tmp_path, cluster.bootstrap, 2, properties={"proxy.peer.probe.interval.ms": str(PROBE_MS)})
    proxies.start()
    try:
        topic = new_topic(cluster, "proxy-down")
        survivor, victim = proxies.nodes
        produce_values(proxies.bootstrap, topic, [b"before"])
        victim.process.kill()
        _wait(lambda: _metadata_ports(survivor.bootstrap) == {survivor.port}, "the dead node leaves Metadata")
        acked = produce_values(proxies.bootstrap, topic, [f"after-{i}".encode() for i in range(200)])
        assert len(acked) == 200
        assert set(acked) <= set(read_back(proxies.bootstrap, topic))
    finally:
        proxies.stop()


def _metadata_ports(bootstrap: str) -> set[int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT)
    return {b.port for b in md.brokers.values()}


def _wait(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)  # polling the condition


def test_proxy_refuses_to_start_without_a_cluster(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-m", "barnabas", "proxy", "--listen", "127.0.0.1:0", "--bootstrap", f"127.0.0.1:{port}",
         "--set", "socket.connection.setup.timeout.ms=500"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "cannot read the cluster" in result.stderr, result.stderr


def test_proxy_nodes_find_each_other_through_coordination(cluster: BrokerCluster, tmp_path: Path) -> None:
    """With coordination.url the nodes join the group 'proxies'; one killed -9 leaves the other's Metadata
    when its session ends (no probing)."""
    proxies = ProxySet(tmp_path, cluster.bootstrap, 2, coordination_url=cluster.coordination_url)
    proxies.start()  # returns once each node's Metadata lists both
    try:
        survivor, victim = proxies.nodes
        log = survivor.log_text()
        assert f"proxy nodes: 0={survivor.bootstrap}, 1={victim.bootstrap}" in log and "proxy nodes up:" not in log
        victim.process.kill()
        _wait(lambda: _metadata_ports(survivor.bootstrap) == {survivor.port}, "the dead node leaves Metadata", 15)
        topic = new_topic(cluster, "coordinated")
        assert len(produce_values(survivor.bootstrap, topic, [b"still", b"serving"])) == 2
    finally:
        proxies.stop()
