"""`barnabas topics`: list, create, describe and delete topics with the Kafka admin API."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from ._client import add_bootstrap, kafka_error
from .errors import CliError

TIMEOUT_S = 30


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("topics", help="list, create, describe, delete topics")
    add_bootstrap(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="list topics")
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", "-p", type=int, default=-1)
    create.add_argument("--replication-factor", "-r", type=int, default=-1)
    create.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE")
    describe = actions.add_parser("describe", help="show partitions and configs of a topic")
    describe.add_argument("name")
    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("name")
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
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    for name in sorted(metadata.topics):
        print(name)
    return 0


def _create(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--config {item!r}: expected KEY=VALUE")
        configs[key] = value
    topic = NewTopic(
        args.name, num_partitions=args.partitions, replication_factor=args.replication_factor, config=configs
    )
    admin.create_topics([topic], operation_timeout=TIMEOUT_S)[args.name].result(TIMEOUT_S)
    print(f"created topic {args.name}")
    return 0


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType

    metadata = admin.list_topics(topic=args.name, timeout=TIMEOUT_S)
    topic = metadata.topics.get(args.name)
    if topic is None or topic.error is not None:
        raise CliError(f"topic {args.name}: {topic.error.str() if topic and topic.error else 'not found'}")
    table = Table(title=f"{args.name}")
    for column in ("partition", "leader", "replicas", "isr"):
        table.add_column(column)
    for index, partition in sorted(topic.partitions.items()):
        table.add_row(
            str(index),
            str(partition.leader),
            ",".join(map(str, partition.replicas)),
            ",".join(map(str, partition.isrs)),
        )
    console = Console()
    console.print(table)
    resource = ConfigResource(ResourceType.TOPIC, args.name)
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    overrides = {k: v.value for k, v in sorted(configs.items()) if not v.is_default}
    console.print("configs: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"))
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    admin.delete_topics([args.name], operation_timeout=TIMEOUT_S)[args.name].result(TIMEOUT_S)
    print(f"deleted topic {args.name}")
    return 0


ACTIONS = {"list": _list, "create": _create, "describe": _describe, "delete": _delete}
