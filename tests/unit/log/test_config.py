from __future__ import annotations

import re

import pytest

from barnabas.log.config import LogConfig


def test_defaults_are_kafkas_broker_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 604_800_000
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.file_delete_delay_ms == 60_000
    assert config.cleanup_policy == "delete"
    assert config.producer_id_expiration_ms == 86_400_000
    assert config.delete_retention_ms == 86_400_000
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (0, 2**63 - 1)
    assert config.min_cleanable_dirty_ratio == 0.5
    assert not config.compact


def test_with_overrides_applies_topic_properties() -> None:
    config = LogConfig().with_overrides(
        {
            "segment.bytes": "2097152",
            "retention.ms": "-1",
            "retention.bytes": "1000000",
            "max.message.bytes": "500",
            "message.timestamp.type": "LogAppendTime",
            "flush.messages": "1",
            "flush.ms": "1000",
            "index.interval.bytes": "0",
            "segment.index.bytes": "4096",
            "segment.ms": "3600000",
            "file.delete.delay.ms": "0",
            "cleanup.policy": "compact, delete",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "5",
            "max.compaction.lag.ms": "50",
            "min.cleanable.dirty.ratio": "0.25",
            "compression.type": "zstd",
            "compression.zstd.level": "-7",
            "min.insync.replicas": "2",  # not the log's: ignored
        }
    )
    assert config.segment_bytes == 2097152
    assert config.retention_ms == -1
    assert config.retention_bytes == 1_000_000
    assert config.max_message_bytes == 500
    assert config.log_append_time
    assert (config.flush_messages, config.flush_ms) == (1, 1000)
    assert config.index_interval_bytes == 0
    assert config.segment_index_bytes == 4096
    assert config.segment_ms == 3_600_000
    assert config.file_delete_delay_ms == 0
    assert config.cleanup_policy == "compact,delete"
    assert config.delete_enabled and config.compact
    assert (config.delete_retention_ms, config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (100, 5, 50)
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.target_compression == (4, -7)


def test_with_overrides_keeps_the_base_config() -> None:
    base = LogConfig(retention_ms=5)
    assert base.with_overrides({"segment.ms": "10"}).retention_ms == 5


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("segment.bytes", "1000", "segment.bytes=1000 is out of range"),
        ("segment.bytes", "lots", "segment.bytes must be an integer"),
        ("retention.ms", "-2", "retention.ms=-2"),
        ("segment.ms", "0", "segment.ms=0"),
        ("flush.messages", "0", "flush.messages=0"),
        ("segment.index.bytes", "3", "segment.index.bytes=3"),
        ("max.message.bytes", str(2**31), "max.message.bytes"),
        ("message.timestamp.type", "WallClock", "message.timestamp.type must be one of"),
        ("cleanup.policy", "forever", "cleanup.policy must be a list"),
        ("min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio=1.5 is out of range"),
        ("min.cleanable.dirty.ratio", "half", "min.cleanable.dirty.ratio must be a number"),
        ("max.compaction.lag.ms", "0", "max.compaction.lag.ms=0"),
        ("min.compaction.lag.ms", "10", "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        ("compression.type", "none", "compression.type must be one of uncompressed, zstd, lz4, snappy, gzip"),
        ("compression.gzip.level", "0", "compression.gzip.level=0 is out of range [1, 9]"),
        ("compression.gzip.level", "10", "compression.gzip.level=10 is out of range [1, 9]"),
        ("compression.lz4.level", "18", "compression.lz4.level=18 is out of range [1, 17]"),
        ("compression.zstd.level", "23", "compression.zstd.level=23 is out of range [-131072, 22]"),
    ],
)
def test_with_overrides_rejects_bad_values_with_a_one_line_reason(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)) as info:
        LogConfig(max_compaction_lag_ms=5).with_overrides({key: value})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("properties", "target"),
    [
        ({}, None),
        ({"compression.type": "uncompressed"}, (0, -1)),
        ({"compression.type": "gzip"}, (1, -1)),
        ({"compression.type": "gzip", "compression.gzip.level": "9"}, (1, 9)),
        ({"compression.type": "snappy", "compression.zstd.level": "9"}, (2, -1)),
        ({"compression.type": "lz4"}, (3, 9)),
        ({"compression.type": "zstd"}, (4, 3)),
    ],
)
def test_compression_type_names_the_codec_and_level_batches_are_stored_in(
    properties: dict[str, str], target: tuple[int, int] | None
) -> None:
    assert LogConfig().with_overrides(properties).target_compression == target


def test_compact_only_disables_time_and_size_retention() -> None:
    assert not LogConfig(cleanup_policy="compact").delete_enabled


def test_to_properties_round_trips() -> None:
    config = LogConfig(
        retention_bytes=123,
        message_timestamp_type="LogAppendTime",
        segment_bytes=2**21,
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.125,
        delete_retention_ms=7,
        compression_type="gzip",
        compression_gzip_level=4,
    )
    assert LogConfig().with_overrides(config.to_properties()) == config
