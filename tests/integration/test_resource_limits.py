"""Connection limits and abusive clients against a real broker process: memory stays bounded, others are served.

Kafka is the reference: a connection over ``max.connections.per.ip`` or ``max.connections`` is closed
right after accept (with a log line and a count in the metrics); ``connections.max.idle.ms`` closes a
connection that does nothing, but never one waiting for its answer. The abusers are a connection flood,
a slowloris (many connections each holding a partial frame that declares a large size) and a
consumer that pipelines fetches and never reads an answer. Throughout, the broker's resident memory
(``VmRSS`` in /proc/PID/status) stays within a bound far below what the abuse would cost unbounded,
and a normal client, connecting from another loopback address, is answered within a few seconds.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from barnabas.benchmark._connection_probe import rss_kib
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_until
from tests.support.raw_client import RawKafkaClient, encode_request
from tests.support.requests import (
    API_VERSIONS,
    FETCH,
    METADATA,
    api_versions_request,
    batch,
    create_topic,
    create_topics,
    fetch,
    fetch_request,
    produce,
    unique,
)

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.0.1"
#: Another loopback address for the well-behaved client: per-address limits leave it alone.
OTHER_HOST = "127.0.0.2"
ADMIN = {"admin.listeners": "http://127.0.0.1:0"}
#: How long a normal client's request may take while the broker is under abuse (generous: a shared CI host).
PROMPT_S = 5.0


def rss_bytes(broker: BrokerProcess) -> int:
    """The broker process's resident memory."""
    pid = broker.pid
    assert pid is not None
    return rss_kib(Path(f"/proc/{pid}/status").read_text()) * 1024


def connect_from(broker: BrokerProcess, source: str = HOST, timeout: float = PROMPT_S) -> RawKafkaClient:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect((HOST, broker.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return RawKafkaClient(sock)


def assert_served(broker: BrokerProcess, source: str = OTHER_HOST) -> None:
    """A fresh client gets ApiVersions and Metadata answered within PROMPT_S seconds each."""
    with connect_from(broker, source) as client:
        started = time.monotonic()
        assert client.request(API_VERSIONS, 3, api_versions_request(), timeout=PROMPT_S).error_code == 0
        client.request(METADATA, 12, metadata_request(), timeout=PROMPT_S)
        assert time.monotonic() - started < 2 * PROMPT_S


def metadata_request() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def metrics(broker: BrokerProcess) -> str:
    port = broker.wait_admin_port()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly ``labels`` (in any order) in a metrics page."""
    for match in re.finditer(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", text, re.MULTILINE):
        if dict(re.findall(r'(\w+)="([^"]*)"', match.group(1))) == labels:
            return float(match.group(2))
    raise AssertionError(f"no {name}{labels} in the metrics")


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def open_raw(broker: BrokerProcess, source: str = HOST) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(PROMPT_S)
    sock.bind((source, 0))
    sock.connect((HOST, broker.port))
    return sock


def answered(sock: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions on ``sock`` (False when it closed the connection)."""
    client = RawKafkaClient(sock)
    try:
        return bool(client.request(API_VERSIONS, 3, api_versions_request(), timeout=PROMPT_S).error_code == 0)
    except (ConnectionError, OSError):
        return False


# -- connection limits ---------------------------------------------------------------------------


def test_a_flood_beyond_max_connections_per_ip_is_closed_at_accept_and_others_are_served(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    limit, flood = 20, 120
    broker = broker_factory(properties={**ADMIN, "max.connections.per.ip": str(limit)}).start()
    with sockets() as opened:
        for _ in range(flood):
            opened.append(open_raw(broker))
        served = [sock for sock in opened if answered(sock)]
        assert len(served) == limit
        assert_served(broker)
        text = metrics(broker)
        assert sample(text, "barnabas_connections_refused_total", listener="PLAINTEXT",
                      limit="max.connections.per.ip") == flood - limit  # fmt: skip
        assert "Rejected connection from 127.0.0.1" in broker.log_text()
        assert "address already has the configured maximum of 20 connections" in broker.log_text()
        served[0].close()
        wait_until(lambda: answered(open_raw(broker)), "a slot freed by a closed connection to be taken")


def test_max_connections_refuses_beyond_the_broker_limit_and_an_override_lifts_one_address(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(
        properties={
            "max.connections": "12",
            "max.connections.per.ip": "4",
            "max.connections.per.ip.overrides": f"{OTHER_HOST}:10",
        }
    ).start()
    with sockets() as opened:
        opened.extend(open_raw(broker, HOST) for _ in range(8))
        assert sum(answered(sock) for sock in opened) == 4  # the per-address limit
        others = [open_raw(broker, OTHER_HOST) for _ in range(10)]
        opened.extend(others)
        assert sum(answered(sock) for sock in others) == 8  # the override, up to the broker's 12
        assert "already has its maximum of 12 connections" in broker.log_text()


def test_idle_connections_are_closed_after_connections_max_idle_ms_but_not_one_awaiting_its_answer(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    idle_ms = 600
    broker = broker_factory(properties={"connections.max.idle.ms": str(idle_ms)}).start()
    topic = unique("idle")
    with connect_from(broker, OTHER_HOST) as admin:
        create_topic(admin, topic)
    with connect_from(broker) as quiet, connect_from(broker) as partial, connect_from(broker) as waiting:
        started = time.monotonic()
        assert quiet.request(API_VERSIONS, 3, api_versions_request()).error_code == 0
        partial.send_frame(struct.pack(">i", 100) + b"\x00\x03")  # a frame that never completes
        # A long poll twice the idle time: the connection is busy, not idle, while it waits.
        request = fetch_request([(topic, 0, 0, 1 << 20)], max_wait_ms=2 * idle_ms, min_bytes=1 << 20)
        cid = waiting.send_request(FETCH, 12, request)
        assert quiet.is_closed(timeout=10) and partial.is_closed(timeout=10)
        assert time.monotonic() - started >= idle_ms / 1000
        response = waiting.read_response(FETCH, 12, cid, timeout=10)
        assert response.responses[0].partitions[0].error_code == ErrorCode.none
        assert waiting.request(API_VERSIONS, 3, api_versions_request()).error_code == 0


# -- abusive clients -----------------------------------------------------------------------------


def test_a_slowloris_holding_partial_frames_costs_no_memory_for_their_declared_size(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    connections, declared = 200, 50 << 20  # unbounded: 10 GB of buffers for frames that never come
    broker = broker_factory().start()
    assert_served(broker)
    before = rss_bytes(broker)
    with sockets() as opened:
        for index in range(connections):
            sock = open_raw(broker)
            sock.sendall(struct.pack(">i", declared) + bytes(1000))  # a produce-sized prefix, then silence
            opened.append(sock)
            if index % 50 == 49:
                assert_served(broker)
        assert_served(broker)
        grown = rss_bytes(broker) - before
        assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB for {connections} partial frames"
        assert all(not RawKafkaClient(sock).is_closed(timeout=0) for sock in opened)  # held open, as Kafka does


def test_a_consumer_that_never_reads_its_answers_does_not_make_the_broker_buffer_them(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(properties={"queued.max.requests": "50"}).start()
    topic = unique("unread")
    with connect_from(broker, OTHER_HOST) as producer:
        create_topic(producer, topic)
        # Topics with long names make each Metadata answer about 5 KB.
        created = create_topics(producer, [unique("m" * 200) for _ in range(20)])
        assert all(result.error_code == ErrorCode.none for result in created.values())
        for _ in range(8):  # about 8 MB
            assert produce(producer, topic, 0, batch(*[bytes(100_000)] * 10)).error_code == ErrorCode.none
    assert_served(broker)
    before = rss_bytes(broker)
    greedy = open_raw(broker)
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    fetch_all = encode_request(FETCH, 12, fetch_request([(topic, 0, 0, 8 << 20)], max_bytes=8 << 20), 1)
    pipelined = (fetch_all + encode_request(METADATA, 12, metadata_request(), 2)) * 150_000
    # 25 MB of requests asking for 150,000 fetches of 8 MB and 150,000 Metadata answers of 5 KB built in
    # memory: over a TB, and 750 MB in memory, if the broker read them all and buffered the answers.
    greedy.setblocking(False)
    sent = 0
    with contextlib.suppress(BlockingIOError):  # the broker stops reading: the rest stays with us
        while sent < len(pipelined):
            sent += greedy.send(pipelined[sent : sent + 65536])
    try:
        for _ in range(3):
            assert_served(broker)
            with connect_from(broker, OTHER_HOST) as reader:
                assert fetch(reader, topic, 0, 0).records
        grown = rss_bytes(broker) - before
        assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB for a consumer that never reads"
        assert sent < len(pipelined), "the broker read every request of a client that reads no answer"
    finally:
        greedy.close()
