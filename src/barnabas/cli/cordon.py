"""`barnabas cluster cordon|uncordon --broker N`: keep new replicas off a broker, or let them on again.

A cordoned broker (Kafka's KIP-1066, for a whole broker) keeps serving what it holds, but replica
placement for new topics and new partitions leaves it out; ``cluster decommission`` cordons the
broker it empties first. The mark is Kafka's broker config ``cordoned.log.dirs=*`` on broker N
(``kafka-configs.sh --entity-type brokers --entity-name N --alter --add-config
cordoned.log.dirs=*`` does the same), sent to whichever bootstrap broker answers, so a broker that
is down can be cordoned or uncordoned too. Which live brokers are cordoned is read back with
DescribeConfigs, each broker answering for itself (``cluster status`` shows it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from ._any_broker import request_any_broker
from ._client import action_parser, non_negative_int
from .errors import CliError

__all__ = ["add_actions", "cordoned_brokers", "set_cordon"]

INCREMENTAL_ALTER_CONFIGS, VERSION = 44, 1
BROKER_RESOURCE, SET, DELETE = 4, 0, 1
CORDONED_LOG_DIRS = "cordoned.log.dirs"


def add_actions(actions: Any) -> None:
    for name, cordoned, summary in (
        ("cordon", True, "place no new replica on a broker (it keeps what it holds)"),
        ("uncordon", False, "let new replicas be placed on a cordoned broker again"),
    ):
        parser = action_parser(
            actions, name, help=summary,
            description=f"{summary[0].upper()}{summary[1:]}: Kafka's cordoned.log.dirs=* (KIP-1066) on broker ID, "
            "set through any broker, so a stopped broker can be named too. New topics and new partitions are "
            "placed on the other live brokers; explicit assignments and reassignments may still name it.",
        )  # fmt: skip
        parser.add_argument("--broker", type=non_negative_int, required=True, metavar="ID", help="the broker id")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
        parser.set_defaults(run=_run, cordoned=cordoned)


def set_cordon(args: argparse.Namespace, broker_id: int, cordoned: bool) -> None:
    """Cordon broker ``broker_id``, or lift its cordon, through any bootstrap broker.

    Raises:
        CliError: no broker answered, or the change was refused.
    """
    from barnabas.protocol import ErrorCode, request_class

    config = request_class(INCREMENTAL_ALTER_CONFIGS, VERSION, "AlterableConfig")(
        name=CORDONED_LOG_DIRS, config_operation=SET if cordoned else DELETE, value="*" if cordoned else None
    )
    resource = request_class(INCREMENTAL_ALTER_CONFIGS, VERSION, "AlterConfigsResource")(
        resource_type=BROKER_RESOURCE, resource_name=str(broker_id), configs=(config,)
    )
    body = request_class(INCREMENTAL_ALTER_CONFIGS, VERSION)(resources=(resource,), validate_only=False)
    answer = request_any_broker(args, INCREMENTAL_ALTER_CONFIGS, VERSION, body)
    (result,) = answer.responses
    if result.error_code != ErrorCode.none:
        raise CliError(f"{'cordoning' if cordoned else 'uncordoning'} broker {broker_id} was refused: "
                       f"{result.error_code.name.upper()}: {result.error_message or ''}".rstrip(": "))  # fmt: skip


def cordoned_brokers(admin: Any, broker_ids: Iterable[int], timeout: float) -> set[int]:
    """Which of ``broker_ids`` (live brokers) are cordoned, each asked for its ``cordoned.log.dirs``.

    The brokers are asked at once (librdkafka takes one broker resource per call); one that does
    not answer is taken as not cordoned.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    resources = {broker_id: ConfigResource(ResourceType.BROKER, str(broker_id)) for broker_id in sorted(broker_ids)}
    asked = {broker_id: admin.describe_configs([r], request_timeout=timeout) for broker_id, r in resources.items()}
    found = set()
    for broker_id, futures in asked.items():
        try:
            (entries,) = (future.result(timeout=timeout) for future in futures.values())
        except (KafkaException, TimeoutError):
            continue
        entry = entries.get(CORDONED_LOG_DIRS)
        if entry is not None and entry.value == "*":
            found.add(broker_id)
    return found


def _run(args: argparse.Namespace) -> int:
    broker_id: int = args.broker
    set_cordon(args, broker_id, args.cordoned)
    if args.json:
        print(json.dumps({"broker": broker_id, "cordoned": args.cordoned}))
    elif args.cordoned:
        print(f"broker {broker_id} is cordoned: new partitions are not placed on it")
    else:
        print(f"broker {broker_id} is not cordoned: new partitions may be placed on it")
    return 0
