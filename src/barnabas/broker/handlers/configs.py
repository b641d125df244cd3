"""DescribeConfigs (32): topic, broker and group settings with their values and sources.

Topics report every topic setting with its effective value and source: an override is
DYNAMIC_TOPIC_CONFIG, otherwise the broker setting behind it (STATIC_BROKER_CONFIG when set
in server.properties, the environment or a flag; DEFAULT_CONFIG otherwise), with that broker
setting listed as a synonym when asked. Broker settings are read-only (dynamic broker config is
not supported) but for KIP-1066's ``cordoned.log.dirs`` (config_changes.py); a broker describes
its own. Groups report Kafka 4.4's group settings at their defaults, for any group name, as
Kafka does; barnabas serves classic groups only, which none of them tune, so they are read-only
(config/group.py). Authorization: _config_resources.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from barnabas.config import BROKER_CONFIGS, ConfigSource, ConfigType, resolve_topic_config
from barnabas.config.group import GROUP_CONFIG_SYNONYMS, GROUP_CONFIGS
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ._build import NO_THROTTLE, make, response_types
from ._config_resources import ALL_LOG_DIRS, BROKER, CORDONED_LOG_DIRS, GROUP, TOPIC, denial
from ._needs import NodeNeeds
from ._view import view_of

DESCRIBE_CONFIGS = 32


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
        source = state.node.config.source(key)
        if definition.internal and source is ConfigSource.DEFAULT_CONFIG:
            continue  # Kafka describes an internal setting only when it was set
        sensitive = definition.type is ConfigType.PASSWORD
        entries.append(make(
            types.DescribeConfigsResourceResult,
            name=key, value=None if sensitive else definition.render(state.node.config[key]), read_only=True,
            config_source=int(source), is_sensitive=sensitive, synonyms=(),
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


def _group_entries(types: Any, keys: set[str] | None, *, synonyms: bool, docs: bool) -> tuple[Any, ...]:
    """Every group setting at its default, read-only: barnabas's classic groups take none of them."""
    entries = []
    for name, definition in sorted(GROUP_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        value = definition.render(definition.default)
        source = int(ConfigSource.DEFAULT_CONFIG)
        synonym_list = (
            (make(types.DescribeConfigsSynonym, name=GROUP_CONFIG_SYNONYMS[name], value=value, source=source),)
            if synonyms
            else ()
        )
        entries.append(make(
            types.DescribeConfigsResourceResult,
            name=name, value=value, read_only=True, config_source=source, is_sensitive=False,
            synonyms=synonym_list, config_type=int(definition.type),
            documentation=definition.doc if docs else None,
        ))  # fmt: skip
    return tuple(entries)


def handle_describe_configs(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_CONFIGS, request.header.api_version)
    body = view_of(DescribeConfigsRequest, request.body)
    synonyms = body.include_synonyms
    docs = body.include_documentation
    results = []
    for resource in body.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys else None  # empty: all, as null
        code, message, configs = ErrorCode.none, None, ()
        refusal = denial(state, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        if refusal is not None:
            code, message = refusal
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
        elif resource.resource_type == GROUP:
            if not resource.resource_name:
                code, message = ErrorCode.invalid_request, "Group name must not be empty"
            else:
                configs = _group_entries(types, keys, synonyms=synonyms, docs=docs)
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


SPEC = ApiSpec(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, handle_describe_configs)
