"""Configuration with Kafka's property names: broker settings and topic settings."""

from .broker import BROKER_CONFIGS, BrokerConfig, Listener, hostname_ordinal, load_broker_config
from .cleaner import cleaner_config_for
from .definitions import ConfigDef, ConfigError, ConfigSource, ConfigType
from .proxy import PROXY_CONFIGS, ProxyConfig, load_proxy_config
from .topic import (
    TOPIC_CONFIGS,
    ResolvedValue,
    log_config_for,
    resolve_topic_config,
    validate_topic_overrides,
)

__all__ = [
    "BROKER_CONFIGS",
    "PROXY_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "Listener",
    "ProxyConfig",
    "ResolvedValue",
    "cleaner_config_for",
    "hostname_ordinal",
    "load_broker_config",
    "load_proxy_config",
    "log_config_for",
    "resolve_topic_config",
    "validate_topic_overrides",
]
