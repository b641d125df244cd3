"""Partitioned requests split per leader and their answers merged, byte for byte.

For each of Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords, at the lowest and
the highest version the proxy understands: a client's request frame is decoded as the proxy
decodes it, split by leader, each part encoded and decoded as its broker reads it; the brokers'
answers (in their own order) are encoded and decoded as the proxy reads them, merged, and the
merged answer encoded and decoded as the client reads it.

The request: ``orders`` partitions 2, 0, 3, 1 (led by brokers 3, 1, none, 2), ``events`` 1, 0
(both broker 2), ``audit`` 0 (broker 3). Broker 3 does not answer.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from barnabas.protocol import (
    ErrorCode,
    ProduceRequestData,
    build_record_batch,
    make,
    request_class,
    response_class,
)
from barnabas.proxy.routes import ROUTES, UNDERSTOOD
from barnabas.proxy.split import PARTITIONED, merge, split

from .wire import produce_entity, request_over_wire, response_over_wire

PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 21, 23
NOT_LEADER = ErrorCode.not_leader_or_follower

#: The client's request: topics and partitions in the order it names them.
ASKED: list[tuple[str, list[int]]] = [("orders", [2, 0, 3, 1]), ("events", [1, 0]), ("audit", [0])]
LEADERS: dict[tuple[str, int], int | None] = {
    ("orders", 0): 1,
    ("orders", 1): 2,
    ("orders", 2): 3,
    ("orders", 3): None,
    ("events", 0): 2,
    ("events", 1): 2,
    ("audit", 0): 3,
}
DOWN = 3


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def records(topic: str, partition: int) -> bytes:
    values = [(f"{topic}-{partition}-{i}".encode(), b"value %d" % i * (partition + 1)) for i in range(3)]
    return build_record_batch(values, base_timestamp_ms=1_700_000_000_000 + partition)


@dataclass(frozen=True)
class Api:
    """One partitioned API's request and response layout, as Kafka's JSON schemas name it."""

    key: int
    topics: str
    topic_entity: str
    topic_name: str
    partitions: str
    partition_entity: str
    index: str
    #: Every top-level request field, each set away from its default.
    request_fields: dict[str, Any]
    request_partition: Callable[[str, int], dict[str, Any]]
    response_topics: str
    response_topic_entity: str
    response_partitions: str
    response_partition_entity: str
    response_index: str
    #: A broker's answer for one partition (besides its index and error code).
    answer_partition: Callable[[str, int], dict[str, Any]]
    #: A broker's top-level answer fields (besides the topics), given its broker id.
    answer_fields: Callable[[int], dict[str, Any]]
    #: Fields that are -1 in a partition answered with an error by the proxy.
    unknown: tuple[str, ...] = field(default=())


APIS = {
    PRODUCE: Api(
        PRODUCE, "topic_data", "TopicProduceData", "name", "partition_data", "PartitionProduceData", "index",
        {"transactional_id": "txn-7", "acks": -1, "timeout": ms(1500)},
        lambda topic, p: {"records": records(topic, p)},
        "responses", "TopicProduceResponse", "partition_responses", "PartitionProduceResponse", "index",
        lambda topic, p: {"base_offset": 1000 + p, "log_start_offset": 10 + p, "record_errors": (),
                          "error_message": None},
        lambda broker: {"throttle_time": ms(broker * 10)},
        ("base_offset", "log_start_offset"),
    ),
    FETCH: Api(
        FETCH, "topics", "FetchTopic", "topic", "partitions", "FetchPartition", "partition",
        {"replica_id": -1, "max_wait": ms(500), "min_bytes": 1, "max_bytes": 52_428_800, "isolation_level": 1,
         "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "r1"},
        lambda topic, p: {"current_leader_epoch": 7, "fetch_offset": 100 + p, "last_fetched_epoch": 6,
                          "log_start_offset": -1, "partition_max_bytes": 1_048_576},
        "responses", "FetchableTopicResponse", "partitions", "PartitionData", "partition_index",
        lambda topic, p: {"high_watermark": 1000 + p, "last_stable_offset": 900 + p, "log_start_offset": 10 + p,
                          "aborted_transactions": (), "preferred_read_replica": -1, "records": records(topic, p)},
        lambda broker: {"throttle_time": ms(broker * 10), "error_code": ErrorCode.none, "session_id": 500 + broker},
        ("high_watermark", "last_stable_offset", "log_start_offset", "preferred_read_replica"),
    ),
    LIST_OFFSETS: Api(
        LIST_OFFSETS, "topics", "ListOffsetsTopic", "name", "partitions", "ListOffsetsPartition", "partition_index",
        {"replica_id": -1, "isolation_level": 1},
        lambda topic, p: {"current_leader_epoch": 7, "timestamp": -1},
        "topics", "ListOffsetsTopicResponse", "partitions", "ListOffsetsPartitionResponse", "partition_index",
        lambda topic, p: {"timestamp": 1_700_000_000_000 + p, "offset": 1000 + p, "leader_epoch": 7},
        lambda broker: {"throttle_time": ms(broker * 10)},
        ("timestamp", "offset", "leader_epoch"),
    ),
    DELETE_RECORDS: Api(
        DELETE_RECORDS, "topics", "DeleteRecordsTopic", "name", "partitions", "DeleteRecordsPartition",
        "partition_index",
        {"timeout": ms(2500)},
        lambda topic, p: {"offset": 50 + p},
        "topics", "DeleteRecordsTopicResult", "partitions", "DeleteRecordsPartitionResult", "partition_index",
        lambda topic, p: {"low_watermark": 50 + p},
        lambda broker: {"throttle_time": ms(broker * 10)},
        ("low_watermark",),
    ),
    OFFSET_FOR_LEADER_EPOCH: Api(
        OFFSET_FOR_LEADER_EPOCH, "topics", "OffsetForLeaderTopic", "topic", "partitions", "OffsetForLeaderPartition",
        "partition",
        {"replica_id": -1},
        lambda topic, p: {"current_leader_epoch": 7, "leader_epoch": 5},
        "topics", "OffsetForLeaderTopicResult", "partitions", "EpochEndOffset", "partition",
        lambda topic, p: {"leader_epoch": 5, "end_offset": 1000 + p},
        lambda broker: {"throttle_time": ms(broker * 10)},
        ("leader_epoch", "end_offset"),
    ),
}  # fmt: skip

CASES = [
    pytest.param(APIS[key], version, id=f"{ROUTES[key][0]}-v{version}") for key in APIS for version in UNDERSTOOD[key]
]


def client_request(api: Api, version: int) -> Any:
    """The request a client builds, every field set."""
    topic_cls = request_class(api.key, version, api.topic_entity)
    partition_cls = request_class(api.key, version, api.partition_entity)
    topics = tuple(
        make(
            topic_cls,
            **{
                api.topic_name: name,
                api.partitions: tuple(
                    make(partition_cls, **{api.index: p}, **api.request_partition(name, p)) for p in partitions
                ),
            },
        )
        for name, partitions in ASKED
    )
    return make(request_class(api.key, version), **api.request_fields, **{api.topics: topics})


def as_proxy_sees(api: Api, version: int, body: Any) -> Any:
    """A decoded request as the proxy splits it (the Produce decoder's views become kio's entity)."""
    return produce_entity(body, version) if isinstance(body, ProduceRequestData) else body


def over_wire(api: Api, version: int, body: Any) -> Any:
    """``body`` sent as a frame and decoded by the receiver, then seen as the proxy sees requests."""
    return as_proxy_sees(api, version, request_over_wire(api.key, version, body))


def place(topic: Any, index: int) -> Hashable | None:
    return LEADERS[(topic, index)]


def layout(api: Api, body: Any) -> list[tuple[str, list[int]]]:
    return [
        (getattr(t, api.topic_name), [int(getattr(p, api.index)) for p in getattr(t, api.partitions)])
        for t in getattr(body, api.topics)
    ]


def response_layout(api: Api, response: Any) -> list[tuple[str, list[int]]]:
    return [
        (getattr(t, api.topic_name), [int(getattr(p, api.response_index)) for p in getattr(t, api.response_partitions)])
        for t in getattr(response, api.response_topics)
    ]


def top_level(api: Api, body: Any) -> dict[str, Any]:
    return {f.name: getattr(body, f.name) for f in dataclasses.fields(body) if f.name != api.topics}


def broker_answer(api: Api, version: int, broker: int, sub: Any) -> Any:
    """What ``broker`` answers to ``sub``: its topics and partitions in reverse order."""
    topic_cls = response_class(api.key, version, api.response_topic_entity)
    partition_cls = response_class(api.key, version, api.response_partition_entity)
    topics = tuple(
        make(
            topic_cls,
            **{
                api.topic_name: name,
                api.response_partitions: tuple(
                    make(
                        partition_cls,
                        **{api.response_index: p},
                        error_code=ErrorCode.none,
                        **api.answer_partition(name, p),
                    )
                    for p in reversed(partitions)
                ),
            },
        )
        for name, partitions in reversed(layout(api, sub))
    )
    return make(response_class(api.key, version), **api.answer_fields(broker), **{api.response_topics: topics})


def split_over_wire(api: Api, version: int) -> tuple[Any, dict[int, Any], list[tuple[Any, int]]]:
    """The client's request as the proxy decodes it, and its parts (by broker id) as each broker decodes them."""
    received = over_wire(api, version, client_request(api, version))
    parts, unplaced = split(PARTITIONED[api.key], received, place)
    return received, {cast(int, broker): over_wire(api, version, sub) for broker, sub in parts.items()}, unplaced


@pytest.mark.parametrize(("api", "version"), CASES)
def test_split_sends_each_leader_its_partitions_with_the_top_level_fields(api: Api, version: int) -> None:
    received, parts, unplaced = split_over_wire(api, version)
    assert sorted(parts) == [1, 2, 3]
    for broker, sub in parts.items():
        expected = [(name, [p for p in partitions if LEADERS[(name, p)] == broker]) for name, partitions in ASKED]
        assert layout(api, sub) == [(name, ps) for name, ps in expected if ps], broker
        assert top_level(api, sub) == top_level(api, received)
        for topic in getattr(sub, api.topics):
            name = getattr(topic, api.topic_name)
            for partition in getattr(topic, api.partitions):
                index = int(getattr(partition, api.index))
                fields = {k: v for k, v in api.request_partition(name, index).items() if hasattr(partition, k)}
                assert {k: getattr(partition, k) for k in fields} == fields
    assert unplaced == [("orders", 3)]
    assert top_level(api, received) == top_level(api, client_request(api, version))


@pytest.mark.parametrize(("api", "version"), CASES)
def test_merge_answers_every_partition_in_request_order(api: Api, version: int) -> None:
    received, parts, unplaced = split_over_wire(api, version)
    answers = [
        response_over_wire(api.key, version, broker_answer(api, version, broker, sub))
        for broker, sub in parts.items()
        if broker != DOWN
    ]
    failed = dict.fromkeys(unplaced, NOT_LEADER)
    failed.update(dict.fromkeys([(name, p) for name, ps in layout(api, parts[DOWN]) for p in ps], NOT_LEADER))

    merged = merge(PARTITIONED[api.key], version, received, answers, failed)
    assert type(merged) is response_class(api.key, version)
    partition_cls = response_class(api.key, version, api.response_partition_entity)
    for topic in getattr(merged, api.response_topics):
        assert type(topic) is response_class(api.key, version, api.response_topic_entity)
        assert all(type(p) is partition_cls for p in getattr(topic, api.response_partitions))
    client_sees = response_over_wire(api.key, version, merged)

    assert response_layout(api, client_sees) == ASKED
    for topic in getattr(client_sees, api.response_topics):
        name = getattr(topic, api.topic_name)
        for partition in getattr(topic, api.response_partitions):
            index = int(getattr(partition, api.response_index))
            if LEADERS[(name, index)] in (None, DOWN):
                assert partition.error_code == NOT_LEADER, (name, index)
                assert {k: getattr(partition, k) for k in api.unknown if hasattr(partition, k)} == {
                    k: -1 for k in api.unknown if hasattr(partition, k)
                }
            else:
                assert partition.error_code == ErrorCode.none, (name, index)
                answer = api.answer_partition(name, index)
                assert {k: getattr(partition, k) for k in answer if hasattr(partition, k)} == {
                    k: v for k, v in answer.items() if hasattr(partition, k)
                }
    if hasattr(client_sees, "throttle_time"):
        assert client_sees.throttle_time == ms(20)  # the slowest answer's (brokers 1 and 2 answered)
    if hasattr(client_sees, "session_id"):
        assert client_sees.session_id == 0  # the brokers' sessions are theirs, not the client's
        assert client_sees.error_code == ErrorCode.none


@pytest.mark.parametrize(("api", "version"), CASES)
def test_merge_without_answers_is_a_whole_response(api: Api, version: int) -> None:
    received = over_wire(api, version, client_request(api, version))
    merged = merge(PARTITIONED[api.key], version, received, [], {})
    client_sees = response_over_wire(api.key, version, merged)
    assert response_layout(api, client_sees) == ASKED
    codes = {
        p.error_code for t in getattr(client_sees, api.response_topics) for p in getattr(t, api.response_partitions)
    }
    assert codes == {NOT_LEADER}
    if hasattr(client_sees, "throttle_time"):
        assert client_sees.throttle_time == ms(0)
    if hasattr(client_sees, "session_id"):
        assert (client_sees.session_id, client_sees.error_code) == (0, ErrorCode.none)


def test_merge_answers_a_partition_no_broker_named_not_leader_and_keeps_a_given_error() -> None:
    api, version = APIS[LIST_OFFSETS], UNDERSTOOD[LIST_OFFSETS][1]
    received = over_wire(api, version, client_request(api, version))
    parts, _ = split(PARTITIONED[api.key], received, lambda topic, index: 1)
    (sub,) = parts.values()
    answer = broker_answer(api, version, 1, sub)
    missing = {("events", 0), ("audit", 0)}
    partial = dataclasses.replace(
        answer,
        topics=tuple(
            dataclasses.replace(
                t, partitions=tuple(p for p in t.partitions if (t.name, p.partition_index) not in missing)
            )
            for t in answer.topics
        ),
    )
    failed = {("audit", 0): ErrorCode.unknown_topic_or_partition, ("orders", 2): NOT_LEADER}
    merged = merge(PARTITIONED[api.key], version, received, [partial], failed)
    codes = {
        (t.name, p.partition_index): p.error_code
        for t in response_over_wire(api.key, version, merged).topics
        for p in t.partitions
    }
    assert codes[("events", 0)] == NOT_LEADER
    assert codes[("audit", 0)] == ErrorCode.unknown_topic_or_partition
    assert codes[("orders", 2)] == ErrorCode.none  # a broker's answer wins over an error recorded for it
    assert codes[("events", 1)] == ErrorCode.none


@pytest.mark.parametrize("version", UNDERSTOOD[PRODUCE])
def test_produce_records_survive_split_and_reencoding_unchanged(version: int) -> None:
    _, parts, _ = split_over_wire(APIS[PRODUCE], version)
    seen = {}
    for sub in parts.values():
        for topic in sub.topic_data:
            for partition in topic.partition_data:
                seen[(topic.name, partition.index)] = bytes(partition.records)
    assert seen == {(name, p): records(name, p) for (name, p), leader in LEADERS.items() if leader is not None}


DESCRIBE_PRODUCERS = 61


def test_describe_producers_partitions_are_bare_indexes_split_and_merged_the_same_way() -> None:
    """DescribeProducers names partitions by index alone; each leader is asked for its own, the answers
    merged in the request's order, the unplaced and the down broker's partitions NOT_LEADER_OR_FOLLOWER
    (on which Kafka's admin client looks the leader up again)."""
    spec, version = PARTITIONED[DESCRIBE_PRODUCERS], UNDERSTOOD[DESCRIBE_PRODUCERS][1]
    topic_cls = request_class(DESCRIBE_PRODUCERS, version, "TopicRequest")
    body = request_class(DESCRIBE_PRODUCERS, version)(
        topics=tuple(topic_cls(name=name, partition_indexes=tuple(ps)) for name, ps in ASKED)
    )
    received = request_over_wire(DESCRIBE_PRODUCERS, version, body)
    parts, unplaced = split(spec, received, place)
    assert unplaced == [("orders", 3)]
    asked_of = {
        broker: [(t.name, list(t.partition_indexes)) for t in request_over_wire(DESCRIBE_PRODUCERS, version, s).topics]
        for broker, s in parts.items()
    }
    assert asked_of == {3: [("orders", [2]), ("audit", [0])], 1: [("orders", [0])],
                        2: [("orders", [1]), ("events", [1, 0])]}  # fmt: skip
    producer_cls = response_class(DESCRIBE_PRODUCERS, version, "ProducerState")
    partition_cls = response_class(DESCRIBE_PRODUCERS, version, "PartitionResponse")
    topic_response_cls = response_class(DESCRIBE_PRODUCERS, version, "TopicResponse")

    def answer(broker: int, asked: list[tuple[str, list[int]]]) -> Any:
        producers = (
            make(
                producer_cls,
                producer_id=broker,
                producer_epoch=1,
                last_sequence=9,
                last_timestamp=1_700_000_000_000,
                coordinator_epoch=2,
                current_txn_start_offset=-1,
            ),
        )
        topics = tuple(
            make(topic_response_cls, name=name, partitions=tuple(
                make(partition_cls, partition_index=p, error_code=ErrorCode.none, error_message=None,
                     active_producers=producers) for p in reversed(ps)))
            for name, ps in reversed(asked)
        )  # fmt: skip
        response = make(response_class(DESCRIBE_PRODUCERS, version), throttle_time=ms(broker), topics=topics)
        return response_over_wire(DESCRIBE_PRODUCERS, version, response)

    answers = [answer(broker, asked) for broker, asked in asked_of.items() if broker != DOWN]
    failed = dict.fromkeys(unplaced, NOT_LEADER)
    merged = response_over_wire(DESCRIBE_PRODUCERS, version, merge(spec, version, received, answers, failed))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in merged.topics] == ASKED
    for topic in merged.topics:
        for p in topic.partitions:
            leader = LEADERS[(topic.name, p.partition_index)]
            if leader in (None, DOWN):
                assert (p.error_code, p.active_producers) == (NOT_LEADER, ())
            else:
                assert p.error_code == ErrorCode.none
                assert [s.producer_id for s in p.active_producers] == [leader]
    assert merged.throttle_time == ms(2)
