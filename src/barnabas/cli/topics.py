"""`barnabas topics`: list, create, describe, delete, reconfigure and grow topics with the Kafka admin API.

As Kafka's kafka-topics.sh: read-only actions never create a topic (they read the full topic
list, never Metadata for one name, which a broker may answer by creating it), internal topics are
hidden from ``list`` unless asked for and cannot be deleted, and a missing topic is an error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from . import log_dirs
from ._client import action_parser, add_connection, connect_admin, kafka_error, positive_int
from .errors import CliError

#: Kafka's internal topics (Topic.INTERNAL_TOPICS).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "topics", help="list, create, describe, delete, alter-config, add-partitions"
    )
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = action_parser(actions, "list", help="list topics with their partition count and replication")
    listing.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    create = action_parser(actions, "create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", "-p", type=positive_int, help="default: the broker's num.partitions")
    create.add_argument(
        "--replication-factor", "-r", type=positive_int, help="default: the broker's default.replication.factor"
    )
    create.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE", help="a topic setting")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")
    describe = action_parser(actions, "describe", help="partitions (leader, replicas, ISR, offsets) and settings")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true", help="print JSON")
    delete = action_parser(actions, "delete", help="delete a topic (internal topics are refused)")
    delete.add_argument("name")
    delete.add_argument("--if-exists", action="store_true", help="succeed if the topic does not exist")
    alter = action_parser(actions, "alter-config", help="set or remove topic settings")
    alter.add_argument("name")
    alter.add_argument("--set", "-s", action="append", default=[], metavar="KEY=VALUE", help="set a setting")
    alter.add_argument("--delete", "-d", action="append", default=[], metavar="KEY", help="back to the default")
    grow = action_parser(actions, "add-partitions", help="grow a topic to more partitions")
    grow.add_argument("name")
    grow.add_argument("--partitions", "-p", type=positive_int, required=True, help="the new total partition count")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = connect_admin(args)
    try:
        return int(ACTIONS[args.action](admin, args))
    except KafkaException as exc:
        raise kafka_error(exc) from None


def existing_topic(admin: Any, name: str, timeout: float) -> Any:
    """The topic's metadata from the full topic list (never creating it).

    Raises:
        CliError: the topic does not exist.
    """
    topic = admin.list_topics(timeout=timeout).topics.get(name)
    if topic is None or topic.error is not None:
        raise CliError(f"topic {name} does not exist")
    return topic


def _list(admin: Any, args: argparse.Namespace) -> int:
    topics = admin.list_topics(timeout=args.timeout).topics
    rows = [
        {"topic": name, "partitions": len(t.partitions), "replication_factor": _replication_factor(t)}
        for name, t in sorted(topics.items())
        if args.internal or name not in INTERNAL_TOPICS
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(box=None)
    for column in ("topic", "partitions", "replicas"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["topic"], str(row["partitions"]), str(row["replication_factor"]))
    Console().print(table)
    return 0


def _replication_factor(topic: Any) -> int:
    return max((len(p.replicas) for p in topic.partitions.values()), default=0)


def _create(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(
        args.name,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        config=_settings("--config", args.config),
    )
    try:
        admin.create_topics([topic], operation_timeout=args.timeout)[args.name].result(args.timeout)
    except KafkaException as exc:
        if args.if_not_exists and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            print(f"topic {args.name} exists already")
            return 0
        raise
    print(f"created topic {args.name}")
    return 0


def _settings(option: str, items: list[str]) -> dict[str, str]:
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{option} {item!r}: expected KEY=VALUE")
        settings[key] = value
    return settings


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType

    topic = existing_topic(admin, args.name, args.timeout)
    partitions = sorted(topic.partitions.items())
    earliest, latest = _offsets(admin, args.name, [p for p, _ in partitions], args.timeout)
    resource = ConfigResource(ResourceType.TOPIC, args.name)
    configs = admin.describe_configs([resource])[resource].result(args.timeout)
    overrides = {k: v.value for k, v in sorted(configs.items()) if not v.is_default}
    brokers = log_dirs.broker_addresses(admin.list_topics(timeout=args.timeout))
    sizes = log_dirs.describe_log_dirs(args, brokers, {args.name: [index for index, _ in partitions]})
    replica_sizes = sizes.sizes(args.name)
    rows = [
        {
            "partition": index, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs),
            "earliest_offset": earliest.get(index), "latest_offset": latest.get(index),
            "size_bytes": replica_sizes.get(index, {}).get(p.leader),
            "replica_size_bytes": {str(b): size for b, size in sorted(replica_sizes.get(index, {}).items())},
        }
        for index, p in partitions
    ]  # fmt: skip
    if args.json:
        document = {"topic": args.name, "internal": args.name in INTERNAL_TOPICS, "configs": overrides}
        print(json.dumps({**document, "partitions": rows}, indent=2))
        return 0
    console = Console()
    console.print(
        f"topic {args.name}: {len(rows)} partitions, replication factor {_replication_factor(topic)}, "
        "settings " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)")
    )
    table = Table(box=None)
    for column in ("partition", "leader", "replicas", "isr", "earliest", "latest", "size"):
        table.add_column(column)
    for row in rows:
        size = row["size_bytes"]
        table.add_row(
            str(row["partition"]), str(row["leader"]), ",".join(map(str, row["replicas"])),
            ",".join(map(str, row["isr"])), _shown(row["earliest_offset"]), _shown(row["latest_offset"]),
            "-" if size is None else log_dirs.human_bytes(size),
        )  # fmt: skip
    console.print(table)
    if sizes.unanswered:
        console.print(f"sizes unknown on brokers {', '.join(map(str, sorted(sizes.unanswered)))} (no answer)")
    return 0


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)


def _offsets(
    admin: Any, topic: str, partitions: list[int], timeout: float
) -> tuple[dict[int, int | None], dict[int, int | None]]:
    """Each partition's earliest and latest offset (None where its leader did not answer)."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    found: list[dict[int, int | None]] = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions}, request_timeout=timeout)
        offsets: dict[int, int | None] = {}
        for tp, future in futures.items():
            try:
                offsets[tp.partition] = int(future.result(timeout).offset)
            except KafkaException:
                offsets[tp.partition] = None
        found.append(offsets)
    return found[0], found[1]


def _delete(admin: Any, args: argparse.Namespace) -> int:
    if args.name in INTERNAL_TOPICS:
        raise CliError(f"topic {args.name} is an internal topic and cannot be deleted")
    if args.name not in admin.list_topics(timeout=args.timeout).topics:
        if args.if_exists:
            print(f"topic {args.name} does not exist")
            return 0
        raise CliError(f"topic {args.name} does not exist")
    admin.delete_topics([args.name], operation_timeout=args.timeout)[args.name].result(args.timeout)
    print(f"deleted topic {args.name}")
    return 0


def _alter_config(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    changes = _settings("--set", args.set)
    if not changes and not args.delete:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY")
    existing_topic(admin, args.name, args.timeout)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in args.delete]
    resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(args.timeout)
    described = ", ".join([*(f"{k}={v}" for k, v in changes.items()), *(f"{k} removed" for k in args.delete)])
    print(f"topic {args.name}: {described}")
    return 0


def _add_partitions(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    current = len(existing_topic(admin, args.name, args.timeout).partitions)
    if args.partitions <= current:
        raise CliError(f"topic {args.name} has {current} partitions already; --partitions must be more")
    request = NewPartitions(args.name, args.partitions)
    admin.create_partitions([request], operation_timeout=args.timeout)[args.name].result(args.timeout)
    print(f"topic {args.name}: {current} -> {args.partitions} partitions")
    return 0


ACTIONS = {
    "list": _list, "create": _create, "describe": _describe, "delete": _delete, "alter-config": _alter_config,
    "add-partitions": _add_partitions,
}  # fmt: skip
