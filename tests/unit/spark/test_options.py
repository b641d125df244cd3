"""Source and sink options parsed and refused as Spark's KafkaSourceProvider does, without Spark."""

from __future__ import annotations

import pytest

from barnabas.spark.offsets import TopicPartition
from barnabas.spark.options import (
    Assign,
    GlobalTimestamp,
    OptionError,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_sink_options,
    parse_source_options,
    time_string_ms,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_strategies() -> None:
    assert parse_source_options({**BOOTSTRAP, "subscribe": " a, b ,,"}, streaming=True).strategy == Subscribe(
        ("a", "b")
    )
    parsed = parse_source_options({**BOOTSTRAP, "subscribePattern": "ev.*"}, streaming=True)
    assert parsed.strategy == SubscribePattern("ev.*")
    assert isinstance(parsed.strategy, SubscribePattern)
    assert parsed.strategy.matches("events") and not parsed.strategy.matches("xevents")
    parsed = parse_source_options({**BOOTSTRAP, "ASSIGN": '{"a": [0, 1], "b": [2]}'}, streaming=True)
    assert parsed.strategy == Assign((TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign."),
        (
            {"subscribe": "a", "assign": '{"a":[0]}'},
            "Only one of the following options can be specified for Kafka source: subscribe, subscribepattern, assign.",
        ),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty as specified value for option 'subscribePattern'"),
        ({"assign": "a:0"}, "No topicpartitions to assign as specified value for option 'assign' is 'a:0'"),
        ({"assign": "{nope"}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {nope'),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "Kafka option 'auto.offset.reset' is not supported.",
        ),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
        ({"subscribe": "a", "kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported as keys"),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        ({"subscribe": "a", "endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
        ({"subscribe": "a", "endingOffsetsByTimestamp": "{}"}, "ending timestamp not valid in streaming queries"),
        ({"subscribe": "a", "startingTimestamp": "soon"}, "Expected a single long value, got soon"),
        ({"subscribe": "a", "startingOffsets": "[1]"}, 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5).",
        ),
    ],
)
def test_refused_like_kafka_source_provider(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as refused:
        parse_source_options({**BOOTSTRAP, **options}, streaming=True)
    assert message in str(refused.value)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(OptionError, match=r"Option 'kafka\.bootstrap\.servers' must be specified"):
        parse_source_options({"subscribe": "a"}, streaming=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest for batch queries"),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest for batch queries"),
        ({"startingOffsets": '{"a":{"0":5}}', "endingOffsets": '{"a":{"1":5}}'}, "should cover the same"),
        ({"startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'}, "start offset (9) is greater"),
    ],
)
def test_batch_bounds_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as refused:
        parse_source_options({**BOOTSTRAP, "subscribe": "a", **options}, streaming=False)
    assert message in str(refused.value)


def test_defaults_differ_between_batch_and_streaming() -> None:
    streaming = parse_source_options({**BOOTSTRAP, "subscribe": "a"}, streaming=True)
    batch = parse_source_options({**BOOTSTRAP, "subscribe": "a"}, streaming=False)
    assert (streaming.starting, batch.starting, batch.ending) == ("latest", "earliest", "latest")
    assert streaming.fail_on_data_loss and not streaming.include_headers
    assert streaming.max_offsets_per_trigger is None and streaming.poll_timeout_ms == 120_000


def test_offset_bounds_in_spark_preference_order() -> None:
    parsed = parse_source_options(
        {
            **BOOTSTRAP,
            "subscribe": "a",
            "startingTimestamp": "1000",
            "startingOffsetsByTimestamp": '{"a":{"0":5}}',
            "startingOffsets": "earliest",
            "endingOffsetsByTimestamp": '{"a":{"0":2000}}',
        },
        streaming=False,
    )
    assert parsed.starting == GlobalTimestamp(1000)
    assert parsed.ending == SpecificTimestamps({TopicPartition("a", 0): 2000})
    parsed = parse_source_options(
        {**BOOTSTRAP, "subscribe": "a", "STARTINGOFFSETS": ' {"a": {"0": 23, "1": -2}} '}, streaming=True
    )
    assert parsed.starting == SpecificOffsets({TopicPartition("a", 0): 23, TopicPartition("a", 1): -2})


def test_kafka_params_go_to_the_client_without_prefix() -> None:
    parsed = parse_source_options(
        {**BOOTSTRAP, "subscribe": "a", "kafka.client.id": "me", "includeHeaders": "TRUE", "failOnDataLoss": "false"},
        streaming=True,
    )
    assert parsed.client_config == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "me"}
    assert parsed.include_headers and not parsed.fail_on_data_loss


def test_sink_options() -> None:
    sink = parse_sink_options({**BOOTSTRAP, "topic": " out "})
    assert sink.topic == "out" and sink.client_config == {"bootstrap.servers": "127.0.0.1:9092"}
    with pytest.raises(OptionError, match=r"Kafka option 'key\.serializer' is not supported"):
        parse_sink_options({**BOOTSTRAP, "kafka.key.serializer": "x"})
    with pytest.raises(OptionError, match=r"Kafka option 'value\.serializer' is not supported"):
        parse_sink_options({**BOOTSTRAP, "kafka.value.serializer": "x"})


def test_min_offsets_and_trigger_delay() -> None:
    parsed = parse_source_options(
        {**BOOTSTRAP, "subscribe": "a", "minOffsetsPerTrigger": "100", "maxTriggerDelay": "30s"}, streaming=True
    )
    assert (parsed.min_offsets_per_trigger, parsed.max_trigger_delay_ms) == (100, 30_000)
    assert parse_source_options({**BOOTSTRAP, "subscribe": "a"}, streaming=True).max_trigger_delay_ms == 900_000
    assert [time_string_ms(t) for t in ("250", "2min", "1h", "1d", "1500us")] == [
        250,
        120_000,
        3_600_000,
        86_400_000,
        1,
    ]
    with pytest.raises(OptionError, match="Time must be specified as seconds"):
        time_string_ms("soon")
