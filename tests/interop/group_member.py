"""One consumer-group member in its own process (confluent-kafka), for rebalance and crash tests.

    python -m tests.interop.group_member --bootstrap H:P --topic T --group G
        [--strategy range|roundrobin|cooperative-sticky] [--instance-id ID] [--session-ms MS]

Subscribes and polls until stdin closes or SIGTERM arrives, then closes the consumer (leaving
the group) and exits 0. After every rebalance callback it prints one JSON line with the
partitions it now owns: ``{"assigned": [p, ...]}``; errors print
``{"error": "..."}``. A test kills it with SIGKILL to simulate a crash.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "partition.assignment.strategy": args.strategy,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": 500,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    owned: set[int] = set()

    def report() -> None:
        print(json.dumps({"assigned": sorted(owned)}), flush=True)

    def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
        owned.update(p.partition for p in partitions)
        report()

    def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
        owned.difference_update(p.partition for p in partitions)
        report()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while not stop.is_set():
        message = consumer.poll(0.2)
        if message is not None and message.error() is not None and message.error().code() != KafkaError._PARTITION_EOF:
            print(json.dumps({"error": str(message.error())}), flush=True)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
