"""Split a partitioned request by the broker leading each partition, and merge the answers back.

Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords and DescribeProducers name
partitions that may be led by different brokers, while the client sent them to one proxy node. Each is cut into one
request per leader with the same top-level fields, and the answers are put back together in the
order the client asked: topics in request order, each topic's partitions in request order. A
partition the proxy could not place or whose broker failed gets the error the client should
retry on (its own error entity, built for the request's version), so nothing is dropped. A
request names each partition by an entity holding its index, or (DescribeProducers) by the bare
index: ``partition_index`` reads either.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from barnabas.protocol import ErrorCode, make, response_class

__all__ = ["PARTITIONED", "Partitioned", "merge", "partition_index", "split"]

#: Where a partition goes (a broker id, for the router).
Where = TypeVar("Where", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Partitioned:
    """Where one API keeps its topics and partitions, in requests and in responses."""

    api_key: int
    topics: str
    topic: str
    partitions: str
    #: The field of a request's partition entity holding its index; "" when the partitions are bare indexes.
    index: str
    response_topics: str
    response_topic_entity: str
    response_partitions: str
    response_partition_entity: str
    response_index: str
    #: Fields of a failed partition's response entity besides its index and error code.
    failed_fields: Mapping[str, Any]
    #: Fields of a response built when no broker answered, besides the topics.
    empty_fields: Mapping[str, Any]


NO_THROTTLE = datetime.timedelta(0)

PARTITIONED: dict[int, Partitioned] = {
    0: Partitioned(
        0, "topic_data", "name", "partition_data", "index",
        "responses", "TopicProduceResponse", "partition_responses", "PartitionProduceResponse", "index",
        {"base_offset": -1, "log_start_offset": -1, "record_errors": (), "error_message": None},
        {"throttle_time": NO_THROTTLE},
    ),
    1: Partitioned(
        1, "topics", "topic", "partitions", "partition",
        "responses", "FetchableTopicResponse", "partitions", "PartitionData", "partition_index",
        {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
         "preferred_read_replica": -1, "records": None},
        {"throttle_time": NO_THROTTLE, "error_code": ErrorCode.none, "session_id": 0},
    ),
    2: Partitioned(
        2, "topics", "name", "partitions", "partition_index",
        "topics", "ListOffsetsTopicResponse", "partitions", "ListOffsetsPartitionResponse", "partition_index",
        {"timestamp": -1, "offset": -1, "leader_epoch": -1, "old_style_offsets": ()},
        {"throttle_time": NO_THROTTLE},
    ),
    21: Partitioned(
        21, "topics", "name", "partitions", "partition_index",
        "topics", "DeleteRecordsTopicResult", "partitions", "DeleteRecordsPartitionResult", "partition_index",
        {"low_watermark": -1},
        {"throttle_time": NO_THROTTLE},
    ),
    23: Partitioned(
        23, "topics", "topic", "partitions", "partition",
        "topics", "OffsetForLeaderTopicResult", "partitions", "EpochEndOffset", "partition",
        {"leader_epoch": -1, "end_offset": -1},
        {"throttle_time": NO_THROTTLE},
    ),
    61: Partitioned(
        61, "topics", "name", "partition_indexes", "",
        "topics", "TopicResponse", "partitions", "PartitionResponse", "partition_index",
        {"error_message": None, "active_producers": ()},
        {"throttle_time": NO_THROTTLE},
    ),
}  # fmt: skip


def partition_index(spec: Partitioned, partition: Any) -> int:
    """The index of one of a request's partitions (an entity, or the index itself)."""
    return int(getattr(partition, spec.index) if spec.index else partition)


def split(
    spec: Partitioned, body: Any, place: Callable[[Any, int], Where | None]
) -> tuple[dict[Where, Any], list[tuple[Any, int]]]:
    """Cut ``body`` by where ``place(topic_key, partition)`` sends each partition.

    Returns:
        The sub-request per destination (same top-level fields, only its partitions), and the
        (topic key, partition) pairs ``place`` had no destination for.
    """
    grouped: dict[Where, dict[Any, list[Any]]] = {}
    topics_by_key: dict[Any, Any] = {}
    unplaced: list[tuple[Any, int]] = []
    for topic in getattr(body, spec.topics):
        key = getattr(topic, spec.topic)
        topics_by_key.setdefault(key, topic)
        for partition in getattr(topic, spec.partitions):
            index = partition_index(spec, partition)
            where = place(key, index)
            if where is None:
                unplaced.append((key, index))
            else:
                grouped.setdefault(where, {}).setdefault(key, []).append(partition)
    requests: dict[Where, Any] = {}
    for where, topics in grouped.items():
        sub_topics = tuple(
            dataclasses.replace(topics_by_key[key], **{spec.partitions: tuple(parts)}) for key, parts in topics.items()
        )
        requests[where] = dataclasses.replace(body, **{spec.topics: sub_topics})
    return requests, unplaced


def merge(
    spec: Partitioned,
    version: int,
    body: Any,
    answers: Sequence[Any],
    failed: Mapping[tuple[Any, int], ErrorCode],
) -> Any:
    """One response to ``body`` from the brokers' ``answers`` and the partitions that ``failed``.

    Every partition of the request is answered exactly once, in the request's order; one that
    is in no answer (and not in ``failed``) is answered NOT_LEADER_OR_FOLLOWER.
    """
    found: dict[tuple[Any, int], Any] = {}
    topic_entities: dict[Any, Any] = {}
    for answer in answers:
        for topic in getattr(answer, spec.response_topics):
            key = getattr(topic, spec.topic)
            topic_entities.setdefault(key, topic)
            for partition in getattr(topic, spec.response_partitions):
                found[(key, int(getattr(partition, spec.response_index)))] = partition
    partition_cls = response_class(spec.api_key, version, spec.response_partition_entity)
    topic_cls = response_class(spec.api_key, version, spec.response_topic_entity)
    topics = []
    for topic in getattr(body, spec.topics):
        key = getattr(topic, spec.topic)
        partitions = []
        for partition in getattr(topic, spec.partitions):
            index = partition_index(spec, partition)
            answered = found.get((key, index))
            if answered is None:
                code = failed.get((key, index), ErrorCode.not_leader_or_follower)
                answered = make(partition_cls, **{spec.response_index: index}, error_code=code, **spec.failed_fields)
            partitions.append(answered)
        template = topic_entities.get(key)
        if template is None:
            topics.append(make(topic_cls, **{spec.topic: key, spec.response_partitions: tuple(partitions)}))
        else:
            topics.append(dataclasses.replace(template, **{spec.response_partitions: tuple(partitions)}))
    if answers:
        throttle = max((a.throttle_time for a in answers if hasattr(a, "throttle_time")), default=NO_THROTTLE)
        changes: dict[str, Any] = {spec.response_topics: tuple(topics)}
        if hasattr(answers[0], "throttle_time"):
            changes["throttle_time"] = throttle
        if hasattr(answers[0], "session_id"):
            changes["session_id"] = 0  # the proxy keeps no fetch sessions (KIP-227, Fetch v7+): every fetch is full
        return dataclasses.replace(answers[0], **changes)
    response_cls = response_class(spec.api_key, version)
    return make(response_cls, **{spec.response_topics: tuple(topics)}, **spec.empty_fields)
