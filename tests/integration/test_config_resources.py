"""Config resources through real clients and beside Apache Kafka 4.4: legacy AlterConfigs, groups, compression.

Legacy AlterConfigs (33) replaces a resource's whole set of overrides: confluent-kafka's
(deprecated) ``alter_configs`` and kafka-python's ``alter_configs(incremental=False)`` send it.
Group resources (type 32) describe Kafka's group settings at their defaults; setting one is
refused, as barnabas serves none of the group kinds they tune. A topic's ``compression.type``
decides the codec its batches are stored in, whatever the producer sent. The same requests go to
one Kafka 4.4 broker (KRaft, the jars bench/kafka-server/build.sh resolves) and to barnabas, and
the answers (and the stored batches' codecs) are compared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.record.default_records import DefaultRecordBatch

from barnabas.benchmark._kafka import KafkaCluster
from barnabas.config.definitions import parse_host_port
from barnabas.protocol import ErrorCode, iter_batch_headers, request_class
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_peer import kafka_peer
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import create_topic, create_topics, fetch, unique

pytestmark = pytest.mark.timeout(240)

TIMEOUT = 30
ALTER_CONFIGS, DESCRIBE_CONFIGS = 33, 32
TOPIC, BROKER, GROUP = 2, 4, 32
DYNAMIC_TOPIC_CONFIG = 1


@pytest.fixture
def admin(shared_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with kafka_peer(tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


def connect(bootstrap: str) -> RawKafkaClient:
    host, port = parse_host_port(bootstrap.split(",", maxsplit=1)[0])
    return RawKafkaClient.connect(host, port)


def legacy_alter(
    client: RawKafkaClient, resource_type: int, name: str, configs: list[tuple[str, str | None]], validate: bool = False
) -> tuple[int, str | None]:
    """One AlterConfigs v2 resource: its error code and message."""
    resource = request_class(ALTER_CONFIGS, 2, "AlterConfigsResource")(
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(request_class(ALTER_CONFIGS, 2, "AlterableConfig")(name=k, value=v) for k, v in configs),
    )
    answer = client.request(
        ALTER_CONFIGS, 2, request_class(ALTER_CONFIGS, 2)(resources=(resource,), validate_only=validate)
    )
    (result,) = answer.responses
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result.error_code, result.error_message


def describe(client: RawKafkaClient, resource_type: int, name: str) -> Any:
    """One DescribeConfigs v4 result, with synonyms and documentation."""
    resource = request_class(DESCRIBE_CONFIGS, 4, "DescribeConfigsResource")(
        resource_type=resource_type, resource_name=name, configuration_keys=None
    )
    body = request_class(DESCRIBE_CONFIGS, 4)(resources=(resource,), include_synonyms=True, include_documentation=True)
    (result,) = client.request(DESCRIBE_CONFIGS, 4, body).results
    return result


def overrides(client: RawKafkaClient, topic: str) -> dict[str, str]:
    result = describe(client, TOPIC, topic)
    assert result.error_code == ErrorCode.none, result
    return {entry.name: entry.value for entry in result.configs if entry.config_source == DYNAMIC_TOPIC_CONFIG}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_alter_configs_replaces_a_topics_overrides(admin: AdminClient) -> None:
    name = unique("legacy")
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000000", "max.message.bytes": "2000"})])[
        name
    ].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.TOPIC, name, set_config={"max.message.bytes": "3000", "cleanup.policy": "compact"}
    )
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    described = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([described])[described].result(TIMEOUT)
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # left out: back to the default
    assert configs["max.message.bytes"].value == "3000"
    assert configs["cleanup.policy"].value == "compact"

    only_checked = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "5000"})
    admin.alter_configs([only_checked], validate_only=True)[only_checked].result(TIMEOUT)
    after = admin.describe_configs([described])[described].result(TIMEOUT)
    assert {k: v.value for k, v in after.items()} == {k: v.value for k, v in configs.items()}

    for bad in ({"segment.bytes": "12"}, {"no.such.setting": "1"}):
        refused = ConfigResource(ResourceType.TOPIC, name, set_config=bad)
        with pytest.raises(KafkaException) as caught:
            admin.alter_configs([refused])[refused].result(TIMEOUT)
        assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert admin.describe_configs([described])[described].result(TIMEOUT)["max.message.bytes"].value == "3000"


def test_kafka_python_alter_configs_without_incremental(shared_broker: BrokerProcess) -> None:
    name = unique("legacy-kp")
    with connect(shared_broker.bootstrap) as client:
        create_topic(client, name, **{"retention.ms": "1000000"})
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        resource = KafkaPythonConfigResource(ConfigResourceType.TOPIC, name, configs={"max.message.bytes": "4000"})
        result = admin.alter_configs([resource], incremental=False, raise_on_unknown=False)
    finally:
        admin.close()
    assert result == {"topic": {name: "OK"}}
    with connect(shared_broker.bootstrap) as client:  # the client sent the override it kept along with the new one
        assert overrides(client, name) == {"retention.ms": "1000000", "max.message.bytes": "4000"}


def test_legacy_alter_configs_cordons_a_broker_and_an_empty_set_lifts_it(shared_broker: BrokerProcess) -> None:
    broker = str(shared_broker.broker_id)

    def cordon() -> str:
        (entry,) = [entry for entry in describe(client, BROKER, broker).configs if entry.name == "cordoned.log.dirs"]
        return str(entry.value)

    with connect(shared_broker.bootstrap) as client:
        try:
            assert legacy_alter(client, BROKER, broker, [("cordoned.log.dirs", "*")]) == (ErrorCode.none, None)
            assert cordon() == "*"
            assert legacy_alter(client, BROKER, broker, []) == (ErrorCode.none, None)
            assert cordon() == ""
        finally:
            legacy_alter(client, BROKER, broker, [])
        code, message = legacy_alter(client, BROKER, broker, [("num.io.threads", "4")])
        assert code == ErrorCode.invalid_request and "not supported" in str(message)


def test_group_configs_are_described_at_their_defaults(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.GROUP, unique("any-group"))
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    timeout = configs["consumer.session.timeout.ms"]
    assert (timeout.value, timeout.source, timeout.is_read_only) == ("45000", ConfigSource.DEFAULT_CONFIG.value, True)
    assert list(timeout.synonyms) == ["group.consumer.session.timeout.ms"]
    assert configs["share.auto.offset.reset"].value == "latest"


def test_group_configs_cannot_be_set(admin: AdminClient) -> None:
    group = unique("group")

    def alter(key: str, op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry(key, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)

    alter("consumer.session.timeout.ms", AlterConfigOpType.DELETE, None)  # never set: nothing to delete
    for key in ("consumer.session.timeout.ms", "no.such.group.setting"):
        with pytest.raises(KafkaException) as caught:
            alter(key, AlterConfigOpType.SET, "50000")
        assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG


#: (what, resource type, name, configs, validate_only) sent to both; the topic is made with retention.ms set.
SAME_ANSWERS: list[tuple[str, int, str, list[tuple[str, str | None]], bool]] = [
    ("replace a topic's overrides", TOPIC, "{topic}", [("cleanup.policy", "compact")], False),
    ("validate only", TOPIC, "{topic}", [("retention.ms", "5")], True),
    ("a null value", TOPIC, "{topic}", [("cleanup.policy", None)], False),
    ("a name twice", TOPIC, "{topic}", [("cleanup.policy", "delete"), ("cleanup.policy", "compact")], False),
    ("an unknown topic setting", TOPIC, "{topic}", [("no.such.setting", "1")], False),
    ("a value that does not parse", TOPIC, "{topic}", [("retention.ms", "abc")], False),
    ("a topic that does not exist", TOPIC, "{topic}-missing", [("retention.ms", "1")], False),
    ("an unknown group setting", GROUP, "group", [("no.such.setting", "1")], False),
    ("the default group", GROUP, "", [], False),
    ("an unknown resource type", 99, "x", [], False),
]


def test_legacy_alter_configs_answers_as_kafka_does(kafka: KafkaCluster, shared_broker: BrokerProcess) -> None:
    topic = unique("legacy-cmp")
    answers: dict[str, list[tuple[str, int]]] = {}
    final: dict[str, dict[str, str]] = {}
    for system, bootstrap in (("kafka", kafka.bootstrap), ("barnabas", shared_broker.bootstrap)):
        with connect(bootstrap) as client:
            create_topic(client, topic, **{"retention.ms": "1000000"})
            answers[system] = [
                (what, legacy_alter(client, kind, name.format(topic=topic), configs, validate)[0])
                for what, kind, name, configs, validate in SAME_ANSWERS
            ]
            final[system] = overrides(client, topic)
    assert answers["barnabas"] == answers["kafka"]
    assert final["barnabas"] == final["kafka"] == {"cleanup.policy": "compact"}


def test_group_configs_are_described_as_kafka_describes_them(kafka: KafkaCluster, shared_broker: BrokerProcess) -> None:
    """Names, values, types, sources and synonyms as Kafka 4.4's; only read_only differs (see config/group.py)."""
    described: dict[str, dict[str, tuple[Any, ...]]] = {}
    for system, bootstrap in (("kafka", kafka.bootstrap), ("barnabas", shared_broker.bootstrap)):
        with connect(bootstrap) as client:
            result = describe(client, GROUP, "some-group")
            assert result.error_code == ErrorCode.none, result
            assert describe(client, GROUP, "").error_code == ErrorCode.invalid_request
        described[system] = {
            entry.name: (entry.value, entry.config_source, entry.config_type, entry.is_sensitive,
                         [(s.name, s.value, s.source) for s in entry.synonyms])
            for entry in result.configs
        }  # fmt: skip
    assert described["barnabas"] == described["kafka"]


# --- compression.type: the codec a topic stores batches in ---------------------------------------

CODECS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: (topic compression.type, the producer's codec) sent to both.
COMPRESSION_CASES = [("lz4", "none"), ("gzip", "zstd"), ("uncompressed", "snappy"), ("zstd", "zstd"),
                     ("producer", "zstd"), ("snappy", "lz4")]  # fmt: skip
COMPRESSION_SETTINGS = ("compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level")


def produce_with(bootstrap: str, topic: str, codec: str, values: list[bytes]) -> None:
    """librdkafka's producer, in one batch compressed with ``codec``: it lingers until ``flush`` sends what it
    holds (a 50 ms linger cut the five records into two batches on a loaded machine)."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 60_000, "acks": "all"})
    for value in values:
        producer.produce(topic, value, key=b"k", partition=0)
    assert producer.flush(TIMEOUT) == 0


def stored(bootstrap: str, topic: str) -> tuple[list[int], list[bytes | None]]:
    """The codec of each batch the partition holds and every record's value, as kafka-python decodes them."""
    with connect(bootstrap) as client:
        data = fetch(client, topic, 0, 0)
    assert data.error_code == ErrorCode.none, data
    records = bytes(data.records or b"")
    codecs = [header.compression for _, header in iter_batch_headers(records)]
    values = [record.value for position, header in iter_batch_headers(records)
              for record in DefaultRecordBatch(records[position : position + header.size])]  # fmt: skip
    return codecs, values


def consumed(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    """What librdkafka's consumer reads from the start of the partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("codec"), "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        while len(values) < count:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"read {len(values)} of {count} records"
            assert message.error() is None, message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_topics_store_batches_in_their_compression_type_as_kafka_does(
    kafka: KafkaCluster, shared_broker: BrokerProcess
) -> None:
    values = [f"record {i} ".encode() * 20 for i in range(5)]
    codecs: dict[str, list[list[int]]] = {}
    for system, bootstrap in (("kafka", kafka.bootstrap), ("barnabas", shared_broker.bootstrap)):
        codecs[system] = []
        for topic_codec, producer_codec in COMPRESSION_CASES:
            topic = unique(f"codec-{topic_codec}")
            with connect(bootstrap) as client:
                create_topic(client, topic, **{"compression.type": topic_codec})
            produce_with(bootstrap, topic, producer_codec, values)
            batch_codecs, stored_values = stored(bootstrap, topic)
            assert stored_values == values
            assert consumed(bootstrap, topic, len(values)) == values
            codecs[system].append(batch_codecs)
    expected = [[CODECS[producer if topic == "producer" else topic]] for topic, producer in COMPRESSION_CASES]
    assert codecs["kafka"] == expected
    assert codecs["barnabas"] == codecs["kafka"]


def test_compression_settings_are_checked_altered_and_described_as_kafka_does(
    kafka: KafkaCluster, shared_broker: BrokerProcess
) -> None:
    """A bad codec or level refused alike; after a change new batches take the new codec; described alike."""
    bad = [
        ("compression.type", "none"),
        ("compression.type", "LZ4"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
    ]
    refusals: dict[str, list[int]] = {}
    described: dict[str, dict[str, tuple[Any, ...]]] = {}
    for system, bootstrap in (("kafka", kafka.bootstrap), ("barnabas", shared_broker.bootstrap)):
        topic = unique("codec-alter")
        with connect(bootstrap) as client:
            refusals[system] = []
            for name, value in bad:
                bad_topic = unique("codec-bad")
                refusals[system].append(create_topics(client, [bad_topic], **{name: value})[bad_topic].error_code)
            create_topic(client, topic, **{"compression.zstd.level": "7"})
            refusals[system].extend(legacy_alter(client, TOPIC, topic, [(n, v)])[0] for n, v in bad)
        produce_with(bootstrap, topic, "none", [b"before"])
        with connect(bootstrap) as client:
            zstd = [("compression.type", "zstd"), ("compression.zstd.level", "7")]
            assert legacy_alter(client, TOPIC, topic, zstd)[0] == ErrorCode.none
            result = describe(client, TOPIC, topic)
        produce_with(bootstrap, topic, "none", [b"after"])
        assert stored(bootstrap, topic) == ([0, 4], [b"before", b"after"])
        described[system] = {
            entry.name: (entry.value, entry.config_source, entry.config_type,
                         [(s.name, s.value, s.source) for s in entry.synonyms])
            for entry in result.configs
            if entry.name in COMPRESSION_SETTINGS
        }  # fmt: skip
    assert refusals["kafka"] == [ErrorCode.invalid_config] * 2 * len(bad)
    assert refusals["barnabas"] == refusals["kafka"]
    assert sorted(described["kafka"]) == sorted(COMPRESSION_SETTINGS)
    assert described["barnabas"] == described["kafka"]
