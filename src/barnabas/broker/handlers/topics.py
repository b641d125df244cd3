"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): admin through topic_admin.

Per-topic failures are answered as that topic's error code and message; one bad topic never
fails the others. A name listed twice in one request gets INVALID_REQUEST (Kafka's rule).

Authorization (KafkaApis, ControllerApis), per topic, TOPIC_AUTHORIZATION_FAILED when denied:
CreateTopics needs CREATE on the cluster or on the topic, and answers a created topic's configs
only to a principal that may DESCRIBE_CONFIGS it; DeleteTopics needs DELETE on the cluster or on
the topic (a topic named by id that it may not DESCRIBE either is answered without its name);
CreatePartitions needs ALTER on the topic. Internal topics (``__consumer_offsets``) cannot be
deleted by clients, whatever the ACLs: INVALID_TOPIC_EXCEPTION.

The controller mutation quota (KIP-599; ZkAdminManager's order) counts a topic's partitions
created, deleted or added once the topic has passed every other check, just before the change:
with a quota, create and grow are validated first (``validate_only``), then counted, then done.
It is strict from CreateTopics v6, DeleteTopics v5 and CreatePartitions v3: a refused topic gets
THROTTLING_QUOTA_EXCEEDED. ``validate_only`` requests are not counted, as in ZooKeeper-mode Kafka
(KRaft's controller counts them).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.cluster import Topic
from barnabas.config import resolve_topic_config
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..client_quotas import MutationQuota, ThrottlingQuotaExceededError, mutation_quota
from ..errors import error_code_for
from ..registry import ApiSpec
from ..topic_admin import TopicAdminError, create_partitions, create_topic, delete_topic
from ._authorize import allowed, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

log = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
#: The first versions whose clients expect THROTTLING_QUOTA_EXCEEDED (KIP-599); older ones are only throttled.
STRICT_SINCE = {CREATE_TOPICS: 6, DELETE_TOPICS: 5, CREATE_PARTITIONS: 3}


# -- Request views -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfig:
    name: str
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    name: str
    #: -1 takes the broker's default (KIP-464), for replication_factor too.
    num_partitions: int
    replication_factor: int
    assignments: tuple[CreatableReplicaAssignment, ...]
    configs: tuple[CreatableTopicConfig, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int
    validate_only: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicState:
    """v6+ (KIP-516): a topic named or given by id."""

    name: str | None
    #: kio reads Kafka's zero UUID (no id) as None.
    topic_id: uuid.UUID | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    timeout_ms: int
    #: v1-v5.
    topic_names: tuple[str, ...] = ()
    #: v6+.
    topics: tuple[DeleteTopicState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsAssignment:
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    name: str
    count: int
    #: Null lets the controller place the new partitions.
    assignments: tuple[CreatePartitionsAssignment, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int
    validate_only: bool


# -- Handlers ----------------------------------------------------------------------------------


def _count(quota: MutationQuota, partitions: int) -> None:
    """Count ``partitions`` mutations; a strict quota's refusal becomes the topic's error.

    Raises:
        TopicAdminError: THROTTLING_QUOTA_EXCEEDED, the client being in debt.
    """
    try:
        quota.record(partitions)
    except ThrottlingQuotaExceededError as exc:
        raise TopicAdminError(ErrorCode.throttling_quota_exceeded, str(exc)) from None


async def _create(state: NodeNeeds, requested: CreatableTopic, validate_only: bool, quota: MutationQuota) -> Topic:
    """Create (or only validate) one topic, counting its partitions once it is known to be valid."""

    async def create(only_validate: bool) -> Topic:
        return await create_topic(
            state.node,
            requested.name,
            num_partitions=requested.num_partitions,
            replication_factor=requested.replication_factor,
            assignment={a.partition_index: list(a.broker_ids) for a in requested.assignments},
            configs={c.name: c.value for c in requested.configs},
            validate_only=only_validate,
        )

    if validate_only or not quota.bounded:
        return await create(validate_only)
    _count(quota, (await create(True)).partition_count)
    return await create(False)


async def _grow(
    state: NodeNeeds,
    requested: CreatePartitionsTopic,
    assignment: Sequence[Sequence[int]] | None,
    validate_only: bool,
    quota: MutationQuota,
) -> None:
    """Grow (or only validate growing) one topic, counting the partitions added once it is known to be valid."""

    async def grow(only_validate: bool) -> Topic:
        name, count = requested.name, requested.count
        return await create_partitions(state.node, name, count, assignment=assignment, validate_only=only_validate)

    if validate_only or not quota.bounded:
        await grow(validate_only)
        return
    before = state.node.topic(requested.name)  # what the validation reads (no await comes between)
    grown = await grow(True)
    _count(quota, grown.partition_count - (before.partition_count if before is not None else 0))
    await grow(False)


def _config_entries(state: NodeNeeds, types: Any, topic: Topic) -> tuple[Any, ...]:
    """The created topic's effective configs, which CreateTopics returns from v5 (KIP-525)."""
    if not hasattr(types, "CreatableTopicConfigs"):
        return ()
    resolved = resolve_topic_config(state.node.config, topic.config)
    return tuple(
        make(
            types.CreatableTopicConfigs,
            name=value.name,
            value=value.rendered,
            read_only=False,
            config_source=int(value.source),
            is_sensitive=False,
        )
        for value in resolved.values()
    )


async def handle_create_topics(state: NodeNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(CREATE_TOPICS, version)
    body = view_of(CreateTopicsRequest, request.body)
    counts = Counter(t.name for t in body.topics)
    any_topic = cluster_allowed(state, AclOperation.CREATE, log_denied=False)
    quota = mutation_quota(STRICT_SINCE[CREATE_TOPICS])
    results = []
    for requested in body.topics:
        result: dict[str, Any] = {
            "name": requested.name,
            "topic_id": None,
            "error_code": ErrorCode.none,
            "error_message": None,
            "configs": (),
        }
        if counts[requested.name] > 1:
            result.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"Create topics request from client contains duplicate topic: {requested.name}",
            )
            results.append(make(types.CreatableTopicResult, **result))
            continue
        if not any_topic and not allowed(state, AclOperation.CREATE, ResourceType.TOPIC, requested.name):
            result.update(error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.")
            results.append(make(types.CreatableTopicResult, **result))
            continue
        try:
            topic = await _create(state, requested, body.validate_only, quota)
        except TopicAdminError as exc:
            result.update(error_code=exc.error_code, error_message=exc.message)
        except (OSError, CoordinationError) as exc:  # no space, too many open files, a store that refused it
            log.error("creating topic %s failed: %s", requested.name, exc)
            result.update(error_code=error_code_for(exc), error_message=f"Creating the topic failed: {exc}")
        else:
            result.update(
                topic_id=topic.topic_id,
                num_partitions=topic.partition_count,
                replication_factor=len(topic.assignment[0]),
                configs=_config_entries(state, types, topic),
            )
            if not allowed(state, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name, log_denied=False):
                result.update(configs=(), topic_config_error_code=ErrorCode.topic_authorization_failed)
        results.append(make(types.CreatableTopicResult, **result))
    response = make(types.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))
    return encode_response(request.header.correlation_id, response)


def _may_delete(state: NodeNeeds, name: str) -> bool:
    return cluster_allowed(state, AclOperation.DELETE, log_denied=False) or allowed(
        state, AclOperation.DELETE, ResourceType.TOPIC, name
    )


async def handle_delete_topics(state: NodeNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(DELETE_TOPICS, version)
    body = view_of(DeleteTopicsRequest, request.body)
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    quota = mutation_quota(STRICT_SINCE[DELETE_TOPICS])
    results = []
    for wanted_name, topic_id in wanted:
        name = wanted_name
        if name is None and topic_id is not None:
            name = next((t.name for t in state.node.topics.topics.values() if t.topic_id == topic_id), None)
            if name is None:
                results.append(
                    make(
                        types.DeletableTopicResult,
                        name=None,
                        topic_id=topic_id,
                        error_code=ErrorCode.unknown_topic_id,
                        error_message="unknown topic id",
                    )
                )
                continue
        try:
            if name is None:  # neither a name nor an id: answered as delete_topic answers a name it does not know
                raise TopicAdminError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic.")
            if not _may_delete(state, name):
                if wanted_name is None and not allowed(state, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    name = None  # asked by id: do not disclose the name
                raise TopicAdminError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            if (known := state.node.topic(name)) is not None and known.internal:
                raise TopicAdminError(ErrorCode.invalid_topic_exception, f"Cannot delete internal topic {name}")
            if known is not None and state.node.config["delete.topic.enable"]:  # what delete_topic will take
                _count(quota, known.partition_count)
            topic = await delete_topic(state.node, name)
        except TopicAdminError as exc:
            results.append(
                make(
                    types.DeletableTopicResult,
                    name=name,
                    topic_id=topic_id,
                    error_code=exc.error_code,
                    error_message=exc.message,
                )
            )
        else:
            results.append(
                make(
                    types.DeletableTopicResult,
                    name=name,
                    topic_id=topic.topic_id,
                    error_code=ErrorCode.none,
                    error_message=None,
                )
            )
    response = make(types.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
    return encode_response(request.header.correlation_id, response)


async def handle_create_partitions(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(CREATE_PARTITIONS, request.header.api_version)
    body = view_of(CreatePartitionsRequest, request.body)
    counts = Counter(t.name for t in body.topics)
    quota = mutation_quota(STRICT_SINCE[CREATE_PARTITIONS])
    results = []
    for requested in body.topics:
        code, message = ErrorCode.none, None
        if counts[requested.name] > 1:
            code, message = ErrorCode.invalid_request, f"Duplicate topic in request: {requested.name}"
        elif not allowed(state, AclOperation.ALTER, ResourceType.TOPIC, requested.name):
            code, message = ErrorCode.topic_authorization_failed, "The topic authorization is failed."
        else:
            assignment = [list(a.broker_ids) for a in requested.assignments] if requested.assignments else None
            try:
                await _grow(state, requested, assignment, body.validate_only, quota)
            except TopicAdminError as exc:
                code, message = exc.error_code, exc.message
        results.append(
            make(types.CreatePartitionsTopicResult, name=requested.name, error_code=code, error_message=message)
        )
    response = make(types.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(CREATE_TOPICS, "CreateTopics", 2, 7, handle_create_topics),
    ApiSpec(DELETE_TOPICS, "DeleteTopics", 1, 6, handle_delete_topics),
    ApiSpec(CREATE_PARTITIONS, "CreatePartitions", 0, 3, handle_create_partitions),
]
