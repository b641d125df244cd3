"""`barnabas groups`: list, describe (offsets and lag, or members), reset offsets of and delete consumer groups.

As Kafka's kafka-consumer-groups.sh: ``reset-offsets`` shows the plan unless ``--execute`` is
given, only an inactive (Empty) group's offsets can be reset, and every target offset is
clamped to the partition's [earliest, latest] range with a note; lag is the partition's end
offset minus the committed offset; a group that does not exist is an error. Nothing here
creates a topic.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from . import offset_delete
from ._client import (
    action_parser,
    add_connection,
    client_config,
    connect_admin,
    kafka_error,
    make_client,
    non_negative_int,
)
from .errors import CliError

TopicPartition = tuple[str, int]


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("groups", help="list, describe, reset, delete groups")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = action_parser(actions, "list", help="list consumer groups and their states")
    listing.add_argument("--json", action="store_true", help="print JSON")
    describe = action_parser(actions, "describe", help="committed offsets and lag (or members) of groups")
    describe.add_argument("group", nargs="?")
    describe.add_argument("--all-groups", action="store_true", help="every group")
    describe.add_argument("--members", action="store_true", help="show members and their assignments instead")
    describe.add_argument("--json", action="store_true", help="print JSON")
    reset = action_parser(actions, "reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC", help="a topic to reset (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=non_negative_int, metavar="N")
    target.add_argument("--to-datetime", metavar="ISO-8601", help="the first offset at or after this time")
    target.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N (may be < 0)")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: show them)")
    reset.add_argument("--json", action="store_true", help="print the plan as JSON")
    delete = action_parser(actions, "delete", help="delete an inactive group and its offsets")
    delete.add_argument("group")
    offset_delete.add_action(actions)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = connect_admin(args)
    try:
        return int(ACTIONS[args.action](admin, args))
    except KafkaException as exc:
        raise kafka_error(exc) from None


def _state_name(state: Any) -> str:
    return str(getattr(state, "name", state)).replace("_", "").title().replace("rebalance", "Rebalance")


def _group_ids(admin: Any, timeout: float) -> list[str]:
    listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
    return sorted(group.group_id for group in listed.valid)


def _list(admin: Any, args: argparse.Namespace) -> int:
    listed = admin.list_consumer_groups(request_timeout=args.timeout).result(args.timeout)
    groups = sorted(listed.valid, key=lambda g: g.group_id)
    rows = [{"group": g.group_id, "state": _state_name(g.state)} for g in groups]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(box=None)
    for column in ("group", "state"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["group"], row["state"])
    Console().print(table)
    print(f"{len(rows)} groups")
    return 0


def _described(admin: Any, args: argparse.Namespace, group: str) -> Any:
    """The group's description.

    Raises:
        CliError: no such group (Dead, with no members and no committed offsets).
    """
    described = admin.describe_consumer_groups([group], request_timeout=args.timeout)[group].result(args.timeout)
    if _state_name(described.state) == "Dead" and not described.members and not _committed(args, group):
        raise CliError(f"consumer group {group} does not exist")
    return described


def _committed(args: argparse.Namespace, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets, of every topic the cluster has.

    Asked by a consumer of the group that never joins it, not by the AdminClient: librdkafka's
    ListConsumerGroupOffsets crashes the process (SIGSEGV, librdkafka issue 5040, open in 2.16)
    when the answer is NOT_COORDINATOR, as it is while the group's coordinator moves; a consumer
    asks for the new coordinator and tries again.
    """
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = make_client(Consumer, client_config(args, **{"group.id": group, "enable.auto.commit": False}))
    try:
        topics = consumer.list_topics(timeout=args.timeout).topics
        wanted = [KafkaTopicPartition(t, p) for t, found in sorted(topics.items()) for p in sorted(found.partitions)]
        committed = consumer.committed(wanted, timeout=args.timeout) if wanted else []
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}


def _offsets(admin: Any, partitions: Iterable[TopicPartition], spec: Any, timeout: float) -> dict[TopicPartition, int]:
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    wanted = {KafkaTopicPartition(topic, partition): spec for topic, partition in partitions}
    if not wanted:
        return {}
    results = admin.list_offsets(wanted, request_timeout=timeout)
    return {(tp.topic, tp.partition): int(future.result(timeout).offset) for tp, future in results.items()}


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import OffsetSpec

    if args.all_groups == (args.group is not None):
        raise CliError("name a group, or give --all-groups")
    groups = _group_ids(admin, args.timeout) if args.all_groups else [args.group]
    reports = []
    for group in groups:
        described = _described(admin, args, group)
        report: dict[str, Any] = {
            "group": group, "state": _state_name(described.state), "coordinator": described.coordinator.id,
            "assignor": described.partition_assignor or None,
        }  # fmt: skip
        owners: dict[TopicPartition, str] = {}
        members = []
        for member in described.members:
            assigned = sorted((tp.topic, tp.partition) for tp in (member.assignment.topic_partitions or []))
            owners.update(dict.fromkeys(assigned, f"{member.client_id} ({member.host})"))
            members.append({
                "member_id": member.member_id, "client_id": member.client_id, "host": member.host,
                "partitions": [f"{t}-{p}" for t, p in assigned],
            })  # fmt: skip
        report["members"] = members
        if not args.members:
            committed = _committed(args, group)
            partitions = sorted({*committed, *owners})
            ends = _offsets(admin, partitions, OffsetSpec.latest(), args.timeout)  # type: ignore[no-untyped-call]
            report["partitions"] = [
                {
                    "topic": tp[0], "partition": tp[1], "committed": committed.get(tp), "end": ends.get(tp),
                    "lag": ends[tp] - committed[tp] if tp in committed and tp in ends else None,
                    "owner": owners.get(tp),
                }
                for tp in partitions
            ]  # fmt: skip
        reports.append(report)
    if args.json:
        print(json.dumps(reports if args.all_groups else reports[0], indent=2))
    else:
        for report in reports:
            _print_group(report, members_only=args.members)
    return 0


def _print_group(report: dict[str, Any], *, members_only: bool) -> None:
    console = Console()
    console.print(
        f"group {report['group']}: {report['state']}, coordinator {report['coordinator']}, "
        f"assignor {report['assignor'] or '-'}, {len(report['members'])} members"
    )
    table = Table(box=None)
    if members_only:
        for column in ("member", "client", "host", "partitions"):
            table.add_column(column)
        for m in report["members"]:
            table.add_row(m["member_id"], m["client_id"], m["host"], ",".join(m["partitions"]) or "-")
    else:
        for column in ("topic", "partition", "committed", "end", "lag", "owner"):
            table.add_column(column)
        for p in report["partitions"]:
            table.add_row(
                p["topic"], str(p["partition"]), _shown(p["committed"]), _shown(p["end"]), _shown(p["lag"]),
                p["owner"] or "-",
            )  # fmt: skip
    console.print(table)


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)


def _reset_offsets(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import OffsetSpec

    described = _group_or_new(admin, args, args.group)
    state = _state_name(described.state) if described is not None else "Empty"
    if args.execute and state not in ("Empty", "Dead"):
        raise CliError(
            f"Assignments can only be reset if the group '{args.group}' is inactive, but the current state is {state}."
        )
    committed = _committed(args, args.group)
    partitions = _reset_scope(admin, args, committed)
    earliest = _offsets(admin, partitions, OffsetSpec.earliest(), args.timeout)  # type: ignore[no-untyped-call]
    latest = _offsets(admin, partitions, OffsetSpec.latest(), args.timeout)  # type: ignore[no-untyped-call]
    wanted = _targets(admin, args, committed, earliest=earliest, latest=latest)
    plan = {}
    for tp in partitions:
        clamped = min(max(wanted[tp], earliest[tp]), latest[tp])
        if clamped != wanted[tp]:
            side = "lower than the earliest" if wanted[tp] < earliest[tp] else "higher than the latest"
            print(f"new offset {wanted[tp]} of {tp[0]}-{tp[1]} is {side} offset; it is set to {clamped}")
        plan[tp] = clamped
    _print_plan(args, plan, committed)
    if args.execute:
        _commit(admin, args, plan)
    return 0


def _group_or_new(admin: Any, args: argparse.Namespace, group: str) -> Any:
    """The group's description, or None for a group never seen (its offsets may be set before it runs)."""
    try:
        return _described(admin, args, group)
    except CliError:
        return None


def _reset_scope(admin: Any, args: argparse.Namespace, committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    if args.all_topics:
        if not committed:
            raise CliError(f"group {args.group} has no committed offsets; name the topics with --topic")
        return sorted(committed)
    existing = admin.list_topics(timeout=args.timeout).topics
    partitions = []
    for name in args.topic:
        topic = existing.get(name)
        if topic is None or topic.error is not None:
            raise CliError(f"topic {name} does not exist")
        partitions += [(name, p) for p in sorted(topic.partitions)]
    return partitions


def _targets(
    admin: Any,
    args: argparse.Namespace,
    committed: dict[TopicPartition, int],
    *,
    earliest: dict[TopicPartition, int],
    latest: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Where the group would be set, before clamping: one offset per partition of ``latest``."""
    partitions = sorted(latest)
    from confluent_kafka.admin import OffsetSpec

    if args.to_earliest:
        return dict(earliest)
    if args.to_latest:
        return dict(latest)
    if args.to_offset is not None:
        return dict.fromkeys(partitions, args.to_offset)
    if args.shift_by is not None:
        return {tp: committed.get(tp, latest[tp]) + args.shift_by for tp in partitions}
    try:
        moment = datetime.datetime.fromisoformat(args.to_datetime)
    except ValueError:
        raise CliError(f"--to-datetime {args.to_datetime!r}: expected ISO-8601, e.g. 2026-11-25T17:00:00") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool reads a zoneless datetime
    spec = OffsetSpec.for_timestamp(int(moment.timestamp() * 1000))
    found = _offsets(admin, partitions, spec, args.timeout)
    return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}


def _print_plan(
    args: argparse.Namespace, plan: dict[TopicPartition, int], committed: dict[TopicPartition, int]
) -> None:
    rows: list[dict[str, Any]] = [
        {"topic": t, "partition": p, "current": committed.get((t, p)), "new": offset}
        for (t, p), offset in sorted(plan.items())
    ]
    if args.json:
        print(json.dumps({"group": args.group, "executed": args.execute, "partitions": rows}, indent=2))
        return
    title = f"{args.group}" + ("" if args.execute else " (dry run: add --execute)")
    table = Table(title=title, box=None)
    for column in ("topic", "partition", "current", "new offset"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["topic"], str(row["partition"]), _shown(row["current"]), str(row["new"]))
    Console().print(table)


def _commit(admin: Any, args: argparse.Namespace, plan: dict[TopicPartition, int]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    request = ConsumerGroupTopicPartitions(
        args.group, [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
    )
    result = admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)[args.group]
    failed = [tp for tp in result.result(args.timeout).topic_partitions if tp.error is not None]
    if failed:
        raise CliError(f"reset failed for {len(failed)} partitions: {failed[0].error.str()}")
    if not args.json:
        print(f"reset {len(plan)} partitions for group {args.group}")


def _delete(admin: Any, args: argparse.Namespace) -> int:
    _described(admin, args, args.group)
    admin.delete_consumer_groups([args.group], request_timeout=args.timeout)[args.group].result(args.timeout)
    print(f"deleted group {args.group}")
    return 0


ACTIONS = {
    "list": _list, "describe": _describe, "reset-offsets": _reset_offsets, "delete": _delete,
    "delete-offsets": offset_delete.delete_offsets,
}  # fmt: skip
