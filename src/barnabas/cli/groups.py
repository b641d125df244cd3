"""`barnabas groups`: list, describe (with lag), reset offsets of and delete consumer groups.

Like Kafka's kafka-consumer-groups.sh: ``reset-offsets`` shows the plan unless ``--execute`` is
given, and only an inactive (Empty) group's offsets can be reset; lag is the partition's end
offset minus the committed offset.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from ._client import add_bootstrap, kafka_error
from .errors import CliError

TIMEOUT_S = 30


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("groups", help="list, describe, reset, delete groups")
    add_bootstrap(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="list consumer groups and their states")
    describe = actions.add_parser("describe", help="members, committed offsets and lag of a group")
    describe.add_argument("group")
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: show them)")
    delete = actions.add_parser("delete", help="delete an inactive group and its offsets")
    delete.add_argument("group")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # log_level 0: librdkafka's info lines (e.g. "Purging 1 unserved events") must not follow the one-line error.
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "log_level": 0})
    try:
        return int(ACTIONS[args.action](admin, args))
    except KafkaException as exc:
        raise kafka_error(exc) from None


def _list(admin: Any, args: argparse.Namespace) -> int:
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    table = Table()
    for column in ("group", "state"):
        table.add_column(column)
    for group in sorted(listed.valid, key=lambda g: g.group_id):
        table.add_row(group.group_id, _state_name(group.state))
    Console().print(table)
    return 0


def _state_name(state: Any) -> str:
    return str(getattr(state, "name", state)).replace("_", "").title().replace("rebalance", "Rebalance")


def _end_offsets(admin: Any, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not partitions:
        return {}
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    wanted = {TopicPartition(topic, partition): latest for topic, partition in partitions}
    results = admin.list_offsets(wanted, request_timeout=TIMEOUT_S)
    return {(tp.topic, tp.partition): future.result(TIMEOUT_S).offset for tp, future in results.items()}


def _committed(admin: Any, group: str) -> list[Any]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    return sorted(result.topic_partitions or [], key=lambda p: (p.topic, p.partition))


def _describe(admin: Any, args: argparse.Namespace) -> int:
    described = admin.describe_consumer_groups([args.group], request_timeout=TIMEOUT_S)[args.group].result(TIMEOUT_S)
    console = Console()
    console.print(
        f"group {args.group}: {_state_name(described.state)}, coordinator {described.coordinator.id}, "
        f"assignor {described.partition_assignor or '-'}, {len(described.members)} members"
    )
    owners: dict[tuple[str, int], str] = {}
    for member in described.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = f"{member.client_id} ({member.host})"
    committed = {(tp.topic, tp.partition): tp.offset for tp in _committed(admin, args.group)}
    partitions = sorted({*committed, *owners})
    ends = _end_offsets(admin, partitions)
    table = Table()
    for column in ("topic", "partition", "committed", "end", "lag", "owner"):
        table.add_column(column)
    for tp in partitions:
        offset, end = committed.get(tp, -1), ends.get(tp, -1)
        lag = str(end - offset) if offset >= 0 and end >= 0 else "-"
        shown = str(offset) if offset >= 0 else "-"
        table.add_row(tp[0], str(tp[1]), shown, str(end), lag, owners.get(tp, "-"))
    console.print(table)
    return 0


def _reset_offsets(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    described = admin.describe_consumer_groups([args.group], request_timeout=TIMEOUT_S)[args.group].result(TIMEOUT_S)
    state = _state_name(described.state)
    if args.execute and state not in ("Empty", "Dead"):
        raise CliError(
            f"Assignments can only be reset if the group '{args.group}' is inactive, but the current state is {state}."
        )
    metadata = admin.list_topics(topic=args.topic, timeout=TIMEOUT_S).topics.get(args.topic)
    if metadata is None or metadata.error is not None:
        raise CliError(f"topic {args.topic} not found")
    partitions = sorted(metadata.partitions)
    if args.to_offset is not None:
        targets = dict.fromkeys(partitions, args.to_offset)
    else:
        spec = OffsetSpec.earliest() if args.to_earliest else OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({TopicPartition(args.topic, p): spec for p in partitions})
        targets = {tp.partition: f.result(TIMEOUT_S).offset for tp, f in futures.items()}
    table = Table(title=f"{args.group} on {args.topic}" + ("" if args.execute else " (dry run: add --execute)"))
    for column in ("partition", "new offset"):
        table.add_column(column)
    for partition, offset in sorted(targets.items()):
        table.add_row(str(partition), str(offset))
    Console().print(table)
    if args.execute:
        request = ConsumerGroupTopicPartitions(
            args.group, [TopicPartition(args.topic, p, o) for p, o in sorted(targets.items())]
        )
        result = admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[args.group].result(TIMEOUT_S)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise CliError(f"reset failed for {len(failed)} partitions: {failed[0].error.str()}")
        print(f"reset {len(targets)} partitions of {args.topic} for group {args.group}")
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    admin.delete_consumer_groups([args.group], request_timeout=TIMEOUT_S)[args.group].result(TIMEOUT_S)
    print(f"deleted group {args.group}")
    return 0


ACTIONS = {"list": _list, "describe": _describe, "reset-offsets": _reset_offsets, "delete": _delete}
