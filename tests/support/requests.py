"""Typed request helpers over RawKafkaClient for tests that speak the protocol directly.

Each helper builds one request with kio's schema classes, sends it and returns the part of the
response a test asserts on.
"""

from __future__ import annotations

import contextlib
import datetime
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import crc32c
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i32Timedelta

from barnabas.protocol import build_record_batch
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawKafkaClient

HOST = "127.0.0.1"
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
LATEST = -1


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(*values: bytes) -> bytes:
    """A valid v2 batch as a client sends it (baseOffset 0, no producer id)."""
    return build_record_batch([(b"key", value) for value in values], base_timestamp_ms=now_ms())


def recrc(data: bytes | bytearray) -> bytes:
    """Rewrite the CRC-32C of the batch at the start of ``data`` (bytes 21..end)."""
    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def timeout_ms(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


@contextlib.contextmanager
def connect(broker: BrokerProcess) -> Iterator[RawKafkaClient]:
    with RawKafkaClient.connect(HOST, broker.port) as client:
        yield client


def local_port(client: RawKafkaClient) -> int:
    return int(client.sock.getsockname()[1])


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="barnabas-tests", client_software_version="1")


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timeout_ms(10_000),
        topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),
        ),
    )


def produce(client: RawKafkaClient, topic: str, partition: int, records: bytes | None, acks: int = -1) -> Any:
    """Produce v9; return the single partition's response."""
    response = client.request(PRODUCE, 9, produce_request(topic, partition, records, acks))
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partition_responses
    assert topic_response.name == topic
    assert partition_response.index == partition
    return partition_response


def list_offsets(client: RawKafkaClient, topic: str, partition: int, timestamp: int = LATEST) -> Any:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=(
                    ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),
                ),
            ),
        ),
    )
    (topic_response,) = client.request(LIST_OFFSETS, 7, request).topics
    (partition_response,) = topic_response.partitions
    return partition_response


def latest_offset(client: RawKafkaClient, topic: str, partition: int = 0) -> int:
    response = list_offsets(client, topic, partition)
    assert response.error_code == ErrorCode.none, response
    return int(response.offset)


#: What a partition answers while its leader is being chosen (a restarted broker leads again only
#: once the controller has made it leader, as in Kafka; clients retry these).
NOT_LED_YET = {ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition}


def latest_offset_once_led(client: RawKafkaClient, topic: str, partition: int = 0, timeout_s: float = 30.0) -> int:
    """The latest offset, asked again while the partition has no leader yet (after a restart)."""
    deadline = time.monotonic() + timeout_s
    while (response := list_offsets(client, topic, partition)).error_code in NOT_LED_YET:
        assert time.monotonic() < deadline, f"{topic}-{partition} has no leader after {timeout_s} s: {response}"
        time.sleep(0.05)
    assert response.error_code == ErrorCode.none, response
    return int(response.offset)


def fetch_request(
    partitions: list[tuple[str, int, int, int]],
    *,
    max_bytes: int = 1 << 20,
    min_bytes: int = 1,
    max_wait_ms: int = 0,
    current_leader_epoch: int = -1,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: tuple[tuple[str, int], ...] = (),
) -> FetchRequest:
    """Fetch v12 of (topic, partition, offset, partition_max_bytes) entries, in order; sessionless unless a
    ``session_id`` or ``session_epoch`` says otherwise (KIP-227), ``forgotten`` (topic, partition) pairs."""
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset, partition_max_bytes in partitions:
        topics.setdefault(topic, []).append(
            FetchPartition(
                partition=partition,
                current_leader_epoch=current_leader_epoch,
                fetch_offset=offset,
                partition_max_bytes=partition_max_bytes,
            )
        )
    return FetchRequest(
        max_wait=timeout_ms(max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(FetchTopic(topic=t, partitions=tuple(p)) for t, p in topics.items()),
        forgotten_topics_data=tuple(ForgottenTopic(topic=topic, partitions=(index,)) for topic, index in forgotten),
        rack_id="",
    )


def fetch(
    client: RawKafkaClient,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    current_leader_epoch: int = -1,
) -> Any:
    """Fetch v12 of one partition; return its PartitionData."""
    request = fetch_request(
        [(topic, partition, offset, max_bytes)],
        max_bytes=max_bytes,
        min_bytes=min_bytes,
        max_wait_ms=max_wait_ms,
        current_leader_epoch=current_leader_epoch,
    )
    (topic_response,) = client.request(FETCH, 12, request).responses
    (partition_data,) = topic_response.partitions
    return partition_data


def create_topics(
    client: RawKafkaClient, names: list[str], partitions: int = 1, replication_factor: int = 1, **configs: str
) -> dict[str, Any]:
    """CreateTopics v7; return each topic's result by name."""
    request = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=(),
                configs=tuple(CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()),
            )
            for name in names
        ),
        timeout=timeout_ms(10_000),
        validate_only=False,
    )
    return {result.name: result for result in client.request(CREATE_TOPICS, 7, request).topics}


def create_topic(client: RawKafkaClient, name: str, partitions: int = 1, **configs: str) -> None:
    result = create_topics(client, [name], partitions, **configs)[name]
    assert result.error_code == ErrorCode.none, result


def metadata(client: RawKafkaClient, names: list[str], auto_create: bool) -> dict[str, Any]:
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=name) for name in names),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )
    return {topic.name: topic for topic in client.request(METADATA, 12, request).topics}
