"""One consumer-group member in its own process, for rebalance and crash tests.

    python -m tests.interop.group_member --bootstrap H:P --topic T --group G
        [--client confluent|kafka-python|aiokafka] [--strategy range|roundrobin|cooperative-sticky]
        [--instance-id ID] [--session-ms MS]

Subscribes and polls until stdin closes or SIGTERM arrives, then closes the consumer (leaving
the group) and exits 0. After every rebalance callback it prints one JSON line with the
partitions it now owns: ``{"assigned": [p, ...]}``; errors print ``{"error": "..."}``. A test
kills it with SIGKILL to simulate a crash. ``--strategy`` applies to confluent-kafka only (the
others use their default range assignor).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

from tests.support.kafka_python import with_topic_metadata

HEARTBEAT_MS = 500


class Owned:
    """The partitions this member owns, printed after every change."""

    def __init__(self) -> None:
        self.partitions: set[int] = set()

    def assigned(self, partitions: Iterable[int]) -> None:
        self.partitions.update(partitions)
        self._report()

    def revoked(self, partitions: Iterable[int]) -> None:
        self.partitions.difference_update(partitions)
        self._report()

    def _report(self) -> None:
        print(json.dumps({"assigned": sorted(self.partitions)}), flush=True)


def run_confluent(args: argparse.Namespace, stop: threading.Event, owned: Owned) -> None:
    from confluent_kafka import Consumer, KafkaError

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "partition.assignment.strategy": args.strategy,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumer.subscribe(
        [args.topic],
        on_assign=lambda _, ps: owned.assigned(p.partition for p in ps),
        on_revoke=lambda _, ps: owned.revoked(p.partition for p in ps),
        on_lost=lambda _, ps: owned.revoked(p.partition for p in ps),
    )
    while not stop.is_set():
        message = consumer.poll(0.2)
        if message is not None and message.error() is not None and message.error().code() != KafkaError._PARTITION_EOF:
            print(json.dumps({"error": str(message.error())}), flush=True)
    consumer.close()


def run_kafka_python(args: argparse.Namespace, stop: threading.Event, owned: Owned) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            owned.revoked(tp.partition for tp in revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            owned.assigned(tp.partition for tp in assigned)

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([args.topic], listener=Listener())
    with_topic_metadata(consumer)  # see tests.support.kafka_python
    while not stop.is_set():
        consumer.poll(timeout_ms=200)
    consumer.close()


def run_aiokafka(args: argparse.Namespace, stop: threading.Event, owned: Owned) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            owned.revoked(tp.partition for tp in revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            owned.assigned(tp.partition for tp in assigned)

    async def consume() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        try:
            while not stop.is_set():
                await consumer.getmany(timeout_ms=200)
        finally:
            await consumer.stop()

    asyncio.run(consume())


CLIENTS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="confluent")
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()
    # The client's own log goes to stderr, which the test shows when a member never gets its share.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    CLIENTS[args.client](args, stop, Owned())
    return 0


if __name__ == "__main__":
    sys.exit(main())
