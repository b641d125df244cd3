"""One connection's framing, ordering and closing against a real broker process.

Kafka's SocketServer reads a request whole however large (up to socket.request.max.bytes),
answers a connection's requests in the order they came, and writes every answer before it
closes a half-closed connection. These drive the broker with raw frames, pipelined, and read
the correlation ids back.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from barnabas.broker.connection import MAX_PIPELINED
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_until
from tests.support.raw_client import RawKafkaClient, encode_request, frame, request_header
from tests.support.requests import (
    API_VERSIONS,
    FETCH,
    PRODUCE,
    batch,
    connect,
    create_topic,
    fetch_request,
    latest_offset,
    produce,
    produce_request,
    unique,
)

pytestmark = pytest.mark.timeout(180)


def correlation_ids(client: RawKafkaClient, count: int) -> list[int]:
    """The correlation ids of the next ``count`` responses, in the order they arrive."""
    return [struct.unpack_from(">i", client.recv_frame(30))[0] for _ in range(count)]


def unsupported_api_versions(correlation_id: int) -> bytes:
    """An ApiVersions request of a version the broker does not know: answered, in the v0 format."""
    return frame(request_header(API_VERSIONS, 99, correlation_id, "raw-client", flexible=True))


def runnable_seconds(pid: int) -> float:
    """How long the main thread (the event loop) of process ``pid`` has run or waited to run.

    Time on a CPU plus time in the run queue (/proc/PID/schedstat): a thread that never sleeps
    adds the whole wall time however busy the machine is, a sleeping one almost nothing.
    """
    with open(f"/proc/{pid}/schedstat") as stat:
        on_cpu, waiting, _ = stat.read().split()
    return (int(on_cpu) + int(waiting)) / 1e9


def fill_topic(client: RawKafkaClient, topic: str, batches: int, size: int) -> None:
    """Create ``topic`` and write ``batches`` batches of ``size`` random bytes into it."""
    create_topic(client, topic, **{"max.message.bytes": str(2 * size)})
    for _ in range(batches):
        assert produce(client, topic, 0, batch(os.urandom(size)), acks=1).error_code == ErrorCode.none


@pytest.mark.parametrize("size_mib", [7, 9, 20])
def test_a_produce_larger_than_the_read_pause_threshold_is_answered(broker_factory, size_mib: int) -> None:  # type: ignore[no-untyped-def]
    # Reading pauses once 8 MiB of input wait; the frame being filled must not count, or it is never finished.
    limit = str(64 << 20)
    broker: BrokerProcess = broker_factory(
        properties={"message.max.bytes": limit, "socket.request.max.bytes": limit}
    ).start()
    topic = unique("big")
    with connect(broker) as client:
        create_topic(client, topic, **{"max.message.bytes": limit})
        client.sock.settimeout(90)  # the send itself, of tens of MiB
        response = client.request(
            PRODUCE, 9, produce_request(topic, 0, batch(os.urandom(size_mib << 20)), 1), timeout=90
        )
        ((partition,),) = [t.partition_responses for t in response.responses]
        assert partition.error_code == ErrorCode.none
        assert partition.base_offset == 0


def test_an_unsupported_api_versions_is_answered_after_a_pipelined_produce(shared_broker: BrokerProcess) -> None:
    topic = unique("order")
    with connect(shared_broker) as client:
        create_topic(client, topic)
        produce_frame = encode_request(PRODUCE, 9, produce_request(topic, 0, batch(b"x" * 1000), acks=1), 101)
        client.send_frame(produce_frame + unsupported_api_versions(102))
        assert correlation_ids(client, 2) == [101, 102]


def test_an_unsupported_api_versions_is_answered_after_a_fetch_sent_from_the_segment(
    shared_broker: BrokerProcess,
) -> None:
    topic = unique("order")
    with connect(shared_broker) as client:
        fill_topic(client, topic, batches=20, size=50_000)
        fetch_frame = encode_request(FETCH, 12, fetch_request([(topic, 0, 0, 10 << 20)]), 201)
        client.send_frame(fetch_frame + unsupported_api_versions(202))
        assert correlation_ids(client, 2) == [201, 202]


def test_answers_queued_behind_a_fetch_being_sent_wait_without_spinning(broker_factory) -> None:  # type: ignore[no-untyped-def]
    # A Fetch answer the client does not read yet stays being sent (sendfile); the pipelined
    # Produce answers behind it are done but may not be written. With MAX_PIPELINED of them
    # queued the connection stops reading requests until one is written; it must sleep meanwhile,
    # not wake on the done answer at every turn of the event loop. Then all arrive, in order.
    broker: BrokerProcess = broker_factory().start()
    assert broker.proc is not None
    topic = unique("spin")
    batches, size = 60, 512 << 10
    produces = MAX_PIPELINED + 4
    with connect(broker) as client, connect(broker) as observer:
        fill_topic(observer, topic, batches, size)
        requests = encode_request(FETCH, 12, fetch_request([(topic, 0, 0, 40 << 20)], max_bytes=40 << 20), 1)
        for i in range(produces):
            requests += encode_request(PRODUCE, 9, produce_request(topic, 0, batch(b"p"), acks=1), 100 + i)
        client.send_frame(requests)
        # The first MAX_PIPELINED produces are appended; their answers queue behind the fetch's.
        wait_until(lambda: latest_offset(observer, topic) == batches + MAX_PIPELINED, "the queue to fill")
        before = runnable_seconds(broker.proc.pid)
        time.sleep(5.0)  # the measurement window: the client reads nothing for 5 s
        runnable = runnable_seconds(broker.proc.pid) - before
        assert runnable < 2.0, f"the event loop was running or runnable {runnable:.2f} s of 5 s with nothing to do"
        assert correlation_ids(client, 1 + produces) == [1, *range(100, 100 + produces)]
        assert latest_offset(observer, topic) == batches + produces


def test_a_half_closed_connection_gets_the_answer_of_a_fetch_sent_from_the_segment(
    shared_broker: BrokerProcess,
) -> None:
    topic = unique("half-close")
    with connect(shared_broker) as client:
        fill_topic(client, topic, batches=20, size=500_000)
        client.send_frame(encode_request(FETCH, 12, fetch_request([(topic, 0, 0, 20 << 20)], max_bytes=20 << 20), 7))
        client.sock.shutdown(socket.SHUT_WR)
        assert correlation_ids(client, 1) == [7]
        assert client.is_closed(), "the broker closes once the answers are out"


def test_a_half_closed_connection_gets_the_answers_of_pipelined_produces(shared_broker: BrokerProcess) -> None:
    topic = unique("half-close")
    with connect(shared_broker) as client:
        create_topic(client, topic)
        produces = 2 * MAX_PIPELINED
        requests = b"".join(
            encode_request(PRODUCE, 9, produce_request(topic, 0, batch(os.urandom(50_000)), acks), 10 + i)
            for i, acks in enumerate([1, -1] * (produces // 2))
        )
        client.send_frame(requests)
        client.sock.shutdown(socket.SHUT_WR)
        assert correlation_ids(client, produces) == list(range(10, 10 + produces))
        assert client.is_closed(), "the broker closes once the answers are out"
