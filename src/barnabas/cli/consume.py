"""`barnabas consume`: print a topic's records, from chosen partitions and offsets or as a group member.

Without ``--group`` the partitions are assigned directly (nothing is committed); with it, the
topic is subscribed as a member of that consumer group and offsets are committed as a Kafka
consumer does. Records are written as raw bytes through ``--format`` (kcat-like tokens), so
binary keys and values come out unchanged; a reader that goes away (``| head``) ends it quietly.
"""

from __future__ import annotations

import argparse
import json
import select
import sys
import time
from typing import Any, BinaryIO

from ._client import (
    add_connection,
    client_config,
    connect_admin,
    kafka_error,
    make_client,
    non_negative_int,
    positive_float,
    positive_int,
)
from .errors import CliError
from .input_format import split_template
from .topics import existing_topic

DEFAULT_FORMAT = "%v\\n"
KEYED_FORMAT = "%k\\t%v\\n"
POLL_S = 0.5
#: Format tokens: what each is replaced by.
TOKENS = {
    "t": "topic", "p": "partition", "o": "offset", "d": "timestamp (ms)", "k": "key", "v": "value",
    "h": "headers (k=v,...)",
}  # fmt: skip


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "consume",
        help="print records of a topic",
        description="Tokens for --format: " + ", ".join(f"%{k} {v}" for k, v in TOKENS.items()) + "; %%, \\n and \\t.",
    )
    add_connection(parser)
    parser.add_argument("topic")
    parser.add_argument("--group", "-g", help="consume as a member of this group, committing offsets")
    parser.add_argument(
        "--partition", "-p", type=non_negative_int, action="append", help="partition(s) to read (default all)"
    )
    parser.add_argument(
        "--offset", "-o", default=None, metavar="WHERE",
        help="earliest, latest (default), N, -N (N before the end) or @TIMESTAMP_MS",
    )  # fmt: skip
    parser.add_argument("--from-beginning", action="store_true", help="the same as --offset earliest")
    parser.add_argument("--max-messages", "-n", type=positive_int, help="stop after this many records")
    parser.add_argument("--print-key", action="store_true", help=f"the same as --format '{_escaped(KEYED_FORMAT)}'")
    parser.add_argument("--format", "-f", help=f"how to print each record (default '{_escaped(DEFAULT_FORMAT)}')")
    parser.add_argument("--json", action="store_true", help="print each record as one JSON object")
    parser.add_argument(
        "--idle-timeout", type=positive_float, metavar="SECONDS", help="stop after this long without records"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    if args.group is not None and args.partition:
        raise CliError("--partition reads partitions directly; it cannot be combined with --group")
    where = _parse_offset("earliest" if args.from_beginning and args.offset is None else args.offset or "latest")
    template = _template(args)
    admin = connect_admin(args)
    partitions = _partitions(admin, args)
    from confluent_kafka import Consumer

    consumer = make_client(Consumer, client_config(args, **_consumer_defaults(args, where)))
    out = sys.stdout.buffer
    seen, size, started = 0, 0, time.monotonic()
    try:
        _start(consumer, args, partitions, where)
        idle = 0.0
        while args.max_messages is None or seen < args.max_messages:
            message = consumer.poll(POLL_S)
            if message is None:
                if _reader_gone(out.fileno()):
                    raise BrokenPipeError  # `| head -1` got its line while nothing new was coming
                idle += POLL_S
                if args.idle_timeout is not None and idle >= args.idle_timeout:
                    break
                continue
            idle = 0.0
            if message.error() is not None:
                raise CliError(message.error().str())
            size += len(message.value() or b"") + len(message.key() or b"")
            seen += 1
            _write(out, _render(message, template, args.json))
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KafkaException as exc:
        raise kafka_error(exc) from None
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    print(f"consumed {seen} records ({size / 1e6:.2f} MB) from {args.topic} in {elapsed:.2f} s", file=sys.stderr)
    return 0


def _consumer_defaults(args: argparse.Namespace, where: tuple[str, int]) -> dict[str, Any]:
    if args.group is None:
        return {"group.id": "barnabas-cli", "enable.auto.commit": False, "enable.partition.eof": False}
    reset = "earliest" if where[0] == "earliest" else "latest"  # where a group without a commit starts
    return {"group.id": args.group, "enable.partition.eof": False, "auto.offset.reset": reset}


def _parse_offset(text: str) -> tuple[str, int]:
    """``(kind, value)``: ("earliest"|"latest", 0), ("absolute", N), ("from_end", N), ("time", ms)."""
    if text in ("earliest", "beginning"):
        return "earliest", 0
    if text in ("latest", "end"):
        return "latest", 0
    try:
        if text.startswith("@"):
            return "time", int(text[1:])
        value = int(text)
    except ValueError:
        raise CliError(f"--offset {text!r}: expected earliest, latest, N, -N or @TIMESTAMP_MS") from None
    return ("from_end", -value) if value < 0 else ("absolute", value)


def _partitions(admin: Any, args: argparse.Namespace) -> list[int]:
    count = len(existing_topic(admin, args.topic, args.timeout).partitions)
    missing = sorted(p for p in args.partition or [] if p >= count)
    if missing:
        raise CliError(f"topic {args.topic} has no partition {missing[0]} (it has {count})")
    return sorted(set(args.partition)) if args.partition else list(range(count))


def _start(consumer: Any, args: argparse.Namespace, partitions: list[int], where: tuple[str, int]) -> None:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    kind, value = where
    if args.group is not None:
        if kind not in ("earliest", "latest"):
            raise CliError("with --group, --offset may only be earliest or latest (where to start without a commit)")
        consumer.subscribe([args.topic])
        return
    if kind == "time":
        wanted = [TopicPartition(args.topic, p, value) for p in partitions]
        found = consumer.offsets_for_times(wanted, timeout=args.timeout)
        consumer.assign([TopicPartition(args.topic, tp.partition, tp.offset) for tp in found])
        return
    offsets = {}
    for partition in partitions:
        if kind == "earliest":
            offsets[partition] = OFFSET_BEGINNING
        elif kind == "latest":
            offsets[partition] = OFFSET_END
        else:
            low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, partition), timeout=args.timeout)
            offsets[partition] = max(low, high - value) if kind == "from_end" else min(max(value, low), high)
    consumer.assign([TopicPartition(args.topic, p, o) for p, o in offsets.items()])


def _escaped(text: str) -> str:
    """``text`` for an argparse help string, which is %-formatted."""
    return text.replace("%", "%%")


def _template(args: argparse.Namespace) -> list[bytes | str]:
    """The --format as literal bytes and one-letter tokens, checked once."""
    return split_template(args.format or (KEYED_FORMAT if args.print_key else DEFAULT_FORMAT), TOKENS)


def _render(message: Any, template: list[bytes | str], as_json: bool) -> bytes:
    key, value = message.key(), message.value()
    headers = message.headers() or []
    if as_json:
        document = {
            "topic": message.topic(), "partition": message.partition(), "offset": message.offset(),
            "timestamp": message.timestamp()[1], "key": _text(key), "value": _text(value),
            "headers": {k: _text(v) for k, v in headers},
        }  # fmt: skip
        return json.dumps(document).encode() + b"\n"
    fields = {
        "t": message.topic().encode(), "p": str(message.partition()).encode(), "o": str(message.offset()).encode(),
        "d": str(message.timestamp()[1]).encode(), "k": key or b"", "v": value or b"",
        "h": b",".join(k.encode() + b"=" + (v or b"") for k, v in headers),
    }  # fmt: skip
    return b"".join(fields[piece] if isinstance(piece, str) else piece for piece in template)


def _text(data: bytes | None) -> str | None:
    return data.decode(errors="replace") if data is not None else None


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reader has closed it: poll reports an error on the write end.

    Checked while no record arrives, so that ``barnabas consume T | head -1`` ends once ``head`` has
    its line, even when every record was written before it left (a write would have failed only
    on the next record).
    """
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null so Python's exit flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
