"""DescribeTopicPartitions (75): topics' partitions a page at a time (KIP-966), what Kafka's Admin
``describeTopics`` asks first since 3.8 (it falls back to Metadata only where this is not served).

Kafka semantics kept (DescribeTopicPartitionsRequestHandler, KRaftMetadataCache): an empty topic
list means every topic the principal may DESCRIBE, silently leaving out the others; named topics
it may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED with the zero topic id, after the others. Topics
are answered in name order from the cursor's topic (its partitions from the cursor's index), at
most ``min(max.request.partition.size.limit, response_partition_limit)`` partitions (at least one)
in all; where that stops, ``next_cursor`` names the first partition left out. A cursor whose topic
is not among those named, or with a negative index, is INVALID_REQUEST for every topic named. A
named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION if its name
is not a legal one). A partition's leader is -1 while it has no endpoint on the client's listener;
its offline replicas are those not registered with one. barnabas keeps no eligible leader
replicas: both ELR lists are empty, as Kafka answers with the feature off.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from barnabas.cluster import Topic, topic_name_problem
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ..request_context import LISTENER_NAME
from ._authorize import allowed, authorized_operations
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

API_KEY = 75
ZERO_UUID = uuid.UUID(int=0)
_DESCRIBE = AclOperation.DESCRIBE


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRequest:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cursor:
    topic_name: str
    partition_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsRequest:
    topics: tuple[TopicRequest, ...]
    response_partition_limit: int = 2000
    cursor: Cursor | None = None


def handle(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(DescribeTopicPartitionsRequest, request.body)
    cursor = body.cursor
    after = cursor.topic_name if cursor is not None else ""
    every = not body.topics
    names = sorted(
        {name for name in (state.node.topics.topics if every else (t.name for t in body.topics)) if name >= after}
    )
    if cursor is not None and ((not every and cursor.topic_name not in names) or cursor.partition_index < 0):
        refused = tuple(_failed(types, ErrorCode.invalid_request, t.name) for t in body.topics)
        return _encode(request, types, refused, None)
    denied = [n for n in names if not allowed(state, _DESCRIBE, ResourceType.TOPIC, n, log_denied=not every)]
    first_index = cursor.partition_index if cursor is not None and cursor.topic_name not in denied else 0
    limit = max(min(int(state.node.config["max.request.partition.size.limit"]), body.response_partition_limit), 1)
    topics, next_cursor = _page(state, types, [n for n in names if n not in denied], after, first_index, limit, every)
    if not every:
        topics += [_failed(types, ErrorCode.topic_authorization_failed, name) for name in denied]
    return _encode(request, types, tuple(topics), next_cursor)


def _page(  # noqa: PLR0917 - what one page is taken from
    state: NodeNeeds, types: Any, names: Iterable[str], cursor_topic: str, first_index: int, limit: int, every: bool
) -> tuple[list[Any], Any]:
    """Topic answers up to ``limit`` partitions, and the cursor of the first partition left out (or None)."""
    listener = LISTENER_NAME.get()
    reachable = state.node.brokers_on(listener)
    answers: list[Any] = []
    remaining = limit
    for name in names:
        if remaining == 0:
            return answers, make(types.Cursor, topic_name=name, partition_index=0)
        topic = state.node.topic(name)
        if topic is None:
            if not every:
                unknown = (
                    ErrorCode.invalid_topic_exception
                    if topic_name_problem(name)
                    else ErrorCode.unknown_topic_or_partition
                )
                answers.append(_failed(types, unknown, name))
            continue
        start = first_index if name == cursor_topic else 0
        indexes = sorted(topic.assignment)[start : start + remaining]
        partitions = tuple(_partition(state, types, topic, index, reachable) for index in indexes)
        answers.append(
            make(
                types.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.none,
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=partitions,
                topic_authorized_operations=authorized_operations(state, ResourceType.TOPIC, name),
            )
        )
        following = start + len(indexes)
        if following < len(topic.assignment):
            return answers, make(types.Cursor, topic_name=name, partition_index=following)
        remaining -= len(indexes)
    return answers, None


def _partition(state: NodeNeeds, types: Any, topic: Topic, index: int, reachable: dict[int, Any]) -> Any:
    replicas = topic.assignment[index]
    partition_state = state.node.partition_state(topic.name, index)
    leader = partition_state.leader if partition_state is not None else -1
    return make(
        types.DescribeTopicPartitionsResponsePartition,
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=leader if leader in reachable else -1,
        leader_epoch=partition_state.leader_epoch if partition_state is not None else -1,
        replica_nodes=tuple(replicas),
        isr_nodes=tuple(partition_state.isr) if partition_state is not None else (),
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=tuple(r for r in replicas if r not in reachable),
    )


def _failed(types: Any, error: ErrorCode, name: str) -> Any:
    return make(
        types.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=(),
    )


def _encode(request: Request, types: Any, topics: tuple[Any, ...], next_cursor: Any) -> bytes:
    response = make(
        types.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=topics, next_cursor=next_cursor
    )
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "DescribeTopicPartitions", 0, 0, handle)
