"""Options of the `barnabas` source and sink, parsed and checked as Spark's KafkaSourceProvider does.

Rules this module keeps:
- Option names are case-insensitive (Spark hands data sources a CaseInsensitiveMap); values are trimmed.
- Every refusal raises `OptionError` with KafkaSourceProvider's message, so a query that is wrong for the
  JVM `kafka` format is wrong in the same words here.
- `kafka.*` options go to the client with the prefix dropped (librdkafka understands the common names:
  bootstrap.servers, client.id, fetch.*, security.*).
- No I/O: offsets named here are *unresolved* (earliest, latest, by timestamp); `offsets.py` and
  `client.py` resolve them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .offsets import EARLIEST, LATEST, TopicPartition

__all__ = [
    "Assign",
    "GlobalTimestamp",
    "OffsetBound",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Strategy",
    "Subscribe",
    "SubscribePattern",
    "parse_sink_options",
    "parse_source_options",
]

# KafkaSourceProvider.STRATEGY_OPTION_KEYS, in its Set's iteration order (used in messages).
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")

# Refused with KafkaSourceProvider's wording; the value is the message.
_REFUSED_CONSUMER_PARAMS = {
    "auto.offset.reset": (
        "\nKafka option 'auto.offset.reset' is not supported.\n"
        "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
        "to specify where to start. Structured Streaming manages which offsets are consumed\n"
        "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
        "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
        "'startingoffsets' only applies when a new Streaming query is started, and\n"
        "that resuming will always pick up from where the query left off. See the docs for more\n"
        "details.\n"
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_REFUSED_PRODUCER_PARAMS = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer.",
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with ByteArraySerializer."
    ),
}
# Java client settings that librdkafka does not know and that mean nothing to it: dropped, not passed.
_JAVA_ONLY_PARAMS = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"})


class OptionError(ValueError):
    """An option Spark's Kafka source would refuse (Spark raises IllegalArgumentException)."""


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        """Java's `Pattern.matcher(topic).matches()`: the whole name must match."""
        return re.fullmatch(self.pattern, topic) is not None


Strategy = Assign | Subscribe | SubscribePattern


@dataclass(frozen=True)
class SpecificOffsets:
    """`{"t": {"0": 23, "1": -2}}`; -2 is earliest, -1 latest (KafkaOffsetRangeLimit)."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    """`startingTimestamp`/`endingTimestamp`: one timestamp for every partition."""

    timestamp: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """`startingOffsetsByTimestamp`/`endingOffsetsByTimestamp`: `{"t": {"0": ts}}`."""

    timestamps: Mapping[TopicPartition, int]


OffsetBound = Literal["earliest", "latest"] | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True)
class SourceOptions:
    """The checked source options of one query."""

    strategy: Strategy
    client_config: Mapping[str, str]
    starting: OffsetBound
    ending: OffsetBound
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "spark-kafka-source"
    # startingOffsetsByTimestampStrategy: with "latest", a partition with no record at or after the
    # timestamp starts at its end instead of failing the query.
    timestamp_no_match_latest: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    """The checked sink options: client config and the `topic` option (which wins over a topic column)."""

    client_config: Mapping[str, str]
    topic: str | None
    include_headers: bool = False


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _client_config(params: Mapping[str, str]) -> dict[str, str]:
    return {
        key[len("kafka.") :]: value
        for key, value in params.items()
        if key.startswith("kafka.") and key[len("kafka.") :] not in _JAVA_ONLY_PARAMS
    }


def _bool(params: Mapping[str, str], key: str, default: bool) -> bool:
    value = params.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        # Scala's String.toBoolean.
        raise OptionError(f'For input string: "{value}"')
    return lowered == "true"


def _int(params: Mapping[str, str], key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f'For input string: "{value}"') from None


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def time_string_ms(text: str) -> int:
    """A duration such as `15m`, `30s` or `500` (milliseconds), as Spark's JavaUtils.timeStringAsMs reads it."""
    match = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", text.strip().lower())
    if match is None or (match[2] is not None and match[2] not in _TIME_UNITS_MS):
        raise OptionError(
            "Time must be specified as seconds (s), milliseconds (ms), microseconds (us), minutes (m or min), "
            f"hour (h), or day (d). E.g. 50s, 100ms, or 250us. Failed to parse time string: {text}"
        )
    return int(int(match[1]) * _TIME_UNITS_MS[match[2] or "ms"])


def parse_partitions(text: str) -> tuple[TopicPartition, ...]:
    """JsonUtils.partitions: `{"topicA":[0,1],"topicB":[2,4]}`."""
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise TypeError
        return tuple(
            TopicPartition(str(topic), int(partition)) for topic, parts in parsed.items() for partition in parts
        )
    except (ValueError, TypeError):
        raise OptionError(f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {text}') from None


def parse_partition_offsets(text: str) -> dict[TopicPartition, int]:
    """JsonUtils.partitionOffsets: `{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}`."""
    try:
        return _partition_longs(text)
    except (ValueError, TypeError):
        raise OptionError(f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {text}') from None


def parse_partition_timestamps(text: str) -> dict[TopicPartition, int]:
    """JsonUtils.partitionTimestamps: `{"topicA":{"0":123456789,"1":123456789}}`."""
    try:
        return _partition_longs(text)
    except (ValueError, TypeError):
        raise OptionError(
            'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
            f'"topicB": {{"0": 123456789, "1": 123456789}}}}, got {text}'
        ) from None


def _partition_longs(text: str) -> dict[TopicPartition, int]:
    parsed = json.loads(text)
    if not isinstance(parsed, dict):
        raise TypeError
    result: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise TypeError
        for partition, value in partitions.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError
            result[TopicPartition(str(topic), int(partition))] = value
    return result


def _strategy(params: Mapping[str, str]) -> Strategy:
    """KafkaSourceProvider.validateGeneralOptions + strategy: exactly one of the three."""
    specified = [key for key in STRATEGY_KEYS if key in params]
    keys = ", ".join(STRATEGY_KEYS)
    if not specified:
        raise OptionError(
            f"One of the following options must be specified for Kafka source: {keys}. See the docs for more details."
        )
    if len(specified) > 1:
        raise OptionError(
            f"Only one of the following options can be specified for Kafka source: {keys}. "
            "See the docs for more details."
        )
    key = specified[0]
    value = params[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        return Assign(parse_partitions(value))
    if key == "subscribe":
        topics = tuple(topic.strip() for topic in value.split(",") if topic.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise OptionError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
        )
    return SubscribePattern(pattern)


def _offset_bound(
    params: Mapping[str, str], timestamp_key: str, by_timestamp_key: str, offsets_key: str, default: OffsetBound
) -> OffsetBound:
    """KafkaSourceProvider.getKafkaOffsetRangeLimit: global timestamp, then per-partition, then offsets."""
    if timestamp_key in params:
        text = params[timestamp_key].strip()
        try:
            return GlobalTimestamp(int(text))
        except ValueError:
            raise OptionError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key in params:
        return SpecificTimestamps(parse_partition_timestamps(params[by_timestamp_key].strip()))
    if offsets_key in params:
        text = params[offsets_key].strip()
        if text.lower() == "latest":
            return "latest"
        if text.lower() == "earliest":
            return "earliest"
        return SpecificOffsets(parse_partition_offsets(text))
    return default


def _check_general(params: Mapping[str, str]) -> None:
    min_partitions = _int(params, "minpartitions")
    if min_partitions is not None and min_partitions <= 0:
        raise OptionError("minPartitions must be positive")
    max_records = _int(params, "maxrecordsperpartition")
    if max_records is not None and max_records <= 0:
        raise OptionError("maxrecordsperpartition must be positive")
    for name, message in _REFUSED_CONSUMER_PARAMS.items():
        if f"kafka.{name}" in params:
            raise OptionError(message)
    if "kafka.bootstrap.servers" not in params:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    low, high = _int(params, "minoffsetspertrigger"), _int(params, "maxoffsetspertrigger")
    if low is not None and high is not None and low > high:
        raise OptionError(f"The value of minOffsetPerTrigger({low}) is higher than the maxOffsetsPerTrigger({high}).")


def _check_batch_bounds(starting: OffsetBound, ending: OffsetBound) -> None:
    """KafkaSourceProvider.validateBatchOptions and checkOffsetLimitValidity."""
    if starting == "latest":
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise OptionError(f"startingOffsets for {tp} can't be latest for batch queries on Kafka")
    if ending == "earliest":
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise OptionError(f"ending offset for {tp} can't be earliest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        _check_matching_bounds(starting.offsets, ending.offsets, "offset")
    if isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        _check_matching_bounds(starting.timestamps, ending.timestamps, "timestamp")


def _check_matching_bounds(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], what: str) -> None:
    """KafkaExceptions.unmatchedTopicPartitionsBetweenOffsets and unresolvedStart*GreaterThanEnd*."""
    if set(start) != set(end):
        raise OptionError(
            "The specified start and end offsets/timestamps should cover the same topic partitions: "
            f"start {sorted(map(str, start))}, end {sorted(map(str, end))}"
        )
    for tp, first in start.items():
        last = end[tp]
        if first > last and first >= 0 and last >= 0:
            raise OptionError(
                f"The specified start {what} ({first}) is greater than the end {what} ({last}) for topic "
                f"partition {tp}. Please correct your options."
            )


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check and parse source options as KafkaSourceProvider.validateStream/BatchOptions do.

    Args:
        options: the reader's options (any case).
        streaming: True for readStream (no ending offsets; starts at latest by default).

    Returns:
        The parsed options.

    Raises:
        OptionError: with the message Spark's Kafka source gives for the same options.
    """
    params = {key: value for key, value in _lower(options).items() if key not in ("path",)}
    if streaming:
        if "endingoffsets" in params:
            raise OptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in params:
            raise OptionError("ending timestamp not valid in streaming queries")
    starting = _offset_bound(
        params,
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsets",
        "latest" if streaming else "earliest",
    )
    ending = _offset_bound(params, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", "latest")
    if not streaming:
        _check_batch_bounds(starting, ending)
    strategy = _strategy(params)
    _check_general(params)
    no_match = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise OptionError(f"No value found for '{no_match.upper()}'")
    poll_timeout = _int(params, "kafkaconsumer.polltimeoutms")
    return SourceOptions(
        strategy=strategy,
        client_config=_client_config(params),
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(params, "failondataloss", True),
        include_headers=_bool(params, "includeheaders", False),
        min_partitions=_int(params, "minpartitions"),
        max_records_per_partition=_int(params, "maxrecordsperpartition"),
        max_offsets_per_trigger=_int(params, "maxoffsetspertrigger"),
        min_offsets_per_trigger=_int(params, "minoffsetspertrigger"),
        max_trigger_delay_ms=time_string_ms(params.get("maxtriggerdelay", "15m")),
        poll_timeout_ms=poll_timeout if poll_timeout is not None else 120_000,
        group_id_prefix=params.get("groupidprefix", "spark-kafka-source"),
        timestamp_no_match_latest=no_match == "latest",
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check sink options as KafkaSourceProvider.kafkaParamsForProducer does.

    Raises:
        OptionError: for serializer settings (the sink writes bytes) or a missing bootstrap server.
    """
    params = _lower(options)
    for name, message in _REFUSED_PRODUCER_PARAMS.items():
        if f"kafka.{name}" in params:
            raise OptionError(message)
    if "kafka.bootstrap.servers" not in params:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    topic = params.get("topic")
    return SinkOptions(
        client_config=_client_config(params),
        topic=topic.strip() if topic is not None else None,
        include_headers=_bool(params, "includeheaders", False),
    )
