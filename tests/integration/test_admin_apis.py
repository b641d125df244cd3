"""Admin and offset APIs through librdkafka's AdminClient and clients, against a real broker.

Covers CreateTopics (configs, validate_only, errors), DescribeConfigs and
IncrementalAlterConfigs, CreatePartitions, DeleteRecords, ListOffsets (earliest, latest, by
timestamp, max timestamp), DescribeCluster, LogAppendTime, min.insync.replicas, auto-creation
and persistence across a restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_until

TIMEOUT = 30


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(shared_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def create(admin: AdminClient, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(TIMEOUT)


def produce(
    bootstrap: str, topic: str, values: list[bytes], timestamps: list[int] | None = None, **conf: object
) -> list[tuple[int, int]]:
    """Produce ``values`` to partition 0 and return (offset, timestamp) per delivered message."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, **conf})
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append((message.offset(), message.timestamp()[1]))  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        kwargs = {"timestamp": timestamps[i]} if timestamps else {}
        producer.produce(topic, value=value, key=str(i).encode(), partition=0, on_delivery=on_delivery, **kwargs)
    assert producer.flush(TIMEOUT) == 0
    assert not errors, errors
    return sorted(delivered)


def consume_all(bootstrap: str, topic: str, partition: int, start: int, expected: int) -> list[object]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "admin-tests", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, start)])
    messages: list[object] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    return messages


def list_offset(admin: AdminClient, topic: str, spec: OffsetSpec, partition: int = 0) -> tuple[int, int]:
    tp = TopicPartition(topic, partition)
    info = admin.list_offsets({tp: spec})[tp].result(TIMEOUT)
    return info.offset, info.timestamp


def test_create_topic_with_configs_then_describe(admin: AdminClient) -> None:
    name = unique("configs")
    create(admin, name, partitions=2, config={"retention.ms": "3600000", "cleanup.policy": "delete"})
    metadata = admin.list_topics(topic=name, timeout=TIMEOUT).topics[name]
    assert sorted(metadata.partitions) == [0, 1]
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].is_default


def test_create_topic_errors(admin: AdminClient) -> None:
    name = unique("exists")
    create(admin, name)
    with pytest.raises(KafkaException) as exists:
        create(admin, name)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as bad_config:
        create(admin, unique("badconfig"), config={"retention.ms": "soon"})
    assert bad_config.value.args[0].code() == KafkaError.INVALID_CONFIG
    topic = unique("rf")
    with pytest.raises(KafkaException) as bad_rf:
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(TIMEOUT)
    assert bad_rf.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    name = unique("dry")
    admin.create_topics([NewTopic(name, 4, 1)], validate_only=True)[name].result(TIMEOUT)
    assert name not in admin.list_topics(timeout=TIMEOUT).topics


def test_incremental_alter_configs(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    name = unique("alter")
    create(admin, name, config={"retention.ms": "1000000"})
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    described = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([described])[described].result(TIMEOUT)
    assert configs["retention.ms"].is_default
    assert configs["max.message.bytes"].value == "2000"
    assert configs["cleanup.policy"].value == "delete,compact"
    # The new max.message.bytes applies at once: a 3000-byte record is refused.
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0})
    errors: list[KafkaError] = []
    producer.produce(name, value=b"x" * 3000, partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(TIMEOUT)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    bad = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[ConfigEntry("segment.bytes", "12", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as caught:
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_replication_throttles_can_be_cleared_but_not_set(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    """kafka-reassign-partitions.sh --verify deletes the throttle settings of every broker and moved topic;
    replication is never throttled here, so that is a no-op, and setting a throttle is refused."""
    name = unique("throttle")
    create(admin, name)

    def alter(kind: ResourceType, resource_name: str, key: str, op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry(key, value, incremental_operation=op)
        resource = ConfigResource(kind, resource_name, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)

    broker_id = str(shared_broker.broker_id)
    alter(ResourceType.TOPIC, name, "leader.replication.throttled.replicas", AlterConfigOpType.DELETE, None)
    alter(ResourceType.BROKER, broker_id, "follower.replication.throttled.rate", AlterConfigOpType.DELETE, None)
    for kind, resource_name, key in [
        (ResourceType.TOPIC, name, "follower.replication.throttled.replicas"),
        (ResourceType.BROKER, broker_id, "leader.replication.throttled.rate"),
    ]:
        with pytest.raises(KafkaException) as caught:
            alter(kind, resource_name, key, AlterConfigOpType.SET, "1000")
        assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as caught:  # any other broker setting stays read-only
        alter(ResourceType.BROKER, broker_id, "log.retention.ms", AlterConfigOpType.DELETE, None)
    assert caught.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_create_partitions(admin: AdminClient) -> None:
    name = unique("grow")
    create(admin, name, partitions=1)
    admin.create_partitions([NewPartitions(name, 3)])[name].result(TIMEOUT)
    wait_until(lambda: len(admin.list_topics(topic=name, timeout=TIMEOUT).topics[name].partitions) == 3, "3 partitions")
    with pytest.raises(KafkaException) as caught:
        admin.create_partitions([NewPartitions(name, 2)])[name].result(TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_metadata_follows_a_topic_deleted_and_created_again(admin: AdminClient) -> None:
    # The broker keeps each topic's encoded Metadata section until the metadata changes.
    name = unique("again")
    create(admin, name, partitions=2)
    before = admin.list_topics(topic=name, timeout=TIMEOUT).topics[name]
    assert len(before.partitions) == 2
    admin.delete_topics([name])[name].result(TIMEOUT)
    wait_until(lambda: name not in admin.list_topics(timeout=TIMEOUT).topics, f"{name} deleted")
    create(admin, name, partitions=4)
    after = admin.list_topics(topic=name, timeout=TIMEOUT).topics[name]
    assert sorted(after.partitions) == [0, 1, 2, 3]
    assert after.error is None and all(p.leader == 0 for p in after.partitions.values())


def test_delete_records_moves_log_start(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    name = unique("delrec")
    create(admin, name)
    produce(shared_broker.bootstrap, name, [f"v{i}".encode() for i in range(100)])
    tp = TopicPartition(name, 0, 40)
    result = admin.delete_records([tp])[tp].result(TIMEOUT)
    assert result.low_watermark == 40
    assert list_offset(admin, name, OffsetSpec.earliest())[0] == 40
    messages = consume_all(shared_broker.bootstrap, name, 0, 40, expected=60)
    assert [m.offset() for m in messages] == list(range(40, 100))  # type: ignore[attr-defined]
    beyond = TopicPartition(name, 0, 500)
    with pytest.raises(KafkaException) as caught:
        admin.delete_records([beyond])[beyond].result(TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_list_offsets_by_time(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    name = unique("times")
    create(admin, name)
    base = int(time.time() * 1000) - 60_000
    timestamps = [base + i * 1000 for i in range(10)]
    timestamps[7] = base + 50_000  # the largest timestamp sits at offset 7
    produce(shared_broker.bootstrap, name, [b"v"] * 10, timestamps=timestamps)
    assert list_offset(admin, name, OffsetSpec.earliest())[0] == 0
    assert list_offset(admin, name, OffsetSpec.latest())[0] == 10
    assert list_offset(admin, name, OffsetSpec.for_timestamp(base + 3500)) == (4, base + 4000)
    assert list_offset(admin, name, OffsetSpec.max_timestamp()) == (7, base + 50_000)
    assert list_offset(admin, name, OffsetSpec.for_timestamp(base + 99_000))[0] == -1


def test_offsets_for_times_inside_one_compressed_batch(shared_broker: BrokerProcess, admin: AdminClient) -> None:
    name = unique("batchtimes")
    create(admin, name)
    base = int(time.time() * 1000) - 10_000
    # linger makes one batch; the lookup must look inside it for the exact record.
    produce(
        shared_broker.bootstrap,
        name,
        [b"v"] * 20,
        timestamps=[base + i for i in range(20)],
        **{"linger.ms": 100, "compression.type": "lz4"},
    )
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "t", "enable.auto.commit": False})
    try:
        found = consumer.offsets_for_times([TopicPartition(name, 0, base + 13)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert found[0].offset == 13


def test_log_append_time_topic(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    name = unique("appendtime")
    create(admin, name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(shared_broker.bootstrap, name, [b"a", b"b"], timestamps=[1000, 2000])
    after = int(time.time() * 1000)
    messages = consume_all(shared_broker.bootstrap, name, 0, 0, expected=2)
    assert len(messages) == 2
    for message in messages:
        kind, stamp = message.timestamp()  # type: ignore[attr-defined]
        assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= stamp <= after + 1000


def test_describe_cluster(admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.cluster_id
    assert cluster.controller is not None and cluster.controller.id == 0
    assert [node.id for node in cluster.nodes] == [0]


def test_min_insync_replicas_above_isr_rejects_acks_all(admin: AdminClient, shared_broker: BrokerProcess) -> None:
    name = unique("minisr")
    create(admin, name, config={"min.insync.replicas": "2"})
    producer = Producer(
        {"bootstrap.servers": shared_broker.bootstrap, "acks": "all", "message.timeout.ms": 3000, "retries": 0}
    )
    errors: list[KafkaError | None] = []
    producer.produce(name, value=b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(TIMEOUT)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    # acks=1 does not wait for the ISR and succeeds.
    assert produce(shared_broker.bootstrap, name, [b"y"], acks=1)[0][0] == 0


def test_metadata_auto_creates_with_default_partitions(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(extra_args=["--set", "num.partitions=3"]).start()
    name = unique("auto")
    produce(broker.bootstrap, name, [b"hello"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(topic=name, timeout=TIMEOUT).topics[name].partitions) == 3


def test_auto_create_disabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(extra_args=["--set", "auto.create.topics.enable=false"]).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(topic="never-created", timeout=TIMEOUT)
    assert metadata.topics["never-created"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_topics_configs_and_data_survive_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory().start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("persist")
    create(admin, name, partitions=2, config={"retention.bytes": "123456789"})
    produce(broker.bootstrap, name, [f"m{i}".encode() for i in range(50)])
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, name)
    assert admin.describe_configs([resource])[resource].result(TIMEOUT)["retention.bytes"].value == "123456789"
    assert list_offset(admin, name, OffsetSpec.latest())[0] == 50
    messages = consume_all(broker.bootstrap, name, 0, 0, expected=50)
    assert [m.value() for m in messages] == [f"m{i}".encode() for i in range(50)]  # type: ignore[attr-defined]
    assert "stopped cleanly" in broker.log_text()


def test_retention_by_time_advances_log_start(broker_factory: Callable[..., BrokerProcess]) -> None:
    fast_retention = ["--set", "log.retention.check.interval.ms=100", "--set", "log.initial.task.delay.ms=0"]
    broker = broker_factory(extra_args=fast_retention).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("retention")
    create(admin, name, config={"segment.bytes": str(1 << 20)})
    value = b"r" * 10_000
    produce(broker.bootstrap, name, [value] * 250, **{"batch.size": 20_000})  # ~2.5 MB: three segments
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    wait_until(lambda: list_offset(admin, name, OffsetSpec.earliest())[0] > 0, "retention to delete segments")
    earliest = list_offset(admin, name, OffsetSpec.earliest())[0]
    assert list_offset(admin, name, OffsetSpec.latest())[0] == 250
    messages = consume_all(broker.bootstrap, name, 0, earliest, expected=250 - earliest)
    assert [m.offset() for m in messages] == list(range(earliest, 250))  # type: ignore[attr-defined]
