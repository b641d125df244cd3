"""Topic-level settings: Kafka's names, their broker-level defaults, and validation.

Rules this module keeps:

- A topic stores only its overrides (as strings, as Kafka's ZK-mode `/config/topics/<t>` did);
  effective values are resolved against the broker config each time, so changing a broker
  default changes every topic that does not override it.
- Each topic setting names the broker setting that supplies its default (Kafka's synonyms),
  which DescribeConfigs reports as its source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from barnabas.log import COMPRESSION_TYPES, GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS, LogConfig

from .broker import BrokerConfig
from .definitions import (
    INT64_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    at_least,
    between,
    between_or,
    one_of,
)

__all__ = [
    "TOPIC_CONFIGS",
    "ResolvedValue",
    "log_config_for",
    "resolve_topic_config",
    "validate_topic_overrides",
]

_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_I = ConfigType.INT
_L = ConfigType.LONG
_D = ConfigType.DOUBLE
_LIST = ConfigType.LIST


@dataclass(frozen=True, slots=True)
class TopicSetting:
    definition: ConfigDef
    #: The broker key whose value is the default, and how to read it from a BrokerConfig.
    broker_key: str | None
    broker_default: Callable[[BrokerConfig], Any] | None = None


def _from(key: str) -> Callable[[BrokerConfig], Any]:
    return lambda broker: broker[key]


_SETTINGS: tuple[TopicSetting, ...] = (
    TopicSetting(ConfigDef("cleanup.policy", _LIST, ["delete"], "delete, compact or both.",
                           one_of("delete", "compact")), "log.cleanup.policy"),
    TopicSetting(ConfigDef("compression.type", _S, "producer",
                           "Codec batches are stored in; producer keeps the producer's.", one_of(*COMPRESSION_TYPES)),
                 "compression.type"),
    TopicSetting(ConfigDef("compression.gzip.level", _I, -1, "gzip level when compression.type is gzip.",
                           between_or(*GZIP_LEVELS, -1)), "compression.gzip.level"),
    TopicSetting(ConfigDef("compression.lz4.level", _I, 9, "lz4 level when compression.type is lz4.",
                           between(*LZ4_LEVELS)), "compression.lz4.level"),
    TopicSetting(ConfigDef("compression.zstd.level", _I, 3, "zstd level when compression.type is zstd.",
                           between(*ZSTD_LEVELS)), "compression.zstd.level"),
    TopicSetting(ConfigDef("delete.retention.ms", _L, 86400000, "How long tombstones are kept.", at_least(0)),
                 "log.cleaner.delete.retention.ms"),
    TopicSetting(ConfigDef("file.delete.delay.ms", _L, 60000, "Delay before deleted segment files go.",
                           at_least(0)), "log.segment.delete.delay.ms"),
    TopicSetting(ConfigDef("flush.messages", _L, INT64_MAX, "Messages between fsyncs.", at_least(1)),
                 "log.flush.interval.messages"),
    TopicSetting(ConfigDef("flush.ms", _L, INT64_MAX, "Milliseconds between fsyncs.", at_least(0)),
                 "log.flush.interval.ms", lambda broker: broker.flush_ms),
    TopicSetting(ConfigDef("index.interval.bytes", _I, 4096, "Bytes between offset index entries.", at_least(0)),
                 "log.index.interval.bytes"),
    TopicSetting(ConfigDef("max.compaction.lag.ms", _L, INT64_MAX, "Maximum age before compaction.",
                           at_least(1)), "log.cleaner.max.compaction.lag.ms"),
    TopicSetting(ConfigDef("max.message.bytes", _I, 1048588, "Largest record batch accepted.", at_least(0)),
                 "message.max.bytes"),
    TopicSetting(ConfigDef("message.timestamp.type", _S, "CreateTime", "CreateTime or LogAppendTime.",
                           one_of("CreateTime", "LogAppendTime")), "log.message.timestamp.type"),
    TopicSetting(ConfigDef("message.timestamp.before.max.ms", _L, INT64_MAX,
                           "Largest allowed age of a record timestamp.", at_least(0)),
                 "log.message.timestamp.before.max.ms"),
    TopicSetting(ConfigDef("message.timestamp.after.max.ms", _L, 3600000,
                           "Largest allowed lead of a record timestamp.", at_least(0)),
                 "log.message.timestamp.after.max.ms"),
    TopicSetting(ConfigDef("min.cleanable.dirty.ratio", _D, 0.5, "Dirty ratio that triggers compaction.",
                           between(0, 1)), "log.cleaner.min.cleanable.ratio"),
    TopicSetting(ConfigDef("min.compaction.lag.ms", _L, 0, "Minimum age before compaction.", at_least(0)),
                 "log.cleaner.min.compaction.lag.ms"),
    TopicSetting(ConfigDef("min.insync.replicas", _I, 1, "Replicas that must acknowledge acks=all.",
                           at_least(1)), "min.insync.replicas"),
    TopicSetting(ConfigDef("preallocate", _B, False, "Accepted; segments are not preallocated."), None),
    TopicSetting(ConfigDef("retention.bytes", _L, -1, "Retention size per partition; -1 unlimited.",
                           at_least(-1)), "log.retention.bytes"),
    TopicSetting(ConfigDef("retention.ms", _L, 604800000, "Retention time; -1 keeps forever.", at_least(-1)),
                 "log.retention.ms", lambda broker: broker.retention_ms),
    TopicSetting(ConfigDef("segment.bytes", _I, 1073741824, "Segment size before a roll.", at_least(1 << 20)),
                 "log.segment.bytes"),
    TopicSetting(ConfigDef("segment.index.bytes", _I, 10485760, "Largest offset index.", at_least(4)),
                 "log.index.size.max.bytes"),
    TopicSetting(ConfigDef("segment.jitter.ms", _L, 0, "Accepted; rolls are not jittered.", at_least(0)), None),
    TopicSetting(ConfigDef("segment.ms", _L, 604800000, "Time before a segment rolls.", at_least(1)),
                 "log.roll.ms", lambda broker: broker.roll_ms),
    TopicSetting(ConfigDef("unclean.leader.election.enable", _B, False,
                           "Allow an out-of-sync replica to become leader."), "unclean.leader.election.enable"),
)  # fmt: skip

TOPIC_SETTINGS: dict[str, TopicSetting] = {setting.definition.name: setting for setting in _SETTINGS}
TOPIC_CONFIGS: dict[str, ConfigDef] = {name: setting.definition for name, setting in TOPIC_SETTINGS.items()}


@dataclass(frozen=True, slots=True)
class ResolvedValue:
    """An effective topic setting as DescribeConfigs reports it."""

    name: str
    value: Any
    rendered: str | None
    source: ConfigSource
    definition: ConfigDef
    #: (broker key, rendered value, source) when the broker supplies the value or a default.
    broker_synonym: tuple[str, str | None, ConfigSource] | None


def validate_topic_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides (None values mean 'remove'); return the normalised strings.

    Raises:
        ConfigError: an unknown name or an invalid value.
    """
    normalised: dict[str, str] = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"unknown topic config {name!r}")
        if raw is None:
            continue
        value = definition.parse(raw)
        rendered = definition.render(value)
        assert rendered is not None
        normalised[name] = rendered
    return normalised


def _broker_value(setting: TopicSetting, broker: BrokerConfig) -> Any:
    if setting.broker_default is not None:
        return setting.broker_default(broker)
    if setting.broker_key is not None:
        return broker[setting.broker_key]
    return setting.definition.default


def resolve_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, ResolvedValue]:
    """Every topic setting's effective value given the broker config and topic overrides."""
    resolved: dict[str, ResolvedValue] = {}
    for name, setting in TOPIC_SETTINGS.items():
        definition = setting.definition
        broker_value = _broker_value(setting, broker)
        synonym = None
        if setting.broker_key is not None:
            synonym = (setting.broker_key, definition.render(broker_value), broker.source(setting.broker_key))
        if name in overrides:
            value = definition.parse(overrides[name])
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value = broker_value
            source = (
                broker.source(setting.broker_key) if setting.broker_key is not None else ConfigSource.DEFAULT_CONFIG
            )
        resolved[name] = ResolvedValue(name, value, definition.render(value), source, definition, synonym)
    return resolved


def log_config_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The log settings of a topic with these overrides on this broker.

    Raises:
        ValueError: the combination is invalid for the log.
    """
    resolved = resolve_topic_config(broker, overrides)
    return LogConfig().with_overrides(
        {name: value.rendered for name, value in resolved.items() if value.rendered is not None}
    )
