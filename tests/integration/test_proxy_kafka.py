"""Transactions through the proxy, with Apache Kafka itself as the cluster (barnabas brokers serve none yet).

One Kafka 4 broker (KRaft, the jars bench/kafka-server/build.sh resolves) on a loopback port, one proxy
node in front of it; every client bootstraps from the proxy only. A confluent-kafka transactional
producer consumes, produces and commits its consumer group's offsets in one transaction, then aborts
another whose records reached the log: a read_committed consumer through the proxy reads exactly the
committed records and the group's offsets are the committed ones. kafka-python's admin client lists and
describes the transactions (ListTransactions, DescribeTransactions) and the partitions' producers
(DescribeProducers) through the proxy. A client may not send transaction markers (WriteTxnMarkers) nor
the brokers' own AddPartitionsToTxn (v4+).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import KafkaAdminClient

from barnabas.benchmark._kafka import KafkaCluster
from barnabas.protocol import request_class
from barnabas.testing import ProxyNode, free_ports
from tests.support.kafka_peer import kafka_peer
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import api_versions_request, unique

pytestmark = pytest.mark.timeout(240)

TIMEOUT = 30.0
PARTITIONS = 3
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, WRITE_TXN_MARKERS, API_VERSIONS = 22, 24, 27, 18
#: Kafka creates its internal topics on first use; with one partition each instead of 50 that takes a
#: fraction of the time (one broker leads them all either way).
INTERNAL_TOPICS = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with kafka_peer(tmp_path_factory.mktemp("kafka"), INTERNAL_TOPICS) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def proxy(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyNode]:
    (port,) = free_ports(1)
    node = ProxyNode(tmp_path_factory.mktemp("proxy"), kafka.bootstrap, port)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def new_topics(proxy: ProxyNode, *prefixes: str) -> list[str]:
    names = [unique(prefix) for prefix in prefixes]
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
        future.result(TIMEOUT)
    return names


def consumer(proxy: ProxyNode, group: str, isolation: str = "read_committed") -> Consumer:
    return Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": isolation})  # fmt: skip


def read_to_the_end(proxy: ProxyNode, topic: str, isolation: str) -> list[bytes]:
    """Every value of ``topic`` a consumer with ``isolation`` reads until it reaches the end of each
    partition (librdkafka's partition EOF: the high watermark, or for read_committed the last stable
    offset, past which Kafka lets it read once every transaction before has ended)."""
    reader = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": unique("reader"),
                       "isolation.level": isolation, "enable.partition.eof": True})  # fmt: skip
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"{isolation} consumer of {topic} did not reach the end: {values}"
            message = reader.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                values.append(bytes(message.value() or b""))
            elif error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition() or 0)
            else:
                raise AssertionError(f"{isolation} consumer of {topic}: {error}")
        return values
    finally:
        reader.close()


def consume(reader: Consumer, count: int) -> list[Message]:
    messages: list[Message] = []
    deadline = time.monotonic() + TIMEOUT
    while len(messages) < count and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            messages.append(message)
    assert len(messages) == count, f"read {len(messages)} of {count}"
    return messages


def test_a_transaction_commits_records_and_offsets_and_an_aborted_one_is_never_read(proxy: ProxyNode) -> None:
    source, sink = new_topics(proxy, "txn-source", "txn-sink")
    seeder = Producer({"bootstrap.servers": proxy.bootstrap})
    for i in range(6):
        seeder.produce(source, value=b"in-%d" % i, partition=i % PARTITIONS)
    assert seeder.flush(TIMEOUT) == 0
    group = unique("txn-group")
    upstream = consumer(proxy, group)
    upstream.subscribe([source])
    consumed = consume(upstream, 6)
    first, second = consumed[:3], consumed[3:]

    producer = Producer({"bootstrap.servers": proxy.bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for message in first:
        producer.produce(sink, value=b"committed-" + (message.value() or b""))
    sent_offsets = {(m.topic(), m.partition()): m.offset() + 1 for m in first}
    producer.send_offsets_to_transaction(
        [TopicPartition(t, p, o) for (t, p), o in sent_offsets.items()], upstream.consumer_group_metadata(), TIMEOUT
    )
    producer.commit_transaction(TIMEOUT)

    producer.begin_transaction()
    for message in second:
        producer.produce(sink, value=b"aborted-" + (message.value() or b""))
    assert producer.flush(TIMEOUT) == 0  # the records reach the log before the abort
    producer.abort_transaction(TIMEOUT)
    upstream.close()

    committed = sorted(b"committed-" + (m.value() or b"") for m in first)
    aborted = sorted(b"aborted-" + (m.value() or b"") for m in second)
    assert sorted(read_to_the_end(proxy, sink, "read_uncommitted")) == sorted(committed + aborted)
    assert sorted(read_to_the_end(proxy, sink, "read_committed")) == committed
    check = consumer(proxy, group)
    try:
        offsets = check.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
    finally:
        check.close()
    assert {(o.topic, o.partition): o.offset for o in offsets if o.offset >= 0} == sent_offsets


def described(admin: KafkaAdminClient, transactional_id: str) -> Any:
    return admin.describe_transactions([transactional_id])[transactional_id]


def test_transactions_and_producers_are_listed_and_described_through_the_proxy(proxy: ProxyNode) -> None:
    (topic,) = new_topics(proxy, "txn-described")
    transactional_id = unique("txn-described")
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    assert producer.flush(TIMEOUT) == 0
    admin = KafkaAdminClient(bootstrap_servers=proxy.bootstrap)
    try:
        ongoing = described(admin, transactional_id)
        assert ongoing.state.value == "Ongoing"
        assert ongoing.topic_partitions == {KafkaPythonPartition(topic, 1)}
        assert ongoing.coordinator_id == 0, "the coordinator is named as the proxy node"
        listed = {t.transactional_id: t for ts in admin.list_transactions().values() for t in ts}
        assert listed[transactional_id].producer_id == ongoing.producer_id
        assert listed[transactional_id].state.value == "Ongoing"
        producers = admin.describe_producers([KafkaPythonPartition(topic, 1), KafkaPythonPartition(topic, 2)])
        (active,) = producers[KafkaPythonPartition(topic, 1)].active_producers
        assert active.producer_id == ongoing.producer_id
        assert active.current_transaction_start_offset == 0
        assert producers[KafkaPythonPartition(topic, 2)].active_producers == []

        producer.abort_transaction(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while described(admin, transactional_id).state.value != "CompleteAbort":  # markers are written after
            assert time.monotonic() < deadline, described(admin, transactional_id)
            time.sleep(0.05)  # polling the coordinator's state for the condition
    finally:
        admin.close()


def test_the_brokers_own_transaction_apis_are_refused(proxy: ProxyNode) -> None:
    """A client must not write transaction markers (only a coordinator does), nor send AddPartitionsToTxn v4+
    (brokers verifying a transaction with its coordinator): the proxy closes the connection."""
    with RawKafkaClient.connect(proxy.host, proxy.port) as raw:
        versions = raw.request(API_VERSIONS, 3, api_versions_request())
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert WRITE_TXN_MARKERS not in advertised
        assert advertised[ADD_PARTITIONS_TO_TXN] == (0, 3)
        assert INIT_PRODUCER_ID in advertised
    markers = request_class(WRITE_TXN_MARKERS, 1)(markers=())
    with RawKafkaClient.connect(proxy.host, proxy.port) as raw:
        raw.send_request(WRITE_TXN_MARKERS, 1, markers)
        assert raw.is_closed(10.0), "WriteTxnMarkers must close the connection"
    verify = request_class(ADD_PARTITIONS_TO_TXN, 4)(transactions=())
    with RawKafkaClient.connect(proxy.host, proxy.port) as raw:
        raw.send_request(ADD_PARTITIONS_TO_TXN, 4, verify)
        assert raw.is_closed(10.0), "AddPartitionsToTxn v4 must close the connection"
    assert "broker-internal WriteTxnMarkers refused" in proxy.log_text()
    assert "AddPartitionsToTxn v4 is not served" in proxy.log_text()
