"""Log compaction against a real broker process, through librdkafka (confluent-kafka).

The cleaner's progress is read from the broker's ``cleaner-offset-checkpoint`` (Kafka's file,
in the log dir), and the active segment from the partition dir, so every wait is for a state the
broker wrote, polled with a deadline.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from barnabas.log import CLEANER_OFFSET_CHECKPOINT
from barnabas.log.checkpoint import OffsetCheckpointFile
from barnabas.log.files import TopicPartition as LogPartition
from barnabas.protocol import ErrorCode, NewRecord, build_record_batch
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.polling import wait_until
from tests.support.requests import connect, list_offsets
from tests.support.requests import produce as produce_raw

pytestmark = pytest.mark.timeout(180)

TIMEOUT = 60
SEGMENT_BYTES = 1 << 20  # Kafka's smallest segment.bytes
VALUE_BYTES = 1000

Produced = tuple[int, bytes | None, bytes | None]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    # A maintenance tick every 100 ms and no cleaner backoff, so passes follow the data closely.
    settings = ["log.retention.check.interval.ms=100", "log.initial.task.delay.ms=0", "log.cleaner.backoff.ms=100"]
    return broker_factory(extra_args=[arg for s in settings for arg in ("--set", s)]).start()


def create_compacted(broker: BrokerProcess, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    settings = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(name, 1, 1, config={**settings, **config})])[name].result(TIMEOUT)


def produce(broker: BrokerProcess, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list[Produced]:
    """Produce (key, value) records to partition 0 with LZ4; return (offset, key, value) of each."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4", "enable.idempotence": True}
    )
    delivered: list[Produced] = []
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append((message.offset(), message.key(), message.value()))  # type: ignore[attr-defined]

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert not errors, errors
    return sorted(delivered, key=lambda r: r[0])


def consume_all(broker: BrokerProcess, topic: str) -> list[Produced]:
    """Every record from the beginning up to the high watermark, as a consumer sees them."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("compaction"), "enable.auto.commit": False}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[Produced] = []
        deadline = time.monotonic() + TIMEOUT
        while (not seen or seen[-1][0] < high - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.offset(), message.key(), message.value()))
        assert seen and seen[-1][0] == high - 1, "did not read up to the high watermark"
        return seen
    finally:
        consumer.close()


def cleaner_checkpoint(broker: BrokerProcess, topic: str) -> int | None:
    return OffsetCheckpointFile(broker.data_dir / CLEANER_OFFSET_CHECKPOINT).read().get(LogPartition(topic, 0))


def active_segment_base(broker: BrokerProcess, topic: str) -> int:
    directory: Path = broker.data_dir / f"{topic}-0"
    return max(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def latest_per_key(records: list[Produced], end_offset: int) -> list[Produced]:
    """What one clean up to ``end_offset`` must leave: below it, only each key's last record."""
    last = {key: offset for offset, key, _ in records if offset < end_offset}
    return [r for r in records if r[0] >= end_offset or last[r[1]] == r[0]]


def test_only_the_latest_value_per_key_remains_in_cleaned_segments(broker: BrokerProcess) -> None:
    topic = unique("compacted")
    create_compacted(broker, topic)
    records = [(f"key-{i % 5}".encode(), os.urandom(VALUE_BYTES)) for i in range(3500)]  # ~3.5 MB, 4 segments
    produced = produce(broker, topic, records)
    end = active_segment_base(broker, topic)
    assert end > 0, "the data did not roll a segment"

    wait_until(lambda: cleaner_checkpoint(broker, topic) == end, "the cleaner to reach the active segment")

    consumed = consume_all(broker, topic)
    assert consumed == latest_per_key(produced, end)
    below = [key for offset, key, _ in consumed if offset < end]
    assert sorted(below) == sorted(set(below)), "a key appears twice in the cleaned segments"
    assert len(below) == 5


def test_a_record_without_a_key_is_refused_with_invalid_record(broker: BrokerProcess) -> None:
    topic = unique("keyless")
    create_compacted(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "retries": 0})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda error, _message: outcome.append(error))
    assert producer.flush(TIMEOUT) == 0
    (error,) = outcome
    assert error is not None and error.code() == KafkaError.INVALID_RECORD

    # librdkafka shows only the code; the response carries Kafka's own text and RecordErrors.
    records = build_record_batch([(b"key", b"a"), (None, b"b")], base_timestamp_ms=int(time.time() * 1000))
    with connect(broker) as client:
        response = produce_raw(client, topic, 0, records)
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert response.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, e.batch_index_error_message) for e in response.record_errors] == [(1, message)]
    assert response.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}')]"
    )
    assert produce(broker, topic, [(b"k", b"v")])[0][0] == 0  # nothing was appended


def test_a_tombstone_outlives_its_first_clean_then_disappears(broker: BrokerProcess) -> None:
    topic = unique("tombstones")
    create_compacted(broker, topic, **{"delete.retention.ms": "8000"})
    filler = [(f"filler-{i % 7}".encode(), os.urandom(VALUE_BYTES)) for i in range(1200)]  # rolls a segment
    produced = produce(broker, topic, [(b"doomed", b"alive"), (b"doomed", None), *filler])
    tombstone = produced[1][0]
    wait_until(lambda: (cleaner_checkpoint(broker, topic) or 0) > tombstone, "a clean past the tombstone")

    doomed = [(offset, value) for offset, key, value in consume_all(broker, topic) if key == b"doomed"]
    assert doomed == [(tombstone, None)]  # the old value went at once; the tombstone stays for now

    def tombstone_gone() -> bool:
        # New data rolls new segments, so the cleaner keeps passing over the tombstone's segment.
        produce(broker, topic, [(f"more-{i % 7}".encode(), os.urandom(VALUE_BYTES)) for i in range(1100)])
        return all(key != b"doomed" for _, key, _ in consume_all(broker, topic))

    wait_until(tombstone_gone, "the tombstone to be removed after delete.retention.ms")


def test_list_offsets_by_time_looks_past_a_batch_the_cleaner_emptied(broker: BrokerProcess) -> None:
    topic = unique("times")
    create_compacted(broker, topic)
    now = int(time.time() * 1000)
    # An idempotent producer's last batch, superseded: the cleaner keeps it, empty, with its maxTimestamp.
    kept_empty = build_record_batch(
        [NewRecord(b"k", b"old", (), now + 500)],
        base_timestamp_ms=now,
        producer_id=4242,
        producer_epoch=0,
        base_sequence=0,
    )
    newer = build_record_batch([NewRecord(b"k", b"new", (), now + 600)], base_timestamp_ms=now + 600)
    with connect(broker) as client:
        assert produce_raw(client, topic, 0, kept_empty).error_code == ErrorCode.none
        assert produce_raw(client, topic, 0, newer).error_code == ErrorCode.none
    produce(broker, topic, [(f"filler-{i % 3}".encode(), os.urandom(VALUE_BYTES)) for i in range(1200)])
    wait_until(lambda: (cleaner_checkpoint(broker, topic) or 0) > 1, "a clean past the first batches")
    assert [(o, v) for o, k, v in consume_all(broker, topic) if k == b"k"] == [(1, b"new")]

    with connect(broker) as client:
        found = list_offsets(client, topic, 0, timestamp=now + 400)
    assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.none, 1, now + 600)


def current_leader(cluster: BrokerCluster, topic: str) -> BrokerProcess:
    """The leader of partition 0, once a broker's metadata names one (brokers learn of a topic in turn)."""
    found: list[int] = []

    def named(md: Any) -> bool:
        partitions = md.topics[topic].partitions if topic in md.topics else {}
        if 0 in partitions and partitions[0].leader >= 0:
            found.append(partitions[0].leader)
            return True
        return False

    cluster.wait_for(named, f"a leader for {topic}")
    return cluster.brokers[found[-1]]


def test_a_wiped_follower_replicates_the_compacted_log_across_its_gaps(tmp_path: Path) -> None:
    fast = {"log.retention.check.interval.ms": "100", "log.initial.task.delay.ms": "0", "log.cleaner.backoff.ms": "100"}
    cluster = BrokerCluster(tmp_path, 2, properties=fast).start()
    try:
        topic = unique("replicated")
        cluster.create_topic(
            topic,
            1,
            2,
            **{"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"},
        )
        leader = current_leader(cluster, topic)
        produced = produce(leader, topic, [(f"key-{i % 5}".encode(), os.urandom(VALUE_BYTES)) for i in range(3500)])
        end = active_segment_base(leader, topic)
        wait_until(lambda: cleaner_checkpoint(leader, topic) == end, "the leader to clean up to its active segment")

        # The follower starts over from nothing and fetches the compacted log, gaps and all. Its
        # own cleaner stays off, so what it holds is exactly what it replicated.
        follower = next(b for b in cluster.brokers if b is not leader)
        follower.kill()
        shutil.rmtree(follower.data_dir)
        follower.extra_args.append("--replace")  # its claimed log dir is gone for good
        follower.properties["log.cleaner.enable"] = "false"
        follower.start()
        cluster.wait_for(lambda md: cluster.fully_replicated(md, topic), "the wiped follower back in the ISR")
        assert leader.stop() == 0
        cluster.wait_for(lambda md: md.topics[topic].partitions[0].leader == follower.broker_id, "the follower leads")

        assert consume_all(follower, topic) == latest_per_key(produced, end)
    finally:
        cluster.stop()
