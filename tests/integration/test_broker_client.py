"""KafkaClient, the broker-to-broker connection, against a real broker process.

What a follower needs from it: version negotiation, Metadata, Fetch with replica_id returning the
leader's batches as they are, OffsetForLeaderEpoch, pipelining, and one error type
(BrokerConnectionError) for a closed connection, a broken protocol and a timeout, delivered
promptly to every request in flight. Each scenario runs on asyncio's loop and on uvloop, which
the broker itself uses.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest
import uvloop
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import (
    LARGE_FRAME,
    BufferPool,
    LocalProtocolError,
    decode_batch_records,
    iter_batch_headers,
    request_class,
    usable_version,
)
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(90)

TIMER_RESOLUTION_S = 0.002
HOST = "127.0.0.1"
FETCH, METADATA, API_VERSIONS, CREATE_TOPICS, OFFSET_FOR_LEADER_EPOCH = 1, 3, 18, 19, 23
# How long a failure may take to reach the caller; everything here is local.
PROMPT_S = 2.0

T = TypeVar("T")
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Run a coroutine to completion on a fresh loop of the parametrised kind."""

    def runner(coro: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as loop_runner:
            return loop_runner.run(coro)

    return runner


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


async def connect(broker: BrokerProcess, **kwargs: Any) -> KafkaClient:
    return await KafkaClient.connect(HOST, broker.port, client_id="follower-test", timeout_s=10, **kwargs)


# --- request bodies, built from kio's classes through request_class --------------------------


def create_topics_v7(name: str, partitions: int) -> Any:
    topic = request_class(CREATE_TOPICS, 7, "CreatableTopic")(
        name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    return request_class(CREATE_TOPICS, 7)(topics=(topic,), timeout=ms(10_000), validate_only=False)


def metadata_v12(*names: str) -> Any:
    topic = request_class(METADATA, 12, "MetadataRequestTopic")
    return request_class(METADATA, 12)(
        topics=tuple(topic(topic_id=None, name=name) for name in names),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def fetch(
    topic: str, partition: int, offset: int, *, version: int = 12, max_wait_ms: int = 0, replica_id: int = -1
) -> Any:
    fetch_partition = request_class(FETCH, version, "FetchPartition")(
        partition=partition, current_leader_epoch=-1, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    topic_class = request_class(FETCH, version, "FetchTopic")
    fields: dict[str, Any] = {
        "max_wait": ms(max_wait_ms),
        "min_bytes": 1,
        "max_bytes": 4 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": (),
        "rack_id": "",
    }
    if version <= 12:
        fields["replica_id"] = replica_id
        fields["topics"] = (topic_class(topic=topic, partitions=(fetch_partition,)),)
    else:  # v13+ names topics by ID; only used here to send a version the broker refuses
        fields["topics"] = (topic_class(topic_id=uuid.uuid4(), partitions=(fetch_partition,)),)
    return request_class(FETCH, version)(**fields)


def offset_for_leader_epoch_v4(topic: str, partition: int, epoch: int) -> Any:
    return request_class(OFFSET_FOR_LEADER_EPOCH, 4)(
        replica_id=-1,
        topics=(
            request_class(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderTopic")(
                topic=topic,
                partitions=(
                    request_class(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderPartition")(
                        partition=partition, current_leader_epoch=-1, leader_epoch=epoch
                    ),
                ),
            ),
        ),
    )


async def create_topic(client: KafkaClient, name: str, partitions: int = 1) -> None:
    (result,) = (await client.request(CREATE_TOPICS, 7, create_topics_v7(name, partitions))).topics
    assert result.error_code == ErrorCode.none, result


async def raises_promptly(awaitable: Awaitable[Any]) -> BrokerConnectionError:
    """Await ``awaitable``, which must fail with BrokerConnectionError within PROMPT_S."""
    start = time.monotonic()
    with pytest.raises(BrokerConnectionError) as info:
        async with asyncio.timeout(PROMPT_S + 5):
            await awaitable
    assert time.monotonic() - start < PROMPT_S, "the failure was not prompt"
    return info.value


def produce_with_librdkafka(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[object] = []
    for i, value in enumerate(values):
        producer.produce(
            topic, key=f"k{i}".encode(), value=value, partition=0, on_delivery=lambda e, m: errors.append(e)
        )
    assert producer.flush(30) == 0
    assert errors == [None] * len(values)


def topic_holding(broker: BrokerProcess, run: Any, name: str, values: list[bytes]) -> None:
    """Create the one-partition topic ``name`` through KafkaClient and produce ``values`` to it with librdkafka."""

    async def setup() -> None:
        async with await connect(broker) as client:
            await create_topic(client, name)

    run(setup())
    produce_with_librdkafka(broker, name, values)


# --- the happy path ---------------------------------------------------------------------------


def test_api_versions_create_topics_and_metadata(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            ranges = await client.api_versions()
            assert ranges[API_VERSIONS][0] == 0
            assert usable_version(ranges, FETCH, range(4, 13)) == 12
            assert usable_version(ranges, OFFSET_FOR_LEADER_EPOCH, range(0, 5)) == 4
            await create_topic(client, name, partitions=3)
            response = await client.request(METADATA, 12, metadata_v12(name))
            assert response.cluster_id
            assert [b.node_id for b in response.brokers] == [shared_broker.broker_id]
            (topic,) = response.topics
            assert (topic.error_code, topic.name) == (ErrorCode.none, name)
            assert topic.topic_id is not None
            assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
            assert {p.leader_id for p in topic.partitions} == {shared_broker.broker_id}
        assert client.closed

    run(scenario())


def test_fetch_returns_what_librdkafka_produced(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-fetch")
    values = [f"value {i} ".encode() * 20 for i in range(500)]
    topic_holding(shared_broker, run, name, values)

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            response = await client.request(FETCH, 12, fetch(name, 0, 0, replica_id=-1))
            assert response.error_code == ErrorCode.none
            (partition,) = response.responses[0].partitions
            assert partition.error_code == ErrorCode.none
            assert partition.high_watermark == len(values)
            records = partition.records
            assert isinstance(records, bytes)
            spans = [(start, header.size) for start, header in iter_batch_headers(records)]
            assert sum(size for _, size in spans) == len(records), "whole batches only"
            fetched = [r for start, size in spans for r in decode_batch_records(records[start : start + size])]
            assert [r.value for r in fetched] == values
            assert [r.offset for r in fetched] == list(range(len(values)))

            # Fetching from the middle returns the batch holding that offset onwards.
            response = await client.request(FETCH, 12, fetch(name, 0, 250))
            later = response.responses[0].partitions[0].records
            assert later and records.endswith(later)

            # What a follower asks before truncating: the end offset of the leader's epoch.
            metadata = await client.request(METADATA, 12, metadata_v12(name))
            epoch = metadata.topics[0].partitions[0].leader_epoch
            epochs = await client.request(OFFSET_FOR_LEADER_EPOCH, 4, offset_for_leader_epoch_v4(name, 0, epoch))
            (end,) = epochs.topics[0].partitions
            assert (end.error_code, end.leader_epoch, end.end_offset) == (ErrorCode.none, epoch, len(values))

    run(scenario())


def test_a_large_decoded_response_leaves_its_buffer_for_the_next(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-buffers")
    values = [f"value {i} ".encode() * 40 for i in range(500)]  # ~200 KiB: a frame of its own buffer
    topic_holding(shared_broker, run, name, values)

    async def scenario() -> None:
        pool = BufferPool(8 << 20)
        async with await connect(shared_broker, buffers=pool) as client:
            fetched = []
            for _ in range(3):
                response = await client.request(FETCH, 12, fetch(name, 0, 0))
                records = response.responses[0].partitions[0].records
                assert len(records) > LARGE_FRAME
                # The response was copied out, so its buffer is back in the pool; the next one reuses it.
                assert pool.kept_bytes >= len(records)
                fetched.append(records)
            kept = pool.kept_bytes
        assert kept < 2 * len(fetched[0]), "one buffer, taken and given back each time"
        decoded = [r.value for start, header in iter_batch_headers(fetched[0])
                   for r in decode_batch_records(fetched[0][start : start + header.size])]  # fmt: skip
        assert decoded == values
        assert fetched[1] == fetched[0] and fetched[2] == fetched[0], "a reused buffer corrupts no earlier answer"

    run(scenario())


def test_pipelined_requests_are_answered_in_order(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-pipe")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            await create_topic(client, name)
            finished: list[int] = []

            async def call(index: int, api_key: int, version: int, body: Any) -> Any:
                response = await client.request(api_key, version, body)
                finished.append(index)
                return response

            # A long poll on an empty partition holds the connection for its max_wait; the
            # requests behind it are already sent and are answered after it, in order.
            requests = [(FETCH, 12, fetch(name, 0, 0, max_wait_ms=300), "FetchResponse")]
            for i in range(30):
                requests.append(
                    [
                        (API_VERSIONS, 3, _api_versions_v3(), "ApiVersionsResponse"),
                        (METADATA, 12, metadata_v12(name), "MetadataResponse"),
                        (FETCH, 12, fetch(name, 0, 0), "FetchResponse"),
                    ][i % 3]
                )
            tasks = [asyncio.ensure_future(call(i, *request[:3])) for i, request in enumerate(requests)]
            await asyncio.sleep(0)  # let every task send its request
            assert client.in_flight == len(tasks)
            responses = await asyncio.gather(*tasks)
            assert finished == list(range(len(requests)))
            assert client.in_flight == 0
            assert [type(r).__name__ for r in responses] == [request[3] for request in requests]
            assert responses[0].responses[0].partitions[0].records == b""
            assert responses[2].topics[0].name == name

    run(scenario())


def _api_versions_v3() -> Any:
    return request_class(API_VERSIONS, 3)(client_software_name="barnabas-test", client_software_version="1")


# --- failures ---------------------------------------------------------------------------------


def test_broker_closing_the_connection_fails_every_request_promptly(shared_broker: BrokerProcess, run: Any) -> None:
    """Fetch v13 is outside the broker's range: it closes the connection (Kafka's behaviour)."""
    name = unique("client-closed")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            await create_topic(client, name)
            refused = asyncio.ensure_future(client.request(FETCH, 13, fetch(name, 0, 0, version=13)))
            behind = asyncio.ensure_future(client.request(API_VERSIONS, 3, _api_versions_v3()))
            await raises_promptly(refused)
            error = await raises_promptly(behind)
            # End of stream, or a reset when the broker closed with our second request unread.
            assert "closed by the broker" in str(error) or "Connection reset" in str(error)
            assert client.closed
            assert client.in_flight == 0
            # Every later request fails at once, without touching the network.
            await raises_promptly(client.request(API_VERSIONS, 3, _api_versions_v3()))

    run(scenario())


def test_killed_broker_fails_requests_promptly(broker_factory: Any, run: Any) -> None:
    broker = broker_factory().start()

    async def scenario() -> None:
        async with await connect(broker) as client, await connect(broker) as idle:
            await client.api_versions()
            await idle.api_versions()
            # An empty partition, so the broker holds the fetch (an unknown topic was answered at once,
            # and that answer could beat the kill).
            name = unique("client-killed")
            await create_topic(client, name)
            waiting = asyncio.ensure_future(client.request(FETCH, 12, fetch(name, 0, 0, max_wait_ms=20_000)))
            await asyncio.sleep(0)
            await asyncio.to_thread(broker.kill)
            await raises_promptly(waiting)
            await raises_promptly(client.request(API_VERSIONS, 3, _api_versions_v3()))
            # A connection with nothing in flight notices the close by itself.
            async with asyncio.timeout(PROMPT_S):
                await idle.wait_closed()
            assert idle.closed
            error = await raises_promptly(idle.request(API_VERSIONS, 3, _api_versions_v3()))
            assert "connection is closed" in str(error)
        with pytest.raises(BrokerConnectionError, match="cannot connect"):
            await connect(broker)

    run(scenario())


def test_timeout_fails_the_connection(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-timeout")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            await create_topic(client, name)
            long_poll = fetch(name, 0, 0, max_wait_ms=20_000)
            slow = asyncio.ensure_future(client.request(FETCH, 12, long_poll, timeout_s=0.3))
            behind = asyncio.ensure_future(client.request(API_VERSIONS, 3, _api_versions_v3(), timeout_s=30))
            start = time.monotonic()
            error = await raises_promptly(slow)
            # uvloop's timers have millisecond resolution and may fire up to a millisecond early.
            assert time.monotonic() - start >= 0.3 - TIMER_RESOLUTION_S
            assert "no response within 0.3s" in str(error)
            behind_error = await raises_promptly(behind)
            assert "no response within 0.3s" in str(behind_error)
            assert client.closed
            await raises_promptly(client.request(API_VERSIONS, 3, _api_versions_v3()))

    run(scenario())


def test_a_shorter_timeout_behind_a_longer_one_fails_on_time(shared_broker: BrokerProcess, run: Any) -> None:
    """The connection's one deadline timer moves earlier for a later request with a shorter timeout."""
    name = unique("client-short-behind-long")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            await create_topic(client, name)
            long_poll = fetch(name, 0, 0, max_wait_ms=20_000)
            patient = asyncio.ensure_future(client.request(FETCH, 12, long_poll, timeout_s=30))
            start = time.monotonic()
            hasty = asyncio.ensure_future(client.request(API_VERSIONS, 3, _api_versions_v3(), timeout_s=0.3))
            error = await raises_promptly(hasty)
            assert time.monotonic() - start >= 0.3 - TIMER_RESOLUTION_S
            assert "no response within 0.3s" in str(error)
            await raises_promptly(patient)  # the connection failed under it too
            assert client.closed

    run(scenario())


def test_default_request_timeout_applies(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-default-timeout")

    async def scenario() -> None:
        async with await connect(shared_broker) as setup:
            await create_topic(setup, name)
        async with await connect(shared_broker, request_timeout_s=0.3) as client:
            assert client.request_timeout_s == 0.3
            await raises_promptly(client.request(FETCH, 12, fetch(name, 0, 0, max_wait_ms=20_000)))

    run(scenario())


def test_close_fails_requests_in_flight(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-close")

    async def scenario() -> None:
        client = await connect(shared_broker)
        await create_topic(client, name)
        waiting = asyncio.ensure_future(client.request(FETCH, 12, fetch(name, 0, 0, max_wait_ms=20_000)))
        await asyncio.sleep(0)
        client.close()
        error = await raises_promptly(waiting)
        assert "closed by the client" in str(error)
        await client.wait_closed()
        client.close()  # idempotent

    run(scenario())


def test_cancelled_request_does_not_disturb_the_next(shared_broker: BrokerProcess, run: Any) -> None:
    name = unique("client-cancel")

    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            await create_topic(client, name)
            waiting = asyncio.ensure_future(client.request(FETCH, 12, fetch(name, 0, 0, max_wait_ms=300)))
            await asyncio.sleep(0)
            waiting.cancel()
            # The cancelled fetch's response still arrives first and is dropped; this one matches.
            response = await client.request(METADATA, 12, metadata_v12(name))
            assert response.topics[0].name == name
            assert not client.closed

    run(scenario())


def test_misuse_leaves_the_connection_usable(shared_broker: BrokerProcess, run: Any) -> None:
    async def scenario() -> None:
        async with await connect(shared_broker) as client:
            with pytest.raises(LocalProtocolError):
                await client.request(FETCH, 11, fetch("t", 0, 0))  # a v12 body sent as v11
            assert not client.closed
            assert client.in_flight == 0
            assert FETCH in await client.api_versions()

    run(scenario())


def test_connection_refused(run: Any) -> None:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]  # nothing listens here once the socket closes

    async def scenario() -> None:
        with pytest.raises(BrokerConnectionError, match="cannot connect"):
            await KafkaClient.connect(HOST, port, client_id="x", timeout_s=5)

    run(scenario())
