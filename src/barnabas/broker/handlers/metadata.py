"""Metadata (key 3): brokers, controller and topic partitions, creating topics on demand.

Kafka semantics kept: a null topic list (or an empty one in v0) means every topic; an empty
list in v1+ means none; v0-3 always allow auto-creation, v4+ ask with a flag, and the broker's
``auto.create.topics.enable`` has the last word. An illegal name gets INVALID_TOPIC_EXCEPTION.
The controller id always names a live broker: kafkajs sends InitProducerId there. Brokers are
given with their endpoint on the listener the client connected on, and brokers without one are
left out (Kafka's MetadataCache); a leader without one is LISTENER_NOT_FOUND from v6.

Authorization (KafkaApis.handleTopicMetadataRequest): asked for every topic, a principal is
given those it may DESCRIBE and no word of the others; a topic named that it may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED without its id (its existence is not disclosed); auto-creating a topic
needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. Authorized
operations (v8+) are answered when asked for: a topic's per topic, the cluster's (v8-v10) only to
a principal that may DESCRIBE the cluster (0 to others).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import cast

from barnabas.cluster import Topic, topic_name_problem
from barnabas.protocol import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ErrorCode,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    Request,
    encode_metadata_response,
    encode_metadata_topic,
)
from barnabas.security.acl import CLUSTER_NAME, AclOperation, ResourceType

from ..registry import ApiSpec
from ..request_context import LISTENER_NAME
from ..topic_admin import TopicAdminError, create_topic, live_brokers
from ._authorize import allowed, allowed_names, authorized_operations, cluster_allowed
from ._needs import ClusterNeeds, NodeNeeds
from ._view import view_of

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequestTopic:
    #: Null from v10, for a topic asked for by id.
    name: str | None
    #: v10+; kio reads Kafka's zero UUID (no id) as None.
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequest:
    #: Null (v1+) means every topic.
    topics: tuple[MetadataRequestTopic, ...] | None
    #: v4+; v0-v3 always allow it.
    allow_auto_topic_creation: bool = True
    #: v8-v10 (KIP-430; Kafka moved it to DescribeCluster).
    include_cluster_authorized_operations: bool = False
    #: v8+ (KIP-430).
    include_topic_authorized_operations: bool = False


def topic_section(state: NodeNeeds, topic: Topic, version: int) -> bytes:
    """A topic's encoded section, built once per version and change of that topic or the live brokers.

    Clients ask for Metadata often, and a topic may have thousands of partitions; the answer
    only changes with the topic's document and partition states and with the live brokers
    (``NodeState.derived``). While 10,000 partitions are led, each change re-encodes its own topic.
    """
    cache = state.node.derived()
    listener = LISTENER_NAME.get()
    key = ("metadata", topic.name, version, listener)
    built_at = state.node.topics.topic_generation(topic.name)
    cached = cache.get(key)
    if cached is not None and cached[0] is topic and cached[1] == built_at:
        return cast(bytes, cached[2])
    encoded = encode_metadata_topic(version, _build_topic_metadata(state, topic, listener, version))
    cache[key] = (topic, built_at, encoded)
    return encoded


def _build_topic_metadata(state: NodeNeeds, topic: Topic, listener: str, version: int) -> MetadataTopic:
    live = set(live_brokers(state.node))
    reachable = state.node.brokers_on(listener)
    partitions = []
    for index, replicas in sorted(topic.assignment.items()):
        partition_state = state.node.partition_state(topic.name, index)
        leader = partition_state.leader if partition_state else -1
        error = ErrorCode.none
        if leader not in live:
            error, leader = ErrorCode.leader_not_available, -1
        elif leader not in reachable:
            error = ErrorCode.listener_not_found if version >= 6 else ErrorCode.leader_not_available
            leader = -1
        partitions.append(
            MetadataPartition(
                error_code=error,
                partition_index=index,
                leader_id=leader,
                leader_epoch=partition_state.leader_epoch if partition_state else -1,
                replica_nodes=replicas,
                isr_nodes=partition_state.isr if partition_state else (),
                offline_replicas=[r for r in replicas if r not in live],
            )
        )
    return MetadataTopic(ErrorCode.none, topic.name, topic.topic_id, topic.internal, partitions)


def _section(state: NodeNeeds, topic: Topic, version: int, with_operations: bool) -> MetadataTopic | bytes:
    """A topic's section; with its authorized operations (never cached: they are the principal's)."""
    if not with_operations:
        return topic_section(state, topic, version)
    built = _build_topic_metadata(state, topic, LISTENER_NAME.get(), version)
    return built._replace(topic_authorized_operations=authorized_operations(state, ResourceType.TOPIC, topic.name))


def _may_create(state: NodeNeeds, name: str) -> bool:
    return cluster_allowed(state, AclOperation.CREATE, log_denied=False) or allowed(
        state, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def _missing(error: ErrorCode, name: str | None, topic_id: uuid.UUID | None = None) -> MetadataTopic:
    return MetadataTopic(error, name, topic_id or ZERO_UUID, False, [])


async def _resolve(  # noqa: PLR0917 - the request, the topic asked and how
    state: NodeNeeds, version: int, name: str | None, topic_id: uuid.UUID | None, auto_create: bool, with_ops: bool
) -> MetadataTopic | bytes:
    if name is None:
        by_id = next((t for t in state.node.topics.topics.values() if t.topic_id == topic_id), None)
        if by_id is None:
            return _missing(ErrorCode.unknown_topic_id, None, topic_id)
        if not allowed(state, AclOperation.DESCRIBE, ResourceType.TOPIC, by_id.name):
            return _missing(ErrorCode.topic_authorization_failed, None, topic_id)  # ids are not secret (Kafka)
        return _section(state, by_id, version, with_ops)
    if not allowed(state, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _missing(ErrorCode.topic_authorization_failed, name)
    topic = state.node.topic(name)
    if topic is not None:
        return _section(state, topic, version, with_ops)
    if auto_create and not _may_create(state, name):
        return _missing(ErrorCode.topic_authorization_failed, name)
    if topic_name_problem(name):
        return _missing(ErrorCode.invalid_topic_exception, name)
    if not auto_create:
        return _missing(ErrorCode.unknown_topic_or_partition, name)
    try:
        topic = await create_topic(state.node, name)
    except TopicAdminError as exc:
        if exc.error_code is not ErrorCode.topic_already_exists:
            return _missing(exc.error_code, name)
        topic = state.node.topic(name)
        if topic is None:
            return _missing(ErrorCode.leader_not_available, name)
    return _section(state, topic, version, with_ops)


async def handle(state: ClusterNeeds, request: Request) -> bytes:
    version = request.header.api_version
    body = view_of(MetadataRequest, request.body)
    requested = body.topics
    auto_create = bool(state.node.config["auto.create.topics.enable"]) and body.allow_auto_topic_creation
    with_ops = version >= 8 and body.include_topic_authorized_operations
    if requested is None or (version == 0 and not requested):
        every = state.node.topics.topics
        visible = allowed_names(state, AclOperation.DESCRIBE, ResourceType.TOPIC, every, log_denied=False)
        topics: list[MetadataTopic | bytes] = [
            _section(state, t, version, with_ops) for name, t in sorted(every.items()) if name in visible
        ]
    else:
        topics = []
        seen: set[object] = set()
        for entry in requested:
            name = entry.name
            topic_id = entry.topic_id
            key = name if name is not None else topic_id
            if key in seen:
                continue
            seen.add(key)
            topics.append(await _resolve(state, version, name, topic_id, auto_create, with_ops))
    brokers = [
        MetadataBroker(info.broker_id, endpoint.host, endpoint.port, info.rack)
        for _, (info, endpoint) in sorted(state.node.brokers_on(LISTENER_NAME.get()).items())
    ]
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        cluster_operations = 0
        if cluster_allowed(state, AclOperation.DESCRIBE):
            cluster_operations = authorized_operations(state, ResourceType.CLUSTER, CLUSTER_NAME)
    return encode_metadata_response(
        version, request.header.correlation_id, brokers, state.node.cluster_id, state.controller_id, topics,
        cluster_authorized_operations=cluster_operations,
    )  # fmt: skip


SPEC = ApiSpec(API_KEY, "Metadata", 0, 12, handle)
