"""Per-log settings with Kafka's topic-level names, defaults and validation (LogConfig.java).

Rules this module keeps:

- A :class:`LogConfig` is frozen; a config change builds a new one and hands it to the log.
- Field defaults are Kafka's broker defaults, so ``LogConfig()`` behaves like an untouched Kafka
  topic. ``-1`` means unlimited for ``retention_ms`` and ``retention_bytes``, as in Kafka.
- :meth:`LogConfig.with_overrides` takes topic property strings (``segment.bytes`` ...) and applies
  Kafka's own bounds (``segment.bytes`` >= 1 MiB since Kafka 4). The dataclass itself only rejects
  values that would break the log, so tests may build small segments directly, as Kafka's tests do
  with the internal ``internal.segment.bytes``.
- Keys the log does not own (``min.insync.replicas``, ``unclean.leader.election.enable`` ...) are ignored here;
  the broker's config layer validates the full topic config.
- Compaction settings keep Kafka's rule that ``min.compaction.lag.ms`` may not exceed
  ``max.compaction.lag.ms`` (LogConfig.validateValues).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from barnabas.protocol import RECORDS_EXPANSION, Compression

__all__ = ["COMPRESSION_TYPES", "GZIP_LEVELS", "LZ4_LEVELS", "ZSTD_LEVELS", "LogConfig"]

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_DAY_MS = 24 * 60 * 60 * 1000

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("compact", "delete")
#: compression.type's values (Kafka's BrokerCompressionType): a codec, or the producer's own.
COMPRESSION_TYPES: dict[str, Compression | None] = {
    "uncompressed": Compression.NONE,
    "zstd": Compression.ZSTD,
    "lz4": Compression.LZ4,
    "snappy": Compression.SNAPPY,
    "gzip": Compression.GZIP,
    "producer": None,
}
#: Kafka's bounds of each codec's compression.<codec>.level (CompressionType): gzip also takes -1, its
#: default. The broker's config layer validates with these too.
GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS = (1, 9), (1, 17), (-131072, 22)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How one partition's log rolls, indexes, flushes and retains data."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = _INT64_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    flush_messages: int = _INT64_MAX
    flush_ms: int = _INT64_MAX
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"
    producer_id_expiration_ms: int = _DAY_MS
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

    def __post_init__(self) -> None:
        _check(self.segment_bytes, "segment.bytes", 61, _INT32_MAX)
        _check(self.segment_ms, "segment.ms", 1, _INT64_MAX)
        _check(self.segment_index_bytes, "segment.index.bytes", 4, _INT32_MAX)
        _check(self.index_interval_bytes, "index.interval.bytes", 0, _INT32_MAX)
        _check(self.retention_ms, "retention.ms", -1, _INT64_MAX)
        _check(self.retention_bytes, "retention.bytes", -(1 << 63), _INT64_MAX)
        _check(self.max_message_bytes, "max.message.bytes", 0, _INT32_MAX)
        _check(self.message_timestamp_before_max_ms, "message.timestamp.before.max.ms", 0, _INT64_MAX)
        _check(self.message_timestamp_after_max_ms, "message.timestamp.after.max.ms", 0, _INT64_MAX)
        _check(self.flush_messages, "flush.messages", 1, _INT64_MAX)
        _check(self.flush_ms, "flush.ms", 0, _INT64_MAX)
        _check(self.file_delete_delay_ms, "file.delete.delay.ms", 0, _INT64_MAX)
        _check(self.producer_id_expiration_ms, "producer.id.expiration.ms", 1, _INT64_MAX)
        _check(self.delete_retention_ms, "delete.retention.ms", 0, _INT64_MAX)
        _check(self.min_compaction_lag_ms, "min.compaction.lag.ms", 0, _INT64_MAX)
        _check(self.max_compaction_lag_ms, "max.compaction.lag.ms", 1, _INT64_MAX)
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} is out of range [0, 1]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, not {self.compression_type!r}"
            )
        if self.compression_gzip_level != -1:
            _check(self.compression_gzip_level, "compression.gzip.level", *GZIP_LEVELS)
        _check(self.compression_lz4_level, "compression.lz4.level", *LZ4_LEVELS)
        _check(self.compression_zstd_level, "compression.zstd.level", *ZSTD_LEVELS)
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(
                f"message.timestamp.type must be one of {', '.join(_TIMESTAMP_TYPES)}, "
                f"not {self.message_timestamp_type!r}"
            )
        policies = [p.strip() for p in self.cleanup_policy.split(",")]
        if not policies or any(p not in _CLEANUP_POLICIES for p in policies):
            raise ValueError(
                f"cleanup.policy must be a list of {', '.join(_CLEANUP_POLICIES)}, not {self.cleanup_policy!r}"
            )

    @property
    def delete_enabled(self) -> bool:
        """True when retention by time and size applies (``delete`` in cleanup.policy)."""
        return "delete" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def compact(self) -> bool:
        """True when the log cleaner compacts this log (``compact`` in cleanup.policy)."""
        return "compact" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def max_records_bytes(self) -> int:
        """The most a compressed batch's records may decompress to, at produce and in the cleaner.

        RECORDS_EXPANSION times max.message.bytes: Kafka streams records out of the codec and never
        holds a batch whole, barnabas decompresses a batch at once, so the bound keeps a few KB of
        zstd from costing hundreds of MB (barnabas.protocol._records). Never above 2 GiB, which no
        Java producer's buffer can hold.
        """
        return min(RECORDS_EXPANSION * self.max_message_bytes, _INT32_MAX)

    @property
    def target_compression(self) -> tuple[Compression, int] | None:
        """The codec and level the log stores client batches in, or None to keep the producer's."""
        codec = COMPRESSION_TYPES[self.compression_type]
        if codec is None:
            return None
        levels = {
            Compression.GZIP: self.compression_gzip_level,
            Compression.LZ4: self.compression_lz4_level,
            Compression.ZSTD: self.compression_zstd_level,
        }
        return codec, levels.get(codec, -1)

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its own clock (LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with Kafka topic properties applied on top of this config.

        Args:
            overrides: topic property names (``retention.ms`` ...) to string values, as in
                CreateTopics, AlterConfigs or a ``server.properties`` file.

        Raises:
            ValueError: a value is not a number, or outside Kafka's bounds for that property.
        """
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            spec = _PROPERTIES.get(key)
            if spec is None:
                continue
            field, parse, minimum, maximum = spec
            value = parse(key, raw)
            if isinstance(value, int):
                _check(value, key, minimum, maximum)
            changes[field] = value
        return replace(self, **changes)

    def to_properties(self) -> dict[str, str]:
        """This config as Kafka topic properties (for DescribeConfigs)."""
        by_field = {spec[0]: key for key, spec in _PROPERTIES.items()}
        return {by_field[f.name]: str(getattr(self, f.name)) for f in fields(self) if f.name in by_field}


def _check(value: int, name: str, minimum: int, maximum: int) -> None:
    if not minimum <= value <= maximum:
        raise ValueError(f"{name}={value} is out of range [{minimum}, {maximum}]")


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"{key} must be an integer, not {raw!r}") from None


def _parse_ratio(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"{key} must be a number, not {raw!r}") from None
    if not 0 <= value <= 1:
        raise ValueError(f"{key}={value} is out of range [0, 1]")
    return value


def _parse_timestamp_type(key: str, raw: str) -> str:
    value = raw.strip()
    if value not in _TIMESTAMP_TYPES:
        raise ValueError(f"{key} must be one of {', '.join(_TIMESTAMP_TYPES)}, not {raw!r}")
    return value


def _parse_compression_type(key: str, raw: str) -> str:
    value = raw.strip()
    if value not in COMPRESSION_TYPES:
        raise ValueError(f"{key} must be one of {', '.join(COMPRESSION_TYPES)}, not {raw!r}")
    return value


def _parse_gzip_level(key: str, raw: str) -> int:
    value = _parse_int(key, raw)
    if value != -1:
        _check(value, key, *GZIP_LEVELS)
    return value


def _parse_cleanup_policy(key: str, raw: str) -> str:
    policies = [p.strip() for p in raw.split(",") if p.strip()]
    if not policies or any(p not in _CLEANUP_POLICIES for p in policies):
        raise ValueError(f"{key} must be a list of {', '.join(_CLEANUP_POLICIES)}, not {raw!r}")
    return ",".join(dict.fromkeys(policies))


_Parse = Callable[[str, str], int | float | str]

#: Topic property -> (field, parser, minimum, maximum), bounds as in Kafka 4's LogConfig.
_PROPERTIES: dict[str, tuple[str, _Parse, int, int]] = {
    "segment.bytes": ("segment_bytes", _parse_int, 1024 * 1024, _INT32_MAX),
    "segment.ms": ("segment_ms", _parse_int, 1, _INT64_MAX),
    "segment.index.bytes": ("segment_index_bytes", _parse_int, 4, _INT32_MAX),
    "index.interval.bytes": ("index_interval_bytes", _parse_int, 0, _INT32_MAX),
    "retention.ms": ("retention_ms", _parse_int, -1, _INT64_MAX),
    "retention.bytes": ("retention_bytes", _parse_int, -(1 << 63), _INT64_MAX),
    "max.message.bytes": ("max_message_bytes", _parse_int, 0, _INT32_MAX),
    "message.timestamp.type": ("message_timestamp_type", _parse_timestamp_type, 0, 0),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _parse_int, 0, _INT64_MAX),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _parse_int, 0, _INT64_MAX),
    "flush.messages": ("flush_messages", _parse_int, 1, _INT64_MAX),
    "flush.ms": ("flush_ms", _parse_int, 0, _INT64_MAX),
    "file.delete.delay.ms": ("file_delete_delay_ms", _parse_int, 0, _INT64_MAX),
    "cleanup.policy": ("cleanup_policy", _parse_cleanup_policy, 0, 0),
    "delete.retention.ms": ("delete_retention_ms", _parse_int, 0, _INT64_MAX),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_int, 0, _INT64_MAX),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _parse_int, 1, _INT64_MAX),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio, 0, 0),
    "compression.type": ("compression_type", _parse_compression_type, 0, 0),
    "compression.gzip.level": ("compression_gzip_level", _parse_gzip_level, -1, GZIP_LEVELS[1]),
    "compression.lz4.level": ("compression_lz4_level", _parse_int, *LZ4_LEVELS),
    "compression.zstd.level": ("compression_zstd_level", _parse_int, *ZSTD_LEVELS),
}
