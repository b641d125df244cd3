"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47): committed offsets through the coordinator.

Kafka's rules at the edge: a commit to a topic that does not exist gets
UNKNOWN_TOPIC_OR_PARTITION for its partitions (the rest commit); OffsetFetch answers -1 with
no error for a partition with nothing committed, all of a group's offsets when no topics are
named, and from v8 several groups at once; a group error before v2 is repeated in every
partition, as those versions have no top-level error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.groups import OffsetCommitValue, subscribed_topics
from barnabas.protocol import ErrorCode, Request, encode_response

from ..registry import ApiSpec
from ._build import NO_THROTTLE, make, response_types
from ._needs import GroupNeeds
from ._view import view_of

OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47

TopicPartition = tuple[str, int]


# -- Request views -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_metadata: str | None
    #: v6+ (KIP-320).
    committed_leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    topics: tuple[OffsetCommitRequestTopic, ...]
    #: v2-v4; -1 keeps the broker's offsets.retention.minutes (KIP-211 removed it).
    retention_time_ms: int = -1
    #: v7+ (KIP-345).
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestTopic:
    """OffsetFetchRequestTopic (v1-v7) and OffsetFetchRequestTopics (v8+)."""

    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestGroup:
    """v8+ (KIP-709)."""

    group_id: str
    #: Null means all the group's offsets.
    topics: tuple[OffsetFetchRequestTopic, ...] | None
    #: v9+ (KIP-848).
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    #: v1-v7: the one group asked about.
    group_id: str = ""
    #: v1-v7; null (v2+) means all the group's offsets.
    topics: tuple[OffsetFetchRequestTopic, ...] | None = ()
    #: v7+ (KIP-447).
    require_stable: bool = False
    #: v8+ (KIP-709): several groups at once.
    groups: tuple[OffsetFetchRequestGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequestPartition:
    partition_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequestTopic:
    name: str
    partitions: tuple[OffsetDeleteRequestPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[OffsetDeleteRequestTopic, ...]


# -- Handlers ----------------------------------------------------------------------------------


def _topics_of(
    types: Any, topic_cls: str, partition_cls: str, results: dict[TopicPartition, Any], **partition_fields: Any
) -> tuple[Any, ...]:
    grouped: dict[str, list[Any]] = {}
    for (topic, partition), fields in results.items():
        grouped.setdefault(topic, []).append(
            make(getattr(types, partition_cls), partition_index=partition, **fields, **partition_fields)
        )
    return tuple(make(getattr(types, topic_cls), name=t, partitions=tuple(ps)) for t, ps in grouped.items())


async def handle_offset_commit(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(OFFSET_COMMIT, request.header.api_version)
    body = view_of(OffsetCommitRequest, request.body)
    now_ms = state.node.now_ms()
    wanted: dict[TopicPartition, OffsetCommitValue] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in body.topics:
        known = state.node.topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if known is None or tp[1] not in known.assignment:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            wanted[tp] = OffsetCommitValue(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp=now_ms,
            )
    if wanted:
        errors.update(
            await state.groups.commit_offsets(
                body.group_id,
                body.member_id,
                body.group_instance_id,
                body.generation_id_or_member_epoch,
                wanted,
            )
        )
    ordered = {
        (t.name, p.partition_index): {"error_code": errors[(t.name, p.partition_index)]}
        for t in body.topics
        for p in t.partitions
    }
    topics = _topics_of(types, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", ordered)
    response = make(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
    return encode_response(request.header.correlation_id, response)


def _fetch_group(
    state: GroupNeeds, group_id: str, topics: Sequence[OffsetFetchRequestTopic] | None
) -> tuple[ErrorCode, dict[TopicPartition, OffsetCommitValue | None]]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    return state.groups.fetch_offsets(group_id, wanted)


def _partition_fields(value: OffsetCommitValue | None, error: ErrorCode) -> dict[str, Any]:
    if value is None:
        return {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {
        "committed_offset": value.offset,
        "committed_leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "error_code": error,
    }


def handle_offset_fetch(state: GroupNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(OFFSET_FETCH, version)
    body = view_of(OffsetFetchRequest, request.body)
    if version >= 8:
        groups = []
        for group in body.groups:
            code, offsets = _fetch_group(state, group.group_id, group.topics)
            results = {tp: _partition_fields(v, ErrorCode.none) for tp, v in offsets.items()}
            topics = _topics_of(types, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", results)
            groups.append(make(types.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics, error_code=code))
        response = make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
        return encode_response(request.header.correlation_id, response)
    code, offsets = _fetch_group(state, body.group_id, body.topics)
    if code is not ErrorCode.none and version < 2 and body.topics is not None:
        offsets = {(t.name, p): None for t in body.topics for p in t.partition_indexes}
    partition_error = code if version < 2 else ErrorCode.none
    results = {tp: _partition_fields(v, partition_error) for tp, v in offsets.items()}
    topics = _topics_of(types, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", results)
    response = make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=code)
    return encode_response(request.header.correlation_id, response)


async def handle_offset_delete(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(OFFSET_DELETE, request.header.api_version)
    body = view_of(OffsetDeleteRequest, request.body)
    partitions = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    code, results = await state.groups.delete_offsets(body.group_id, partitions, subscribed_topics)
    fields = {tp: {"error_code": e} for tp, e in results.items()}
    topics = _topics_of(types, "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", fields)
    response = make(types.OffsetDeleteResponse, error_code=code, throttle_time=NO_THROTTLE, topics=topics)
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(OFFSET_COMMIT, "OffsetCommit", 2, 9, handle_offset_commit),
    ApiSpec(OFFSET_FETCH, "OffsetFetch", 1, 9, handle_offset_fetch),
    ApiSpec(OFFSET_DELETE, "OffsetDelete", 0, 0, handle_offset_delete),
]
