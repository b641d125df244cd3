"""Crashes and damaged files: the broker recovers what it acknowledged and refuses what it must.

Kafka is the reference: an acknowledged message survives a process crash (kill -9 keeps the
page cache), an idempotent producer's retries after a restart are deduplicated from the
recovered producer state, a torn or corrupt log tail is cut back to the last valid batch
(LogSegment.recover), a missing or corrupt index is rebuilt from its segment, and a log dir
is owned by one process (its .lock).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

from barnabas.protocol import iter_batch_headers
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_until
from tests.support.raw_client import RawKafkaClient

pytestmark = pytest.mark.timeout(180)

TIMEOUT = 30.0
SEGMENT_0 = f"{0:020d}"


# --- helpers -----------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: BrokerProcess, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([topic], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[name].result(TIMEOUT)


def latest_offsets(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}, request_timeout=TIMEOUT
    )
    return {tp.partition: future.result(TIMEOUT).offset for tp, future in futures.items()}


def offset_for_time(broker: BrokerProcess, topic: str, partition: int, timestamp_ms: int) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, partition): OffsetSpec.for_timestamp(timestamp_ms)}, request_timeout=TIMEOUT
    )
    (future,) = futures.values()
    return int(future.result(TIMEOUT).offset)


def consume(
    broker: BrokerProcess, topic: str, start: dict[int, int], end: dict[int, int]
) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Read [start, end) of each partition by assign(): (offset, key, value) in log order."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("unused-group"),  # required by confluent-kafka; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
        }
    )
    got: dict[int, list[tuple[int, bytes, bytes]]] = {p: [] for p in end}
    position = dict(start)
    try:
        consumer.assign([TopicPartition(topic, p, start[p]) for p in end if start[p] < end[p]])
        deadline = time.monotonic() + TIMEOUT
        while any(position[p] < end[p] for p in end):
            assert time.monotonic() < deadline, f"consumed up to {position}, expected {end}"
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                assert msg.error() is None, msg.error()
                p, offset = msg.partition(), msg.offset()
                if offset >= end[p]:
                    continue  # past the range asked for
                assert offset == position[p], f"partition {p}: offset {offset}, expected {position[p]}"
                got[p].append((offset, msg.key(), msg.value()))
                position[p] = offset + 1
    finally:
        consumer.close()
    return got


def produce_rounds(
    broker: BrokerProcess, topic: str, partitions: int, *, rounds: int, per_round: int, timestamp: Callable[[int], int]
) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Produce ``rounds`` x ``per_round`` messages per partition, flushing after each round so every
    round is at least one batch; return the acknowledged (offset, key, value) per partition."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[int, list[tuple[int, bytes, bytes]]] = {p: [] for p in range(partitions)}
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            acked[msg.partition()].append((msg.offset(), msg.key(), msg.value()))

    n = 0
    for _ in range(rounds):
        for p in range(partitions):
            for _ in range(per_round):
                key, value = f"k{n:06d}".encode(), f"value-{n}-".encode().ljust(60, b".")
                producer.produce(topic, value, key, partition=p, timestamp=timestamp(n), on_delivery=on_delivery)
                n += 1
        assert producer.flush(TIMEOUT) == 0
    assert not failures, failures
    return {p: sorted(records) for p, records in acked.items()}


def segment_files(partition_dir: Path, suffix: str) -> list[Path]:
    return sorted(partition_dir.glob(f"*{suffix}"))


def batch_positions(segment: Path) -> list[tuple[int, Any]]:
    return list(iter_batch_headers(segment.read_bytes()))


# --- kill -9 during an idempotent produce loop -------------------------------------------------


class ResponseDroppingProxy:
    """A TCP proxy in front of the broker that can drop every response while requests still pass.

    The broker advertises the proxy, so clients use it for everything. It forwards whole frames
    and remembers each request's API key by correlation id, so it knows when it has dropped a
    Produce response: a batch the broker wrote that the producer never saw acknowledged, which it
    must retry after a restart and the broker must recognise as a duplicate.
    """

    def __init__(self, target_port: Callable[[], int]) -> None:
        self._target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.drop_responses = threading.Event()
        self.dropped_produce_responses = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target_port()), timeout=5)
            except OSError:
                client.close()  # the broker is down: the client reconnects later
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            api_keys: dict[int, int] = {}  # correlation id -> api key, for this connection
            threading.Thread(target=self._pump, args=(client, upstream, api_keys, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, api_keys, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, api_keys: dict[int, int], responses: bool) -> None:
        buffer = bytearray()
        try:
            while data := source.recv(1 << 16):
                buffer += data
                while len(buffer) >= 4 and len(buffer) >= 4 + (size := int.from_bytes(buffer[:4], "big")):
                    frame = bytes(buffer[: 4 + size])
                    del buffer[: 4 + size]
                    if not responses:
                        api_keys[int.from_bytes(frame[8:12], "big")] = int.from_bytes(frame[4:6], "big")
                    elif self.drop_responses.is_set():
                        if api_keys.pop(int.from_bytes(frame[4:8], "big"), None) == 0:
                            self.dropped_produce_responses += 1
                        continue
                    sink.sendall(frame)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


def log_end_offsets(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, int]:
    """ListOffsets latest straight to the broker (not through the proxy)."""
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                    for p in range(partitions)
                ),
            ),
        ),
    )
    with RawKafkaClient.connect("127.0.0.1", broker.port) as client:
        (topic_response,) = client.request(2, 7, request).topics
    return {int(p.partition_index): int(p.offset) for p in topic_response.partitions}


class KeyedProducer(threading.Thread):
    """Produces keys k00000000, k00000001, ... as fast as it can with an idempotent producer."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="idempotent-producer", daemon=True)
        self.topic = topic
        self.stop = threading.Event()
        self.acked: list[tuple[int, int, int]] = []  # (partition, offset, key number)
        self.failures: list[str] = []
        self.produced = 0
        self.unflushed = -1
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 200,
            }
        )

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failures.append(f"{msg.key()!r}: {err}")
        else:
            self.acked.append((msg.partition(), msg.offset(), int(msg.key()[1:])))

    def run(self) -> None:
        while not self.stop.is_set():
            key = f"k{self.produced:08d}".encode()
            try:
                self.producer.produce(self.topic, key + b"-value", key, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.produced += 1
            self.producer.poll(0)
        self.unflushed = self.producer.flush(TIMEOUT * 2)


def test_kill_9_during_idempotent_produce_loses_and_duplicates_nothing(
    broker_factory: Callable[..., BrokerProcess], request: pytest.FixtureRequest
) -> None:
    proxy = ResponseDroppingProxy(lambda: broker.port)
    request.addfinalizer(proxy.close)
    broker = broker_factory(extra_args=["--advertise", f"127.0.0.1:{proxy.port}"]).start()
    topic, partitions = unique("crash"), 3

    def written() -> int:
        return sum(log_end_offsets(broker, topic, partitions).values())

    producer: KeyedProducer | None = None
    try:
        create_topic(broker, topic, partitions)
        producer = KeyedProducer(f"127.0.0.1:{proxy.port}", topic)
        producer.start()
        wait_until(lambda: len(producer.acked) >= 3000, "3000 acknowledgements")
        for kill in range(3):
            assert producer.is_alive()
            if kill % 2 == 0:
                # Lose the responses in flight: whatever the broker writes from now on is in the log
                # but unacknowledged, so the producer must retry it after the restart with the same
                # sequence numbers, and the recovered broker must answer with the original offsets.
                proxy.dropped_produce_responses = 0
                proxy.drop_responses.set()
                wait_until(lambda: proxy.dropped_produce_responses > 0, "a lost Produce response", 10)
            broker.kill()
            proxy.drop_responses.clear()
            acked_at_kill = len(producer.acked)
            broker.output.clear()
            broker.start()
            log = broker.log_text()
            assert re.search(r"WARNING .*no clean shutdown marker in .*: recovering its logs", log), log
            for p in range(partitions):
                assert re.search(rf"opened log \S*/{re.escape(topic)}-{p}: .*recovered \[0\]", log), log
            # The producer reconnects, its retries succeed and it keeps producing.
            after_restart = written()
            wait_until(lambda a=after_restart: written() >= a + 2000, f"produce progress after restart {kill + 1}")
            wait_until(lambda a=acked_at_kill: len(producer.acked) > a, f"acknowledgements after restart {kill + 1}")
    finally:
        if producer is not None:
            producer.stop.set()
            producer.join(TIMEOUT * 3)
    assert not producer.is_alive()
    assert producer.unflushed == 0, f"{producer.unflushed} messages never acknowledged"
    assert not producer.failures, producer.failures[:10]
    assert len(producer.acked) == producer.produced

    end = latest_offsets(broker, topic, partitions)
    consumed = consume(broker, topic, dict.fromkeys(range(partitions), 0), end)
    by_position = {(p, offset): key for p, records in consumed.items() for offset, key, _ in records}
    missing = [(p, o, k) for p, o, k in producer.acked if by_position.get((p, o)) != f"k{k:08d}".encode()]
    assert not missing, f"{len(missing)} acknowledged messages not at their offsets, e.g. {missing[:5]}"
    keys: list[bytes] = []
    for p, records in consumed.items():
        offsets = [offset for offset, _, _ in records]
        assert offsets == list(range(end[p])), f"partition {p} has gaps"
        partition_keys = [key for _, key, _ in records]
        assert partition_keys == sorted(set(partition_keys)), f"partition {p}: keys out of order or duplicated"
        keys += partition_keys
    assert len(keys) == len(set(keys)) == producer.produced, "every message exactly once (idempotence)"
    assert sum(end.values()) == producer.produced


# --- hand-corrupted segment tails --------------------------------------------------------------


@pytest.mark.parametrize("shutdown", ["kill", "stop"])
def test_corrupt_segment_tail_is_truncated_to_the_last_valid_batch(
    broker_factory: Callable[..., BrokerProcess], shutdown: str
) -> None:
    broker = broker_factory().start()
    topic, partitions = unique("torn"), 3
    create_topic(broker, topic, partitions)
    t0 = int(time.time() * 1000)
    acked = produce_rounds(broker, topic, partitions, rounds=6, per_round=10, timestamp=lambda n: t0 + n)
    assert latest_offsets(broker, topic, partitions) == dict.fromkeys(range(partitions), 60)
    if shutdown == "kill":
        broker.kill()
    else:
        assert broker.stop() == 0

    dirs = {p: broker.data_dir / f"{topic}-{p}" for p in range(partitions)}
    segments = {p: dirs[p] / f"{SEGMENT_0}.log" for p in range(partitions)}
    batches = {p: batch_positions(segments[p]) for p in range(partitions)}
    sizes = {p: segments[p].stat().st_size for p in range(partitions)}
    for p in range(partitions):
        assert len(batches[p]) >= 6, "each flushed round must be its own batch"
        last_position, last = batches[p][-1]
        assert last_position + last.size == sizes[p]

    # Partition 0: garbage after the last batch (a torn append of something that is not a batch).
    garbage = b"\x00\x00\x00\x00\x00\x00\x00\x3c\x00\x00\x01\x00" + os.urandom(200)
    with segments[0].open("ab") as f:
        f.write(garbage)
    # Partition 1: one flipped bit inside the last batch's records (its CRC no longer matches).
    last_position_1, last_1 = batches[1][-1]
    with segments[1].open("r+b") as f:
        f.seek(last_position_1 + last_1.size - 5)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x10]))
    # Partition 2: the file ends in the middle of the last batch (a torn write).
    last_position_2, last_2 = batches[2][-1]
    cut_2 = last_position_2 + last_2.size // 2
    os.truncate(segments[2], cut_2)

    broker.output.clear()
    broker.start()
    expected_end = {0: 60, 1: last_1.base_offset, 2: last_2.base_offset}
    assert expected_end[1] < 60 and expected_end[2] < 60
    assert latest_offsets(broker, topic, partitions) == expected_end

    assert segments[0].stat().st_size == sizes[0]
    assert segments[1].stat().st_size == last_position_1
    assert segments[2].stat().st_size == last_position_2
    log = broker.log_text()
    for p, removed in ((0, len(garbage)), (1, last_1.size), (2, cut_2 - last_position_2)):
        pattern = rf"segment {re.escape(str(segments[p]))}: truncated {removed} invalid bytes during recovery"
        assert re.search(pattern, log), f"no truncation line for partition {p}:\n{log}"

    # Everything before the cut is readable by a real client, byte for byte.
    consumed = consume(broker, topic, dict.fromkeys(range(partitions), 0), expected_end)
    for p in range(partitions):
        assert consumed[p] == acked[p][: expected_end[p]]

    # New messages continue at the new log end offsets, and are readable too.
    new = produce_rounds(broker, topic, partitions, rounds=1, per_round=5, timestamp=lambda n: t0 + 1000 + n)
    for p in range(partitions):
        assert [offset for offset, _, _ in new[p]] == list(range(expected_end[p], expected_end[p] + 5))
    final = {p: expected_end[p] + 5 for p in range(partitions)}
    assert latest_offsets(broker, topic, partitions) == final
    consumed = consume(broker, topic, expected_end, final)
    assert consumed == new


# --- the log dir lock --------------------------------------------------------------------------


def test_second_broker_on_the_same_data_dir_is_refused(broker_factory: Callable[..., BrokerProcess]) -> None:
    first = broker_factory().start()
    topic = unique("locked")
    create_topic(first, topic, 1)
    second = broker_factory(data_dir=first.data_dir, broker_id=first.broker_id)
    try:
        second.start()
    except RuntimeError:
        pass
    else:
        # start() can return when the output ends just before the process is reaped; a broker
        # that really started would have reported a port.
        assert second.proc is not None
        assert second.port == 0, "a second broker started on a data dir that is in use"
        second.proc.wait(TIMEOUT)
    assert second.proc is not None and second.proc.wait(TIMEOUT) != 0
    output = second.log_text()
    assert "Traceback" not in output, output
    assert "listening on" not in output
    lock_lines = [line for line in second.output if "lock" in line]
    assert len(lock_lines) == 1, output
    (line,) = lock_lines
    assert re.fullmatch(
        rf"barnabas broker: log dir {re.escape(str(first.data_dir.absolute()))} is in use by another process "
        rf"\(lock file {re.escape(str(first.data_dir.absolute() / '.lock'))}\)",
        line,
    ), line

    # The first broker never noticed: it still serves produce and fetch.
    assert first.proc is not None and first.proc.poll() is None
    acked = produce_rounds(first, topic, 1, rounds=1, per_round=3, timestamp=lambda n: int(time.time() * 1000))
    assert [offset for offset, _, _ in acked[0]] == [0, 1, 2]
    assert consume(first, topic, {0: 0}, {0: 3}) == acked


# --- missing and corrupt indexes ---------------------------------------------------------------


def test_missing_or_corrupt_indexes_are_rebuilt(broker_factory: Callable[..., BrokerProcess]) -> None:
    # Many small segments without writing megabytes: segment.bytes may not go below 1 MiB (Kafka 4),
    # so roll on record time instead (one segment per minute of timestamps), and index densely.
    # Broker-wide settings, not topic overrides: see test_topic_config_overrides_survive_a_restart.
    broker = broker_factory(extra_args=["--set", "log.roll.ms=60000", "--set", "log.index.interval.bytes=256"]).start()
    topic, partitions = unique("indexes"), 2
    create_topic(broker, topic, partitions)
    t0 = int(time.time() * 1000) - 3_600_000
    per_round, rounds = 5, 40
    acked = produce_rounds(
        broker, topic, partitions, rounds=rounds, per_round=per_round, timestamp=lambda n: t0 + 1000 * n
    )
    total = rounds * per_round
    assert broker.stop() == 0  # clean: only the active segment is recovered, the others are index-checked

    dirs = {p: broker.data_dir / f"{topic}-{p}" for p in range(partitions)}
    logs = {p: segment_files(dirs[p], ".log") for p in range(partitions)}
    assert all(len(logs[p]) >= 4 for p in range(partitions)), logs
    # Partition 0: the offset index of a middle segment is gone.
    middle = len(logs[0]) // 2
    victim_0, next_0 = logs[0][middle], logs[0][middle + 1]
    index_0 = victim_0.with_suffix(".index")
    original_index = index_0.read_bytes()
    assert original_index, "the segment must have index entries for this test to mean anything"
    index_0.unlink()
    # Partition 1: the time index of a middle segment is not a whole number of entries.
    middle = len(logs[1]) // 2
    victim_1, next_1 = logs[1][middle], logs[1][middle + 1]
    timeindex_1 = victim_1.with_suffix(".timeindex")
    original_timeindex = timeindex_1.read_bytes()
    assert original_timeindex and len(original_timeindex) % 12 == 0
    timeindex_1.write_bytes(original_timeindex + b"\xde\xad\xbe\xef\x01")

    broker.output.clear()
    broker.start()
    log = broker.log_text()
    for p, victim in ((0, victim_0), (1, victim_1)):
        base = int(victim.stem)
        assert re.search(rf"WARNING .*rebuilding the indexes of segment {base} in \S*/{re.escape(topic)}-{p}", log), log
    assert index_0.read_bytes() == original_index, "the rebuilt offset index differs from the original"
    assert timeindex_1.read_bytes() == original_timeindex, "the rebuilt time index differs from the original"

    end = dict.fromkeys(range(partitions), total)
    assert latest_offsets(broker, topic, partitions) == end
    assert consume(broker, topic, dict.fromkeys(range(partitions), 0), end) == acked
    # Random access through the rebuilt indexes, by offset and by timestamp, inside the victims.
    for p, victim, following in ((0, victim_0, next_0), (1, victim_1, next_1)):
        base, next_base = int(victim.stem), int(following.stem)
        assert next_base - base >= 10
        for inside in (base, base + 6, next_base - 1):
            assert consume(broker, topic, {p: inside}, {p: inside + 1})[p] == acked[p][inside : inside + 1]
            offset, key, _ = acked[p][inside]
            n = int(key[1:])
            assert offset == inside
            assert offset_for_time(broker, topic, p, t0 + 1000 * n) == inside
            assert offset_for_time(broker, topic, p, t0 + 1000 * n - 999) == inside


# --- topic overrides across a restart ----------------------------------------------------------


def _check_overrides(broker: BrokerProcess, topic: str, offset: int) -> None:
    """max.message.bytes=2000 refuses a big batch; LogAppendTime stamps the small one at ``offset``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    outcomes: list[tuple[Any, int]] = []
    producer.produce(
        topic, b"s" * 100, b"small", partition=0, on_delivery=lambda e, m: outcomes.append((e, m.offset()))
    )
    assert producer.flush(TIMEOUT) == 0
    producer.produce(topic, b"b" * 3000, b"big", partition=0, on_delivery=lambda e, m: outcomes.append((e, m.offset())))
    assert producer.flush(TIMEOUT) == 0
    (small_error, small_offset), (big_error, _) = outcomes
    assert small_error is None and small_offset == offset
    assert big_error is not None and big_error.code() == KafkaError.MSG_SIZE_TOO_LARGE, big_error
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("unused"), "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        msg = consumer.poll(TIMEOUT)
        assert msg is not None and msg.error() is None and msg.offset() == offset
        assert msg.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    finally:
        consumer.close()


def test_topic_config_overrides_survive_a_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory().start()
    topic = unique("overrides")
    create_topic(broker, topic, 1, **{"max.message.bytes": "2000", "message.timestamp.type": "LogAppendTime"})
    _check_overrides(broker, topic, 0)
    assert broker.stop() == 0
    broker.start()
    _check_overrides(broker, topic, 1)
