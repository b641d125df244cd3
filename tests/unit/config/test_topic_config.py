import pytest

from barnabas.config import (
    ConfigError,
    ConfigSource,
    load_broker_config,
    resolve_topic_config,
    validate_topic_overrides,
)


def test_overrides_win_and_defaults_follow_broker() -> None:
    broker = load_broker_config(overrides={"log.retention.hours": "1", "log.segment.bytes": "2097152"}, environ={})
    resolved = resolve_topic_config(broker, {"retention.ms": "5000"})
    assert resolved["retention.ms"].value == 5000
    assert resolved["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert resolved["segment.bytes"].value == 2097152
    assert resolved["segment.bytes"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert resolved["max.message.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert resolved["max.message.bytes"].broker_synonym == (
        "message.max.bytes",
        "1048588",
        ConfigSource.DEFAULT_CONFIG,
    )


def test_validation() -> None:
    assert validate_topic_overrides({"cleanup.policy": "compact,delete", "retention.ms": " 10 "}) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "10",
    }
    with pytest.raises(ConfigError, match="unknown topic config"):
        validate_topic_overrides({"retention.hours": "1"})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        validate_topic_overrides({"segment.bytes": "1"})
