"""Fetch as Kafka serves it: long polling, byte limits, KIP-74, offsets inside batches, range errors.

Requests are sent over a plain socket so each limit is exact; batches are built with the codec.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

from barnabas.protocol import iter_batch_headers
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import (
    FETCH,
    HOST,
    batch,
    connect,
    create_topic,
    fetch,
    fetch_request,
    produce,
    unique,
)

pytestmark = pytest.mark.timeout(60)

OFFSET_FOR_LEADER_EPOCH = 23


@pytest.fixture
def topic(shared_broker: BrokerProcess) -> Iterator[str]:
    name = unique("fetch")
    with connect(shared_broker) as client:
        create_topic(client, name, partitions=2)
    yield name


def produce_batches(broker: BrokerProcess, topic: str, count: int, value_size: int, partition: int = 0) -> list[int]:
    """Produce ``count`` single-batch requests of 3 records each; return each batch's size."""
    sizes = []
    with connect(broker) as client:
        for i in range(count):
            records = batch(*(bytes([65 + i % 26]) * value_size for _ in range(3)))
            response = produce(client, topic, partition, records)
            assert response.error_code == ErrorCode.none
            sizes.append(len(records))
    return sizes


def batches_in(partition_data: Any) -> list[tuple[int, int]]:
    """(base offset, size) of every batch in a fetched partition, checking they are whole."""
    records = bytes(partition_data.records or b"")
    found = [(header.base_offset, header.size) for _, header in iter_batch_headers(records)]
    assert sum(size for _, size in found) == len(records), "a fetch returned part of a batch"
    return found


def test_long_poll_waits_then_wakes_on_produce(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as waiter:
        request = fetch_request([(topic, 0, 0, 1 << 20)], min_bytes=1, max_wait_ms=20_000)
        correlation_id = waiter.send_request(FETCH, 12, request)
        # Nothing to return yet: a broker that ignores min_bytes would answer at once.
        readable, _, _ = select.select([waiter.sock], [], [], 0.5)
        assert not readable, "the fetch was answered before any data or max_wait"
        produce_batches(shared_broker, topic, 1, 100)
        response = waiter.read_response(FETCH, 12, correlation_id, timeout=10)
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none
    assert batches_in(partition) == [(0, batches_in(partition)[0][1])]
    assert partition.high_watermark == 3


@pytest.mark.parametrize("produced_to", [0, 1, 2, 3])
def test_long_poll_on_several_partitions_wakes_on_any_of_them(shared_broker: BrokerProcess, produced_to: int) -> None:
    # A consumer's fetch names all its partitions; data on any one of them (the first, the
    # last, one in between) must answer it, not max_wait. max_wait (20 s) is twice the read
    # timeout, so a fetch left waiting fails the read instead of passing late.
    name = unique("fetch-many")
    with connect(shared_broker) as client:
        create_topic(client, name, partitions=4)
    with connect(shared_broker) as waiter:
        request = fetch_request([(name, p, 0, 1 << 20) for p in (2, 0, 3, 1)], min_bytes=1, max_wait_ms=20_000)
        correlation_id = waiter.send_request(FETCH, 12, request)
        readable, _, _ = select.select([waiter.sock], [], [], 0.2)
        assert not readable, "the fetch was answered before any data or max_wait"
        produce_batches(shared_broker, name, 1, 100, partition=produced_to)
        response = waiter.read_response(FETCH, 12, correlation_id, timeout=10)
    answered = {int(p.partition_index): p for p in response.responses[0].partitions}
    assert sorted(answered) == [0, 1, 2, 3]
    for index, partition in answered.items():
        assert partition.error_code == ErrorCode.none
        assert [offset for offset, _ in batches_in(partition)] == ([0] if index == produced_to else [])
        assert partition.high_watermark == (3 if index == produced_to else 0)


def test_max_wait_expires_with_an_empty_answer(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        partition = fetch(client, topic, 0, 0, max_wait_ms=200, min_bytes=1)
    assert partition.error_code == ErrorCode.none
    assert batches_in(partition) == []
    assert partition.high_watermark == 0


def test_min_bytes_not_reached_returns_what_there_is_after_max_wait(shared_broker: BrokerProcess, topic: str) -> None:
    produce_batches(shared_broker, topic, 1, 50)
    with connect(shared_broker) as client:
        partition = fetch(client, topic, 0, 0, max_wait_ms=300, min_bytes=1 << 20)
    assert [offset for offset, _ in batches_in(partition)] == [0]


def test_partition_max_bytes_returns_whole_batches_that_fit(shared_broker: BrokerProcess, topic: str) -> None:
    sizes = produce_batches(shared_broker, topic, 5, 300)
    with connect(shared_broker) as client:
        partition = fetch(client, topic, 0, 0, max_bytes=sizes[0] + sizes[1] + sizes[2] // 2)
    assert batches_in(partition) == [(0, sizes[0]), (3, sizes[1])]


def test_first_batch_is_returned_even_when_larger_than_the_limit(shared_broker: BrokerProcess, topic: str) -> None:
    sizes = produce_batches(shared_broker, topic, 2, 300)
    with connect(shared_broker) as client:
        partition = fetch(client, topic, 0, 0, max_bytes=10)
    assert batches_in(partition) == [(0, sizes[0])]  # KIP-74: one batch, never none


def test_response_max_bytes_is_shared_across_partitions(shared_broker: BrokerProcess, topic: str) -> None:
    sizes0 = produce_batches(shared_broker, topic, 3, 300, partition=0)
    produce_batches(shared_broker, topic, 3, 300, partition=1)
    request = fetch_request([(topic, 0, 0, 1 << 20), (topic, 1, 0, 1 << 20)], max_bytes=sizes0[0] + 10)
    with connect(shared_broker) as client:
        response = client.request(FETCH, 12, request)
    first, second = response.responses[0].partitions
    assert batches_in(first) == [(0, sizes0[0])]
    assert batches_in(second) == [], "the response budget was spent on the first partition"


def test_offset_inside_a_batch_returns_that_batch(shared_broker: BrokerProcess, topic: str) -> None:
    sizes = produce_batches(shared_broker, topic, 2, 100)
    with connect(shared_broker) as client:
        partition = fetch(client, topic, 0, 4)  # the second batch holds offsets 3, 4 and 5
    assert batches_in(partition) == [(3, sizes[1])]


def test_offsets_outside_the_log_are_out_of_range(shared_broker: BrokerProcess, topic: str) -> None:
    produce_batches(shared_broker, topic, 1, 100)
    with connect(shared_broker) as client:
        assert fetch(client, topic, 0, 3).error_code == ErrorCode.none  # the log end: empty, no error
        assert fetch(client, topic, 0, 4).error_code == ErrorCode.offset_out_of_range
        assert fetch(client, topic, 0, -1).error_code == ErrorCode.offset_out_of_range


def test_future_leader_epoch_is_unknown_leader_epoch(shared_broker: BrokerProcess, topic: str) -> None:
    with connect(shared_broker) as client:
        assert fetch(client, topic, 0, 0, current_leader_epoch=0).error_code == ErrorCode.none
        assert fetch(client, topic, 0, 0, current_leader_epoch=7).error_code == ErrorCode.unknown_leader_epoch


def test_unknown_partition_does_not_hold_back_the_others(shared_broker: BrokerProcess, topic: str) -> None:
    produce_batches(shared_broker, topic, 1, 100)
    request = fetch_request([(topic, 0, 0, 1 << 20), (topic, 9, 0, 1 << 20)], max_wait_ms=10_000, min_bytes=1 << 20)
    with RawKafkaClient.connect(HOST, shared_broker.port) as client:
        response = client.request(FETCH, 12, request, timeout=5)  # an error answers at once
    good, missing = response.responses[0].partitions
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert [offset for offset, _ in batches_in(good)] == [0]


def offset_for_leader_epoch(client: RawKafkaClient, topic: str, leader_epoch: int, current: int = -1) -> Any:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=(
            OffsetForLeaderTopic(
                topic=topic,
                partitions=(
                    OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=leader_epoch),
                ),
            ),
        ),
    )
    (topic_result,) = client.request(OFFSET_FOR_LEADER_EPOCH, 4, request).topics
    (partition,) = topic_result.partitions
    return partition


def test_offset_for_leader_epoch(shared_broker: BrokerProcess, topic: str) -> None:
    produce_batches(shared_broker, topic, 2, 100)
    with connect(shared_broker) as client:
        current = offset_for_leader_epoch(client, topic, 0)
        assert (current.error_code, current.leader_epoch, current.end_offset) == (ErrorCode.none, 0, 6)
        # An epoch the partition never had, above its latest: undefined, as Kafka answers.
        future = offset_for_leader_epoch(client, topic, 3)
        assert (future.error_code, future.leader_epoch, future.end_offset) == (ErrorCode.none, -1, -1)
        fenced = offset_for_leader_epoch(client, topic, 0, current=9)
        assert fenced.error_code == ErrorCode.unknown_leader_epoch
