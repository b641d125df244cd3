"""`barnabas partitions elect-leaders`: preferred or unclean leader elections (ElectLeaders,
kafka-leader-election.sh); `reassign` and `reassignments` live in their own module.

Without ``--topic`` every partition that needs an election gets one; with it, the named partitions
(all of the topic's without ``--partition``). Each partition's outcome is one line; a partition
whose election was not needed is reported as such, not as a failure.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import reassign
from ._client import action_parser, add_connection, connect_admin, kafka_error, non_negative_int
from .errors import CliError
from .topics import existing_topic

#: librdkafka's code for ELECTION_NOT_NEEDED.
ELECTION_NOT_NEEDED = 84


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("partitions", help="leader elections and replica moves")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    elect = action_parser(actions, "elect-leaders", help="move leadership to preferred replicas (or elect unclean)")
    elect.add_argument("--topic", help="default: every partition that needs an election")
    elect.add_argument("--partition", "-p", type=non_negative_int, action="append", help="with --topic")
    elect.add_argument("--type", choices=["preferred", "unclean"], default="preferred")
    elect.add_argument("--json", action="store_true", help="print each partition's outcome as JSON")
    elect.set_defaults(run=run)
    reassign.add_actions(actions)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaException, TopicPartition

    if args.partition and args.topic is None:
        raise CliError("--partition needs --topic")
    admin = connect_admin(args)
    wanted = None
    if args.topic is not None:
        count = len(existing_topic(admin, args.topic, args.timeout).partitions)
        partitions = sorted(set(args.partition)) if args.partition else list(range(count))
        if missing := [p for p in partitions if p >= count]:
            raise CliError(f"topic {args.topic} has no partition {missing[0]} (it has {count})")
        wanted = [TopicPartition(args.topic, p) for p in partitions]
    kind = ElectionType.PREFERRED if args.type == "preferred" else ElectionType.UNCLEAN
    try:
        # No timeout keywords: confluent-kafka 2.16's elect_leaders fails on them (SystemError).
        results = admin.elect_leaders(kind, wanted).result(args.timeout)
    except KafkaException as exc:
        raise kafka_error(exc) from None
    outcomes = {}
    for tp, failure in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
        error = failure.args[0] if isinstance(failure, KafkaException) else failure  # either, by version
        code = error.code() if error is not None else 0
        outcomes[f"{tp.topic}-{tp.partition}"] = (
            "elected" if error is None else "not needed" if code == ELECTION_NOT_NEEDED else str(error.str())
        )
    if args.json:
        print(json.dumps(outcomes, indent=2))
    else:
        for name, outcome in outcomes.items():
            print(f"{name}: {outcome}")
        if not outcomes:
            print("no partition needed an election")
    failed = [name for name, outcome in outcomes.items() if outcome not in ("elected", "not needed")]
    if failed:
        raise CliError(f"{len(failed)} elections failed, e.g. {failed[0]}: {outcomes[failed[0]]}")
    return 0
