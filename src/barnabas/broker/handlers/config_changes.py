"""IncrementalAlterConfigs (44) and the legacy AlterConfigs (33): changing topic, broker and group settings.

Both APIs go through one path: the legacy request, which replaces a resource's whole set of
overrides, becomes SETs of what it names and DELETEs of every override it leaves out (Kafka's
ConfigurationControlManager.legacyAlterConfigResource); before that, as Kafka's ConfigAdminManager
does, a name given twice or a null value refuses its resource with INVALID_REQUEST.

- Topics: overrides are validated and stored (topic_admin.alter_topic_config), applied to the logs.
- Brokers: dynamic broker config is not supported, so altering a broker setting gets INVALID_REQUEST
  with a message. The one exception is KIP-1066's ``cordoned.log.dirs`` on a broker id: set to ``*``
  it cordons that broker (no new replicas are placed on it, ``cluster.cordons``), deleted (or set
  empty) it lifts the cordon. barnabas cordons whole brokers only, so naming single log dirs gets
  INVALID_CONFIG. Any broker takes the change for any broker id, a stopped one too.
- Groups: Kafka's group settings tune consumer-protocol, share and streams groups, which barnabas
  does not serve, so setting one gets INVALID_CONFIG (deleting one, never set, succeeds); an
  unknown name gets Kafka's "Unknown group config name" and the empty (default) group
  INVALID_REQUEST.

Replication is never throttled here, so Kafka's replication-throttle settings are never set:
deleting them (which kafka-reassign-partitions.sh --verify does for every broker and moved
topic) succeeds with nothing to do, and setting them gets INVALID_CONFIG, as a throttle
barnabas would not honour must not look accepted. Authorization: _config_resources.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.config import TOPIC_CONFIGS, ConfigType, resolve_topic_config
from barnabas.config.group import GROUP_CONFIGS
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ..topic_admin import TopicAdminError, alter_topic_config
from ._build import NO_THROTTLE, make, response_types
from ._config_resources import ALL_LOG_DIRS, BROKER, CORDONED_LOG_DIRS, GROUP, TOPIC, denial
from ._needs import NodeNeeds
from ._view import view_of

ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

THROTTLE_TOPIC_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
THROTTLE_BROKER_CONFIGS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyConfig:
    name: str
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyAlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[LegacyConfig, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsRequest:
    resources: tuple[LegacyAlterConfigsResource, ...]
    validate_only: bool


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


async def _alter_resource(
    state: NodeNeeds, resource_type: int, name: str, operations: Sequence[AlterableConfig], *, validate_only: bool
) -> None:
    """Apply one resource's operations.

    Raises:
        TopicAdminError: the resource's error code and message.
    """
    refusal = denial(state, AclOperation.ALTER_CONFIGS, resource_type, name)
    if refusal is not None:
        raise TopicAdminError(*refusal)
    if resource_type == TOPIC:
        topic = state.node.topic(name)
        if topic is None:
            raise TopicAdminError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        overrides = _apply_operations(state, topic.config, operations)
        await alter_topic_config(state.node, name, overrides, validate_only=validate_only)
    elif resource_type == BROKER:
        kept = _without_throttles(operations, THROTTLE_BROKER_CONFIGS)
        if any(op.name != CORDONED_LOG_DIRS for op in kept):
            raise TopicAdminError(
                ErrorCode.invalid_request, f"Dynamic broker configs are not supported (only {CORDONED_LOG_DIRS} is)"
            )
        if kept:
            await _alter_cordon(state, name, kept, validate_only=validate_only)
    elif resource_type == GROUP:
        _check_group_operations(name, operations)
    else:
        raise TopicAdminError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def _check_group_operations(name: str, operations: Sequence[AlterableConfig]) -> None:
    """Refuse any change of a group setting: none tunes the classic groups barnabas serves."""
    if not name:
        raise TopicAdminError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    for op in operations:
        if op.name not in GROUP_CONFIGS:
            raise TopicAdminError(ErrorCode.invalid_config, f"Unknown group config name: {op.name}")
    for op in operations:
        if op.config_operation != DELETE:
            raise TopicAdminError(
                ErrorCode.invalid_config,
                f"{op.name}: group configs tune consumer-protocol, share and streams groups, which barnabas "
                "does not serve (classic groups take their timeouts from each member's JoinGroup)",
            )


def _result(types: Any, resource_type: int, name: str, error: TopicAdminError | None) -> Any:
    return make(
        types.AlterConfigsResourceResponse,
        error_code=ErrorCode.none if error is None else error.error_code,
        error_message=None if error is None else error.message,
        resource_type=resource_type,
        resource_name=name,
    )


async def handle_incremental_alter_configs(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(INCREMENTAL_ALTER_CONFIGS, request.header.api_version)
    body = view_of(IncrementalAlterConfigsRequest, request.body)
    results = []
    for resource in body.resources:
        error = None
        try:
            await _alter_resource(
                state, resource.resource_type, resource.resource_name, resource.configs,
                validate_only=body.validate_only,
            )  # fmt: skip
        except TopicAdminError as exc:
            error = exc
        results.append(_result(types, resource.resource_type, resource.resource_name, error))
    response = make(types.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
    return encode_response(request.header.correlation_id, response)


def _legacy_operations(state: NodeNeeds, resource: LegacyAlterConfigsResource) -> list[AlterableConfig]:
    """The legacy request's full replacement as SETs of what it names and DELETEs of every override left out.

    Raises:
        TopicAdminError: a name given twice or a null value (INVALID_REQUEST, Kafka's messages).
    """
    names = [config.name for config in resource.configs]
    if len(names) != len(set(names)):
        raise TopicAdminError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        raise TopicAdminError(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
    left_out = [name for name in _overrides_now(state, resource) if name not in names]
    return [
        AlterableConfig(name=config.name, config_operation=SET, value=config.value) for config in resource.configs
    ] + [AlterableConfig(name=name, config_operation=DELETE, value=None) for name in left_out]


def _overrides_now(state: NodeNeeds, resource: LegacyAlterConfigsResource) -> list[str]:
    """The names a resource overrides today: a topic's stored overrides, a cordoned broker's cordon."""
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        topic = state.node.topic(name)
        return [] if topic is None else list(topic.config)
    if resource.resource_type == BROKER and name.isascii() and name.isdigit():
        return [CORDONED_LOG_DIRS] if int(name) in state.node.cordons.brokers else []
    return []


async def handle_alter_configs(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(ALTER_CONFIGS, request.header.api_version)
    body = view_of(AlterConfigsRequest, request.body)
    results = []
    for resource in body.resources:
        error = None
        try:
            operations = _legacy_operations(state, resource)
            await _alter_resource(
                state, resource.resource_type, resource.resource_name, operations, validate_only=body.validate_only
            )
        except TopicAdminError as exc:
            error = exc
        results.append(_result(types, resource.resource_type, resource.resource_name, error))
    response = make(types.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
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
    ApiSpec(ALTER_CONFIGS, "AlterConfigs", 0, 2, handle_alter_configs),
    ApiSpec(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
]
