"""`barnabas produce`: send lines from stdin, or generated records, to a topic, then say what was sent.

Lines are read as bytes, so any input, binary included, is sent as it is (without its newline).
Internal topics are refused by the broker, as Kafka's are. The summary line (records, MB, MB/s,
errors) comes at the end, or one line naming the first error; the exit code is 1 if any record
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.progress import Progress

from ._client import add_connection, client_config, connect_admin, kafka_error, make_client, non_negative_int
from .errors import CliError
from .input_format import ParsedRecord, parse_template, read_records
from .topics import existing_topic

#: librdkafka's code for a record the broker refused (INVALID_RECORD).
INVALID_RECORD = 87


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "produce",
        help="produce records from stdin or generated ones",
        description="Each stdin line is a record value (or KEY<sep>VALUE with --key-separator, or whatever "
        "--format's template says). With --count, generate records instead, with a progress bar.",
    )
    add_connection(parser)
    parser.add_argument("topic")
    parser.add_argument("--key-separator", help="split each line into key and value at this string")
    parser.add_argument(
        "--format", "-f", metavar="TEMPLATE",
        help="read records by a template: %%k key, %%v value, %%h headers k=v,..., %%p partition (e.g. '%%k %%v\\n')",
    )  # fmt: skip
    parser.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE", help="add a header")
    parser.add_argument("--partition", "-p", type=non_negative_int, help="send every record to this partition")
    parser.add_argument("--count", type=non_negative_int, help="generate this many records instead of reading stdin")
    parser.add_argument("--size", type=non_negative_int, default=100, help="generated value size in bytes (100)")
    parser.add_argument("--acks", default="all", choices=["0", "1", "all"])
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--idempotent", action="store_true", help="enable.idempotence=true")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run)


@dataclass
class Tally:
    """What was delivered and what failed, counted by the delivery callbacks."""

    records: int = 0
    bytes: int = 0
    errors: list[Any] = field(default_factory=list)

    def on_delivery(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.records += 1
            self.bytes += len(message.value() or b"") + len(message.key() or b"")


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    template = None
    if args.format is not None:
        if args.count is not None or args.key_separator is not None:
            raise CliError("--format reads stdin by a template: it does not go with --count or --key-separator")
        template = parse_template(args.format)
    admin = connect_admin(args)
    headers = _headers(args.header)
    partitions = None
    if args.partition is not None or (template is not None and "p" in template):
        partitions = len(existing_topic(admin, args.topic, args.timeout).partitions)
    if args.partition is not None and partitions is not None and args.partition >= partitions:
        raise CliError(f"topic {args.topic} has no partition {args.partition} (it has {partitions})")
    defaults = {
        "acks": args.acks, "compression.type": args.compression, "enable.idempotence": args.idempotent,
        "linger.ms": 5,
    }  # fmt: skip
    producer = make_client(Producer, client_config(args, **defaults))
    tally = Tally()
    extra: dict[str, Any] = {"headers": headers} if headers else {}
    if args.partition is not None:
        extra["partition"] = args.partition
    started = time.monotonic()
    try:
        if template is not None:
            for record in read_records(sys.stdin.buffer, template):
                _send_parsed(producer, record, topic=args.topic, extra=extra, tally=tally, partitions=partitions)
        else:
            records = _generated(args) if args.count is not None else _stdin(args.key_separator)
            for key, value in records:
                _send(producer, key, value, topic=args.topic, extra=extra, tally=tally)
        producer.flush()
    except KafkaException as exc:
        raise kafka_error(exc) from None
    except CliError:  # bad input part-way: what was read before it is sent and counted first
        producer.flush()
        _summarise(args, tally, time.monotonic() - started)
        raise
    _summarise(args, tally, time.monotonic() - started)
    if tally.errors:
        raise CliError(f"{len(tally.errors)} records failed: {_explained(admin, args, tally.errors[0])}")
    return 0


def _headers(items: list[str]) -> list[tuple[str, bytes]]:
    headers = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--header {item!r}: expected KEY=VALUE")
        headers.append((key, value.encode()))
    return headers


def _generated(args: argparse.Namespace) -> Iterator[tuple[bytes | None, bytes]]:
    value = os.urandom(args.size // 2 + 1).hex()[: args.size].encode()
    with Progress(transient=True) as progress:
        task = progress.add_task(f"producing to {args.topic}", total=args.count)
        for i in range(args.count):
            yield str(i).encode(), value
            if i % 1000 == 999:
                progress.update(task, completed=i + 1)


def _stdin(separator: str | None) -> Iterator[tuple[bytes | None, bytes]]:
    split = separator.encode() if separator else None
    for line in sys.stdin.buffer:
        value = line.rstrip(b"\n")
        if split is not None and split in value:
            key, value = value.split(split, 1)
            yield key, value
        else:
            yield None, value


def _send(producer: Any, key: bytes | None, value: bytes, *, topic: str, extra: dict[str, Any], tally: Tally) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=tally.on_delivery, **extra)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)


def _send_parsed(
    producer: Any, record: ParsedRecord, *, topic: str, extra: dict[str, Any], tally: Tally, partitions: int | None
) -> None:
    """Send a record read by --format: its own headers after --header's, its own partition over --partition."""
    own = dict(extra)
    if record.headers:
        own["headers"] = [*extra.get("headers", []), *record.headers]
    if record.partition is not None:
        if partitions is not None and record.partition >= partitions:
            raise CliError(f"topic {topic} has no partition {record.partition} (it has {partitions})")
        own["partition"] = record.partition
    _send(producer, record.key, record.value, topic=topic, extra=own, tally=tally)


def _summarise(args: argparse.Namespace, tally: Tally, seconds: float) -> None:
    megabytes = tally.bytes / 1e6
    summary = {
        "topic": args.topic, "records": tally.records, "megabytes": round(megabytes, 3),
        "seconds": round(seconds, 3), "mb_per_s": round(megabytes / seconds, 3) if seconds > 0 else None,
        "errors": len(tally.errors),
    }  # fmt: skip
    if args.json:
        print(json.dumps(summary))
        return
    rate = f"{summary['mb_per_s']:.2f} MB/s" if summary["mb_per_s"] is not None else "-"
    print(
        f"produced {tally.records} records ({megabytes:.2f} MB) to {args.topic} in {seconds:.2f} s, {rate}, "
        f"{len(tally.errors)} errors"
    )


def _explained(admin: Any, args: argparse.Namespace, error: Any) -> str:
    """The error's text, with the reason Kafka gives in its logs when a compacted topic refused a keyless record."""
    text = str(error.str())
    if error.code() != INVALID_RECORD:
        return text
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, args.topic)
    try:
        policy = admin.describe_configs([resource])[resource].result(args.timeout)["cleanup.policy"].value
    except Exception:  # only a better message is at stake
        return text
    if "compact" in str(policy):
        return f"{text}: topic {args.topic} is compacted and every record needs a key (--key-separator)"
    return text
