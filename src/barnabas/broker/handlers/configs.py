"""DescribeConfigs (32) and IncrementalAlterConfigs (44) for topics (and reading broker configs).

Topics report every topic setting with its effective value and source: an override is
DYNAMIC_TOPIC_CONFIG, otherwise the broker setting behind it (STATIC_BROKER_CONFIG when set
in server.properties, the environment or a flag; DEFAULT_CONFIG otherwise), with that broker
setting listed as a synonym when asked. Broker settings are read-only: dynamic broker config
is not supported, so altering them gets INVALID_REQUEST with a message. The one exception is
KIP-1066's ``cordoned.log.dirs`` on a broker id: set to ``*`` it cordons that broker (no new
replicas are placed on it, ``cluster.cordons``), deleted (or set empty) it lifts the cordon.
barnabas cordons whole brokers only, so naming single log dirs gets INVALID_CONFIG. Any broker
takes the change for any broker id, a stopped one too; a broker describes its own.

Replication is never throttled here, so Kafka's replication-throttle settings are never set:
deleting them (which kafka-reassign-partitions.sh --verify does for every broker and moved
topic) succeeds with nothing to do, and setting them gets INVALID_CONFIG, as a throttle
barnabas would not honour must not look accepted.
Authorization (Kafka's ConfigHelper and KafkaApis): DESCRIBE_CONFIGS (describe) or ALTER_CONFIGS
(alter) on the topic, else TOPIC_AUTHORIZATION_FAILED, and on the cluster for a broker resource,
else CLUSTER_AUTHORIZATION_FAILED; checked before the resource is looked up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigSource, ConfigType, resolve_topic_config
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ..topic_admin import TopicAdminError, alter_topic_config
from ._authorize import allowed, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44

TOPIC = 2
BROKER = 4

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

#: KIP-1066's broker config: the log dirs no new replica is placed in; ``*`` is every one, the whole broker.
CORDONED_LOG_DIRS = "cordoned.log.dirs"
ALL_LOG_DIRS = "*"
THROTTLE_TOPIC_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
THROTTLE_BROKER_CONFIGS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    #: Null means every config.
    configuration_keys: tuple[str, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]
    include_synonyms: bool
    #: v3+ (KIP-569).
    include_documentation: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: str
    config_operation: int
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool


def _topic_entries(
    state: NodeNeeds, types: Any, name: str, keys: set[str] | None, *, synonyms: bool, docs: bool
) -> tuple[Any, ...]:
    topic = state.node.topic(name)
    assert topic is not None
    entries = []
    for value in resolve_topic_config(state.node.config, topic.config).values():
        if keys is not None and value.name not in keys:
            continue
        synonym_list = []
        if synonyms:
            if value.source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                synonym_list.append(
                    make(
                        types.DescribeConfigsSynonym,
                        name=value.name,
                        value=value.rendered,
                        source=int(ConfigSource.DYNAMIC_TOPIC_CONFIG),
                    )
                )
            if value.broker_synonym is not None:
                broker_key, rendered, source = value.broker_synonym
                synonym_list.append(
                    make(types.DescribeConfigsSynonym, name=broker_key, value=rendered, source=int(source))
                )
        entries.append(make(
            types.DescribeConfigsResourceResult,
            name=value.name, value=value.rendered, read_only=False, config_source=int(value.source),
            is_sensitive=False, synonyms=tuple(synonym_list), config_type=int(value.definition.type),
            documentation=value.definition.doc if docs else None,
        ))  # fmt: skip
    return tuple(entries)


def _broker_entries(state: NodeNeeds, types: Any, keys: set[str] | None, docs: bool) -> tuple[Any, ...]:
    entries = []
    for key, definition in sorted(BROKER_CONFIGS.items()):
        if keys is not None and key not in keys:
            continue
        sensitive = definition.type is ConfigType.PASSWORD
        entries.append(make(
            types.DescribeConfigsResourceResult,
            name=key, value=None if sensitive else definition.render(state.node.config[key]), read_only=True,
            config_source=int(state.node.config.source(key)), is_sensitive=sensitive, synonyms=(),
            config_type=int(definition.type), documentation=definition.doc if docs else None,
        ))  # fmt: skip
    if keys is None or CORDONED_LOG_DIRS in keys:
        entries.append(_cordon_entry(state, types, docs))
    return tuple(sorted(entries, key=lambda entry: str(entry.name)))


def _cordon_entry(state: NodeNeeds, types: Any, docs: bool) -> Any:
    """``cordoned.log.dirs`` of this broker: ``*`` (dynamic) while it is cordoned, else empty (the default)."""
    cordoned = state.node.broker_id in state.node.cordons.brokers
    return make(
        types.DescribeConfigsResourceResult,
        name=CORDONED_LOG_DIRS, value=ALL_LOG_DIRS if cordoned else "", read_only=False,
        config_source=int(ConfigSource.DYNAMIC_BROKER_CONFIG if cordoned else ConfigSource.DEFAULT_CONFIG),
        is_sensitive=False, synonyms=(), config_type=int(ConfigType.LIST),
        documentation="The log dirs no new partition replica is placed in; * is all of them (KIP-1066)." if docs
        else None,
    )  # fmt: skip


def _denial(state: NodeNeeds, operation: AclOperation, resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """The error a principal that may not do ``operation`` on this config resource gets, or None."""
    if resource_type == TOPIC and not allowed(state, operation, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    if resource_type == BROKER and not cluster_allowed(state, operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None


def handle_describe_configs(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_CONFIGS, request.header.api_version)
    body = view_of(DescribeConfigsRequest, request.body)
    synonyms = body.include_synonyms
    docs = body.include_documentation
    results = []
    for resource in body.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        code, message, configs = ErrorCode.none, None, ()
        denial = _denial(state, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        if denial is not None:
            code, message = denial
        elif resource.resource_type == TOPIC:
            if state.node.topic(resource.resource_name) is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {resource.resource_name} does not exist",
                )
            else:
                configs = _topic_entries(state, types, resource.resource_name, keys, synonyms=synonyms, docs=docs)
        elif resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(state.node.broker_id)):
                code, message = ErrorCode.invalid_request, f"Unexpected broker id {resource.resource_name}"
            elif resource.resource_name:
                configs = _broker_entries(state, types, keys, docs)
        else:
            code, message = ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}"
        results.append(
            make(
                types.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    response = make(types.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
    return encode_response(request.header.correlation_id, response)


def _without_throttles(operations: Sequence[AlterableConfig], throttles: frozenset[str]) -> list[AlterableConfig]:
    """The operations left once deletions of (never set) throttles are dropped; setting one is refused."""
    kept = []
    for op in operations:
        if op.name not in throttles:
            kept.append(op)
        elif op.config_operation != DELETE:
            raise TopicAdminError(
                ErrorCode.invalid_config,
                f"{op.name}: replication throttles are not supported (replication is never throttled)",
            )
    return kept


def _apply_operations(
    state: NodeNeeds, current: dict[str, str], operations: Sequence[AlterableConfig]
) -> dict[str, str | None]:
    names = [op.name for op in operations]
    if len(names) != len(set(names)):
        raise TopicAdminError(ErrorCode.invalid_request, "A config name appears more than once")
    operations = _without_throttles(operations, THROTTLE_TOPIC_CONFIGS)
    updated: dict[str, str | None] = dict(current)
    effective = resolve_topic_config(state.node.config, current)
    for op in operations:
        definition = TOPIC_CONFIGS.get(op.name)
        if definition is None:
            raise TopicAdminError(ErrorCode.invalid_config, f"Unknown topic config name: {op.name}")
        if op.config_operation == SET:
            updated[op.name] = op.value
        elif op.config_operation == DELETE:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                raise TopicAdminError(
                    ErrorCode.invalid_config,
                    f"Config {op.name} is not a list; APPEND and SUBTRACT do not apply",
                )
            items = list(effective[op.name].value)
            given = [item.strip() for item in (op.value or "").split(",") if item.strip()]
            if op.config_operation == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            updated[op.name] = ",".join(items)
        else:
            raise TopicAdminError(ErrorCode.invalid_request, f"Unknown config operation {op.config_operation}")
    return updated


async def handle_incremental_alter_configs(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(INCREMENTAL_ALTER_CONFIGS, request.header.api_version)
    body = view_of(IncrementalAlterConfigsRequest, request.body)
    results = []
    for resource in body.resources:
        code, message = ErrorCode.none, None
        try:
            denial = _denial(state, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            if denial is not None:
                raise TopicAdminError(*denial)
            if resource.resource_type == TOPIC:
                topic = state.node.topic(resource.resource_name)
                if topic is None:
                    raise TopicAdminError(
                        ErrorCode.unknown_topic_or_partition, f"Topic {resource.resource_name} does not exist"
                    )
                overrides = _apply_operations(state, topic.config, resource.configs)
                await alter_topic_config(
                    state.node, resource.resource_name, overrides, validate_only=body.validate_only
                )
            elif resource.resource_type == BROKER:
                kept = _without_throttles(resource.configs, THROTTLE_BROKER_CONFIGS)
                if any(op.name != CORDONED_LOG_DIRS for op in kept):
                    raise TopicAdminError(
                        ErrorCode.invalid_request,
                        f"Dynamic broker configs are not supported (only {CORDONED_LOG_DIRS} is)",
                    )
                if kept:
                    await _alter_cordon(state, resource.resource_name, kept, validate_only=body.validate_only)
            else:
                raise TopicAdminError(ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}")
        except TopicAdminError as exc:
            code, message = exc.error_code, exc.message
        results.append(
            make(
                types.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    response = make(types.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
    return encode_response(request.header.correlation_id, response)


async def _alter_cordon(
    state: NodeNeeds, name: str, operations: Sequence[AlterableConfig], *, validate_only: bool
) -> None:
    """Cordon broker ``name`` (``cordoned.log.dirs=*``) or lift its cordon (deleted or empty)."""
    if len(operations) > 1:
        raise TopicAdminError(ErrorCode.invalid_request, "A config name appears more than once")
    if not (name.isdigit() and name.isascii()):
        raise TopicAdminError(
            ErrorCode.invalid_request, f"{CORDONED_LOG_DIRS} is set per broker: name a broker id, not {name!r}"
        )
    op = operations[0]
    value = (op.value or "").strip() if op.config_operation == SET else ""
    if op.config_operation not in (SET, DELETE) or value not in ("", ALL_LOG_DIRS):
        raise TopicAdminError(
            ErrorCode.invalid_config,
            f"{CORDONED_LOG_DIRS}: barnabas cordons whole brokers: set it to {ALL_LOG_DIRS} or delete it",
        )
    if validate_only:
        return
    cordons, broker_id = state.node.cordons, int(name)
    try:
        await (cordons.cordon(broker_id) if value == ALL_LOG_DIRS else cordons.uncordon(broker_id))
    except CoordinationError as exc:
        raise TopicAdminError(ErrorCode.unknown_server_error, f"coordination: {exc}") from None


SPECS = [
    ApiSpec(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, handle_describe_configs),
    ApiSpec(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
]
