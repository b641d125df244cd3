"""`barnabas consume`: print a topic's records (assigned partitions, no consumer group)."""

from __future__ import annotations

import argparse
from typing import Any

from ._client import add_bootstrap, kafka_error
from .errors import CliError

IDLE_TIMEOUT_S = 5.0


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("consume", help="print records of a topic")
    add_bootstrap(parser)
    parser.add_argument("topic")
    parser.add_argument("--partition", type=int, action="append", help="partition(s) to read (default all)")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--print-key", action="store_true")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="stop after this many seconds without records (default: never)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "barnabas-cli",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        metadata = consumer.list_topics(args.topic, timeout=30)
        topic = metadata.topics.get(args.topic)
        if topic is None or topic.error is not None:
            raise CliError(f"topic {args.topic}: {topic.error.str() if topic and topic.error else 'not found'}")
        partitions = args.partition or sorted(topic.partitions)
        start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
        consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        seen = 0
        idle = 0.0
        while args.max_messages is None or seen < args.max_messages:
            message = consumer.poll(0.5)
            if message is None:
                idle += 0.5
                if args.idle_timeout is not None and idle >= args.idle_timeout:
                    break
                continue
            idle = 0.0
            error = message.error()
            if error is not None:
                raise CliError(error.str())
            value = (message.value() or b"").decode(errors="replace")
            if args.print_key:
                key = (message.key() or b"").decode(errors="replace")
                print(f"{key}\t{value}")
            else:
                print(value)
            seen += 1
    except KafkaException as exc:
        raise kafka_error(exc) from None
    finally:
        consumer.close()
    return 0
