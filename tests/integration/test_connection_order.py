"""One connection's framing, ordering and closing against a real broker process.

Kafka's SocketServer reads a request whole however large (up to socket.request.max.bytes),
answers a connection's requests in the order they came, and writes every answer before it
closes a half-closed connection. These drive the broker with raw frames, pipelined, and read
the correlation ids back.
"""

from __future__ import annotations

import os

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_process import BrokerProcess
from tests.support.requests import PRODUCE, batch, connect, create_topic, produce_request, unique

pytestmark = pytest.mark.timeout(180)


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
