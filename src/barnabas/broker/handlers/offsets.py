"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47): committed offsets through the coordinator.

Kafka's rules at the edge: a commit to a topic that does not exist gets
UNKNOWN_TOPIC_OR_PARTITION for its partitions (the rest commit); OffsetFetch answers -1 with
no error for a partition with nothing committed, all of a group's offsets when no topics are
named, and from v8 several groups at once; a group error before v2 is repeated in every
partition, as those versions have no top-level error.

Authorization (KafkaApis): OffsetCommit needs READ on the group (else every partition is
GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED); OffsetFetch needs
DESCRIBE on each group (its GROUP_AUTHORIZATION_FAILED) and on each topic named (its partitions'
TOPIC_AUTHORIZATION_FAILED; asked for all, a group's offsets of other topics are left out);
OffsetDelete needs DELETE on the group (top-level GROUP_AUTHORIZATION_FAILED) and READ on each
topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.groups import OffsetCommitValue, subscribed_topics
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed, allowed_names
from ._build import NO_THROTTLE, make, response_types
from ._needs import GroupNeeds
from ._view import view_of

OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47

TopicPartition = tuple[str, int]
_TOPIC_DENIED = ErrorCode.topic_authorization_failed


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
    group_allowed = allowed(state, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = allowed_names(state, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    for topic in body.topics:
        known = state.node.topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not group_allowed or topic.name not in readable:
                errors[tp] = ErrorCode.group_authorization_failed if not group_allowed else _TOPIC_DENIED
                continue
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
) -> tuple[ErrorCode, dict[TopicPartition, OffsetCommitValue | None], set[str]]:
    """The group's error, its offsets, and the topics asked for that the principal may not describe."""
    if not allowed(state, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, {}, set()
    if topics is None:
        code, offsets = state.groups.fetch_offsets(group_id, None)
        names = {tp[0] for tp in offsets}
        visible = allowed_names(state, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_denied=False)
        return code, {tp: v for tp, v in offsets.items() if tp[0] in visible}, set()
    names = {t.name for t in topics}
    visible = allowed_names(state, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    wanted = [(t.name, p) for t in topics if t.name in visible for p in t.partition_indexes]
    code, offsets = state.groups.fetch_offsets(group_id, wanted)
    if code is ErrorCode.none:
        offsets.update(((t.name, p), None) for t in topics if t.name not in visible for p in t.partition_indexes)
    return code, offsets, names - visible


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
            code, offsets, denied = _fetch_group(state, group.group_id, group.topics)
            results = {tp: _partition_fields(v, _TOPIC_DENIED if tp[0] in denied else ErrorCode.none)
                       for tp, v in offsets.items()}  # fmt: skip
            topics = _topics_of(types, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", results)
            groups.append(make(types.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics, error_code=code))
        response = make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
        return encode_response(request.header.correlation_id, response)
    code, offsets, denied = _fetch_group(state, body.group_id, body.topics)
    if code is not ErrorCode.none and version < 2 and body.topics is not None:
        offsets = {(t.name, p): None for t in body.topics for p in t.partition_indexes}
    partition_error = code if version < 2 else ErrorCode.none
    results = {tp: _partition_fields(v, _TOPIC_DENIED if tp[0] in denied else partition_error)
               for tp, v in offsets.items()}  # fmt: skip
    topics = _topics_of(types, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", results)
    response = make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=code)
    return encode_response(request.header.correlation_id, response)


async def handle_offset_delete(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(OFFSET_DELETE, request.header.api_version)
    body = view_of(OffsetDeleteRequest, request.body)
    if not allowed(state, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        response = make(types.OffsetDeleteResponse, error_code=ErrorCode.group_authorization_failed,
                        throttle_time=NO_THROTTLE, topics=())  # fmt: skip
        return encode_response(request.header.correlation_id, response)
    readable = allowed_names(state, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    partitions = [(t.name, p.partition_index) for t in body.topics if t.name in readable for p in t.partitions]
    code, results = (
        await state.groups.delete_offsets(body.group_id, partitions, subscribed_topics)
        if partitions
        else (ErrorCode.none, {})
    )
    if code is ErrorCode.none:
        results.update(
            ((t.name, p.partition_index), _TOPIC_DENIED) for t in body.topics if t.name not in readable
            for p in t.partitions
        )  # fmt: skip
    fields = {tp: {"error_code": e} for tp, e in results.items()}
    topics = _topics_of(types, "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", fields)
    response = make(types.OffsetDeleteResponse, error_code=code, throttle_time=NO_THROTTLE, topics=topics)
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(OFFSET_COMMIT, "OffsetCommit", 2, 9, handle_offset_commit),
    ApiSpec(OFFSET_FETCH, "OffsetFetch", 1, 9, handle_offset_fetch),
    ApiSpec(OFFSET_DELETE, "OffsetDelete", 0, 0, handle_offset_delete),
]
