"""`barnabas produce`: send lines from stdin, or generated records, to a topic."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from rich.progress import Progress

from ._client import add_bootstrap, kafka_error
from .errors import CliError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "produce",
        help="produce records from stdin or generated ones",
        description="Each stdin line is a record value (or KEY<sep>VALUE with --key-separator). "
        "With --count, generate records instead, with a progress bar.",
    )
    add_bootstrap(parser)
    parser.add_argument("topic")
    parser.add_argument("--key-separator", help="split each line into key and value at this string")
    parser.add_argument("--count", type=int, help="generate this many records instead of reading stdin")
    parser.add_argument("--size", type=int, default=100, help="generated value size in bytes (default 100)")
    parser.add_argument("--acks", default="all", choices=["0", "1", "all"])
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--idempotent", action="store_true", help="enable.idempotence=true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    failures: list[str] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error.str())

    producer = Producer({
        "bootstrap.servers": args.bootstrap, "acks": args.acks, "compression.type": args.compression,
        "enable.idempotence": args.idempotent, "linger.ms": 5,
    })  # fmt: skip
    try:
        if args.count is not None:
            value = os.urandom(args.size // 2 + 1).hex()[: args.size].encode()
            with Progress() as progress:
                task = progress.add_task(f"producing to {args.topic}", total=args.count)
                for i in range(args.count):
                    _send(producer, args.topic, str(i).encode(), value, on_delivery)
                    if i % 1000 == 999:
                        progress.update(task, completed=i + 1)
                producer.flush()
                progress.update(task, completed=args.count)
        else:
            for line in sys.stdin:
                text = line.rstrip("\n")
                key = None
                if args.key_separator and args.key_separator in text:
                    key_text, text = text.split(args.key_separator, 1)
                    key = key_text.encode()
                _send(producer, args.topic, key, text.encode(), on_delivery)
            producer.flush()
    except KafkaException as exc:
        raise kafka_error(exc) from None
    if failures:
        raise CliError(f"{len(failures)} records failed: {failures[0]}")
    return 0


def _send(producer: Any, topic: str, key: bytes | None, value: bytes, on_delivery: Any) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)
