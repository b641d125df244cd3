"""`barnabas groups delete-offsets`: remove a group's committed offsets for some topics (OffsetDelete, KIP-496).

As ``kafka-consumer-groups.sh --delete-offsets``: ``--topic T`` means every partition of T and
``--topic T:0,2`` those partitions; each partition's outcome is a row; a group that does not
exist is one line; a partition a live member still consumes is refused by the coordinator
(GROUP_SUBSCRIBED_TO_TOPIC) and makes the exit code 1. Nothing here creates a topic.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._admin_requests import error_name, python_admin
from ._client import action_parser
from .errors import CliError


def add_action(actions: Any) -> None:
    parser = action_parser(actions, "delete-offsets", help="delete a group's committed offsets for topics")
    parser.add_argument("group")
    parser.add_argument(
        "--topic", action="append", required=True, metavar="TOPIC[:P,P]",
        help="a topic, or some of its partitions (repeatable)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print each partition's outcome as JSON")


def parse_topic(text: str) -> tuple[str, list[int] | None]:
    """'orders' -> ('orders', None); 'orders:0,2' -> ('orders', [0, 2])."""
    name, sep, listed = text.partition(":")
    if not name:
        raise CliError(f"--topic {text!r}: no topic name")
    if not sep:
        return name, None
    try:
        partitions = sorted({int(p) for p in listed.split(",")})
    except ValueError:
        raise CliError(f"--topic {text!r}: partitions must be integers, as in {name}:0,2") from None
    if partitions[0] < 0:
        raise CliError(f"--topic {text!r}: partitions must not be negative")
    return name, partitions


def delete_offsets(admin: Any, args: argparse.Namespace) -> int:
    """Run the action: ``admin`` is the confluent admin the other group actions use (for topic checks)."""
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.errors import GroupIdNotFoundError, KafkaError, NoError

    from .topics import existing_topic

    wanted: list[tuple[str, int]] = []
    for text in args.topic:
        name, partitions = parse_topic(text)
        count = len(existing_topic(admin, name, args.timeout).partitions)
        if missing := [p for p in partitions or [] if p >= count]:
            raise CliError(f"topic {name} has no partition {missing[0]} (it has {count})")
        wanted += [(name, p) for p in (partitions if partitions is not None else range(count))]
    client = python_admin(args)
    try:
        outcomes = client.delete_group_offsets(args.group, [KafkaPythonPartition(t, p) for t, p in wanted])
    except GroupIdNotFoundError:
        raise CliError(f"consumer group {args.group} does not exist") from None
    except KafkaError as exc:
        raise CliError(f"could not delete offsets of group {args.group}: {error_name(exc)}") from None
    finally:
        client.close()
    rows = {
        f"{tp.topic}-{tp.partition}": "deleted" if error is NoError else error_name(error)
        for tp, error in sorted(outcomes.items(), key=lambda item: (item[0].topic, item[0].partition))
    }
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for name, outcome in rows.items():
            print(f"{name}: {outcome}")
    failed = [name for name, outcome in rows.items() if outcome != "deleted"]
    if failed:
        raise CliError(f"{len(failed)} partitions kept their offsets, e.g. {failed[0]}: {rows[failed[0]]}")
    return 0
