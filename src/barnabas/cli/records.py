"""`barnabas records delete`: drop a topic's records before an offset (DeleteRecords, kafka-delete-records.sh).

The partitions' log start offsets move up to the offset given (or to the high watermark with
``--all``); what is before them can no longer be read. Offsets are checked against each partition's
range first, as Kafka's tool reports an out-of-range offset, and nothing is deleted from a topic that
does not exist.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._client import action_parser, add_connection, connect_admin, kafka_error, non_negative_int
from .errors import CliError
from .topics import INTERNAL_TOPICS, existing_topic


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("records", help="delete records before an offset")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    delete = action_parser(actions, "delete", help="delete the records before an offset (DeleteRecords)")
    delete.add_argument("topic")
    delete.add_argument("--partition", "-p", type=non_negative_int, action="append", help="default: every partition")
    where = delete.add_mutually_exclusive_group(required=True)
    where.add_argument("--before", type=non_negative_int, metavar="OFFSET", help="delete what is before OFFSET")
    where.add_argument("--all", action="store_true", help="delete everything up to the high watermark")
    delete.add_argument("--json", action="store_true", help="print the new log start offsets as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

    if args.topic in INTERNAL_TOPICS:
        raise CliError(f"topic {args.topic} is an internal topic; its records are not deleted by hand")
    admin = connect_admin(args)
    count = len(existing_topic(admin, args.topic, args.timeout).partitions)
    partitions = sorted(set(args.partition)) if args.partition else list(range(count))
    if missing := [p for p in partitions if p >= count]:
        raise CliError(f"topic {args.topic} has no partition {missing[0]} (it has {count})")
    offset = OFFSET_END if args.all else args.before
    try:
        futures = admin.delete_records(
            [TopicPartition(args.topic, p, offset) for p in partitions], operation_timeout=args.timeout
        )
        starts = {tp.partition: int(future.result(args.timeout).low_watermark) for tp, future in futures.items()}
    except KafkaException as exc:
        raise kafka_error(exc) from None
    if args.json:
        print(json.dumps({"topic": args.topic, "log_start_offsets": {str(p): o for p, o in sorted(starts.items())}}))
    else:
        for partition, start in sorted(starts.items()):
            print(f"{args.topic}-{partition}: records before {start} deleted")
    return 0
