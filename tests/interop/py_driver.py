"""Interop driver for the Python clients: confluent-kafka, kafka-python and aiokafka.

    python -m tests.interop.py_driver --client {confluent,kafka-python,aiokafka} \
        --bootstrap 127.0.0.1:9092 --topic T --mode {plain,gzip,snappy,lz4,zstd,idempotent} \
        --count 10000 --partitions 3 --out report.json [--timeout-s 100]

Same contract as the node and Java drivers (see tests/interop/common.py): create the topic with
the client's admin API, produce ``count`` keyed messages with acks=all, wait for every delivery
acknowledgement, read every partition by assign() from the beginning (no group membership), list
earliest/latest offsets, delete the topic, write the JSON report. A fatal problem prints one line
``interop-driver: <reason>`` to stderr and exits 1. Run from the repository root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from tests.interop.common import codec_of, key_for, value_for

MAX_ERRORS = 20


def _text(data: bytes | None) -> str | None:
    """A record's key or value as text; None stays None (the checker reports it)."""
    return None if data is None else data.decode("utf-8", "replace")


class DriverError(Exception):
    """A fatal failure: the run cannot go on."""


class Run:
    """Arguments plus the report being built."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.bootstrap: str = args.bootstrap
        self.topic: str = args.topic
        self.mode: str = args.mode
        self.count: int = args.count
        self.partitions: int = args.partitions
        self.codec = codec_of(args.mode)
        self.idempotent = args.mode == "idempotent"
        self.client_id = f"interop-{args.client}-{args.mode}"
        self.deadline = time.monotonic() + args.timeout_s
        self.phase = "start"
        self.errors: list[str] = []
        self.error_count = 0
        self.timings: dict[str, int] = {}
        self.report: dict[str, Any] = {
            "client": args.client,
            "mode": args.mode,
            "produced": 0,
            "records": [],
            "earliest": {},
            "latest": {},
            "errors": self.errors,
            "timings_ms": self.timings,
        }

    def remaining(self, phase: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            progress = ""
            if phase == "consume":
                first = f"; first error: {self.errors[0]}" if self.errors else ""
                progress = f" ({len(self.report['records'])} of {self.count} records{first})"
            raise DriverError(f"timed out during {phase}{progress}")
        return left

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(text)
        elif len(self.errors) == MAX_ERRORS:
            self.errors.append("(further errors not listed)")

    def timed(self, phase: str, start: float) -> None:
        self.timings[phase] = round((time.monotonic() - start) * 1000)

    def enter(self, phase: str) -> float:
        """Mark the start of a phase (named in failure messages); returns the start time."""
        self.phase = phase
        return time.monotonic()

    def check_produced(self, acked: int) -> None:
        """Every message must be acknowledged; otherwise consuming them all can only time out."""
        self.report["produced"] = acked
        if acked < self.count:
            first = self.errors[0] if self.errors else "none reported"
            raise DriverError(f"only {acked} of {self.count} messages acknowledged; first error: {first}")

    def messages(self) -> list[tuple[bytes, bytes]]:
        return [(key_for(i).encode(), value_for(i).encode()) for i in range(self.count)]


# --------------------------------------------------------------------------- confluent-kafka


def run_confluent(run: Run) -> None:
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    run.report["client_version"] = (
        f"confluent-kafka {confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}"
    )
    common = {"bootstrap.servers": run.bootstrap, "client.id": run.client_id}
    admin = AdminClient(common)

    t = run.enter("create")
    futures = admin.create_topics(
        [NewTopic(run.topic, num_partitions=run.partitions, replication_factor=1)],
        operation_timeout=30,
        request_timeout=30,
    )
    try:
        futures[run.topic].result(timeout=run.remaining("create topic"))
    except KafkaException as e:
        raise DriverError(f"create topic: {e}") from e
    run.timed("create", t)

    t = run.enter("produce")
    producer = Producer(
        {
            **common,
            "acks": "all",
            "compression.type": run.codec or "none",
            "enable.idempotence": run.idempotent,
            "linger.ms": 5,
        }
    )
    acked = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal acked
        if err is not None:
            run.error(f"delivery of {msg.key()!r}: {err}")
        else:
            acked += 1

    for key, value in run.messages():
        while True:
            try:
                producer.produce(run.topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
                run.remaining("produce (queue full)")
        producer.poll(0)
    left = producer.flush(run.remaining("produce flush"))
    if left:
        raise DriverError(f"produce: {left} messages still unacknowledged at the deadline")
    run.check_produced(acked)
    run.timed("produce", t)

    t = run.enter("consume")
    # confluent-kafka refuses a consumer without group.id (and aborts on an empty one). The group
    # is never joined: assign() only (librdkafka still sends FindCoordinator if the broker offers it).
    consumer = Consumer(
        {
            **common,
            "group.id": f"{run.client_id}-unused-group",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(run.topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(run.partitions)])
        records = run.report["records"]
        while len(records) < run.count:
            for msg in consumer.consume(num_messages=1000, timeout=min(1.0, run.remaining("consume"))):
                if msg.error():
                    run.error(f"consume: {msg.error()}")
                    continue
                records.append([msg.partition(), msg.offset(), _text(msg.key()), _text(msg.value())])
    finally:
        consumer.close()
    run.timed("consume", t)

    t = run.enter("list_offsets")
    for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):
        result = admin.list_offsets(
            {TopicPartition(run.topic, p): spec for p in range(run.partitions)}, request_timeout=30
        )
        for tp, fut in result.items():
            run.report[name][str(tp.partition)] = fut.result(timeout=run.remaining("list offsets")).offset
    run.timed("list_offsets", t)

    t = run.enter("delete")
    try:
        admin.delete_topics([run.topic], operation_timeout=30, request_timeout=30)[run.topic].result(
            timeout=run.remaining("delete topic")
        )
    except KafkaException as e:
        run.error(f"delete topic: {e}")
    run.timed("delete", t)


# --------------------------------------------------------------------------- kafka-python


# kafka-python 3.0.12 (kafka/codec.py) compresses with optional third-party modules, not cramjam.
_KAFKA_PYTHON_CODEC_PACKAGES = {
    "snappy": ("has_snappy", "python-snappy (module snappy)"),
    "lz4": ("has_lz4", "lz4 (module lz4.frame)"),
    "zstd": ("has_zstd", "zstandard (module zstandard)"),
}


def _require_kafka_python_codec(codec: str) -> None:
    if codec not in _KAFKA_PYTHON_CODEC_PACKAGES:
        return  # gzip: standard library
    import kafka.codec

    probe, package = _KAFKA_PYTHON_CODEC_PACKAGES[codec]
    if not getattr(kafka.codec, probe)():
        raise DriverError(f"kafka-python {codec} needs the PyPI package {package}, which is not installed")


def run_kafka_python(run: Run) -> None:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, OffsetSpec

    run.report["client_version"] = f"kafka-python {kafka.__version__}"
    if run.codec is not None:
        _require_kafka_python_codec(run.codec)
    common: dict[str, Any] = {"bootstrap_servers": run.bootstrap, "client_id": run.client_id}
    timeout_ms = 30_000
    admin = KafkaAdminClient(**common, request_timeout_ms=timeout_ms)
    try:
        t = run.enter("create")
        try:
            admin.create_topics(
                {run.topic: {"num_partitions": run.partitions, "replication_factor": 1}},
                timeout_ms=timeout_ms,
                wait_for_metadata=True,
            )
        except Exception as e:
            raise DriverError(f"create topic: {type(e).__name__}: {e}") from e
        run.timed("create", t)

        t = run.enter("produce")
        # kafka-python 3 defaults enable_idempotence=True: set it explicitly for every mode.
        producer = KafkaProducer(
            **common,
            acks="all",
            compression_type=run.codec,
            enable_idempotence=run.idempotent,
            linger_ms=5,
        )
        try:
            acked = 0

            def ok(_meta: Any) -> None:
                nonlocal acked
                acked += 1

            futures = []
            for key, value in run.messages():
                fut = producer.send(run.topic, key=key, value=value)
                fut.add_callback(ok)
                fut.add_errback(lambda e, k=key: run.error(f"delivery of {k!r}: {type(e).__name__}: {e}"))
                futures.append(fut)
            producer.flush(timeout=run.remaining("produce flush"))
            pending = sum(1 for f in futures if not f.is_done)
            if pending:
                raise DriverError(f"produce: {pending} messages still unacknowledged at the deadline")
            run.check_produced(acked)
        finally:
            producer.close(timeout=5)
        run.timed("produce", t)

        t = run.enter("consume")
        consumer = KafkaConsumer(
            **common,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            tps = [TopicPartition(run.topic, p) for p in range(run.partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            records = run.report["records"]
            while len(records) < run.count:
                timeout = int(min(1.0, run.remaining("consume")) * 1000)
                for tp, batch in consumer.poll(timeout_ms=timeout, max_records=2000).items():
                    records.extend([tp.partition, r.offset, _text(r.key), _text(r.value)] for r in batch)
        finally:
            consumer.close()
        run.timed("consume", t)

        t = run.enter("list_offsets")
        for name, spec in (("earliest", OffsetSpec.EARLIEST), ("latest", OffsetSpec.LATEST)):
            run.remaining("list offsets")
            result = admin.list_partition_offsets(
                {TopicPartition(run.topic, p): spec for p in range(run.partitions)}, timeout_ms=timeout_ms
            )
            for tp, off in result.items():
                run.report[name][str(tp.partition)] = off.offset
        run.timed("list_offsets", t)

        t = run.enter("delete")
        try:
            admin.delete_topics([run.topic], timeout_ms=timeout_ms)
        except Exception as e:
            run.error(f"delete topic: {type(e).__name__}: {e}")
        run.timed("delete", t)
    finally:
        admin.close()


# --------------------------------------------------------------------------- aiokafka


async def _aiokafka(run: Run) -> None:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    run.report["client_version"] = f"aiokafka {aiokafka.__version__}"
    common: dict[str, Any] = {"bootstrap_servers": run.bootstrap, "client_id": run.client_id}
    admin = AIOKafkaAdminClient(**common, request_timeout_ms=30_000)
    try:
        await admin.start()
        t = run.enter("create")
        try:
            resp = await admin.create_topics(
                [NewTopic(run.topic, num_partitions=run.partitions, replication_factor=1)],
                timeout_ms=30_000,
            )
        except Exception as e:
            raise DriverError(f"create topic: {type(e).__name__}: {e}") from e
        # aiokafka returns the raw CreateTopicsResponse and raises on nothing: check it here.
        for topic_result in resp.topic_errors:
            if topic_result[1] != 0:
                raise DriverError(f"create topic: CreateTopics error {topic_result}")
        run.timed("create", t)

        t = run.enter("produce")
        producer = AIOKafkaProducer(
            **common,
            acks="all",
            compression_type=run.codec,
            enable_idempotence=run.idempotent,
            linger_ms=5,
        )
        try:
            await producer.start()
            futures = [await producer.send(run.topic, key=key, value=value) for key, value in run.messages()]
            results = await asyncio.gather(*futures, return_exceptions=True)
            acked = 0
            for n, res in enumerate(results):
                if isinstance(res, BaseException):
                    run.error(f"delivery of key-{n}: {type(res).__name__}: {res}")
                else:
                    acked += 1
            run.check_produced(acked)
        finally:
            await producer.stop()
        run.timed("produce", t)

        t = run.enter("consume")
        consumer = AIOKafkaConsumer(
            **common,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            await consumer.start()
            tps = [TopicPartition(run.topic, p) for p in range(run.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            records = run.report["records"]
            while len(records) < run.count:
                timeout = int(min(1.0, run.remaining("consume")) * 1000)
                batches = await consumer.getmany(timeout_ms=timeout, max_records=2000)
                for tp, batch in batches.items():
                    records.extend([tp.partition, r.offset, _text(r.key), _text(r.value)] for r in batch)
            run.timed("consume", t)

            # aiokafka's admin has no ListOffsets call; the consumer's offset lookups are its API.
            t = run.enter("list_offsets")
            for name, lookup in (("earliest", consumer.beginning_offsets), ("latest", consumer.end_offsets)):
                result = await lookup(tps)
                for tp, off in result.items():
                    run.report[name][str(tp.partition)] = off
            run.timed("list_offsets", t)
        finally:
            await consumer.stop()

        t = run.enter("delete")
        try:
            resp = await admin.delete_topics([run.topic], timeout_ms=30_000)
            for topic_result in resp.topic_error_codes:
                if topic_result[1] != 0:
                    run.error(f"delete topic: DeleteTopics error {topic_result}")
        except Exception as e:
            run.error(f"delete topic: {type(e).__name__}: {e}")
        run.timed("delete", t)
    finally:
        await admin.close()


def run_aiokafka(run: Run) -> None:
    async def bounded() -> None:
        try:
            await asyncio.wait_for(_aiokafka(run), timeout=run.remaining("aiokafka run"))
        except TimeoutError as e:
            raise DriverError("timed out (aiokafka run)") from e

    asyncio.run(bounded())


DRIVERS: dict[str, Callable[[Run], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--client", required=True, choices=sorted(DRIVERS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout-s", type=float, default=100.0)
    args = parser.parse_args(argv)
    run = Run(args)
    start = time.monotonic()
    try:
        DRIVERS[args.client](run)
    except DriverError as e:
        print(f"interop-driver: during {run.phase}: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        traceback.print_exc()
        detail = f"{type(e).__name__}: {e}" if str(e) else f"{type(e).__name__} (no message)"
        print(f"interop-driver: during {run.phase}: {detail}".replace("\n", " "), file=sys.stderr)
        return 1
    run.timed("total", start)
    if run.error_count > len(run.errors):
        run.errors.append(f"{run.error_count} errors in all")
    with open(args.out, "w") as f:
        json.dump(run.report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
