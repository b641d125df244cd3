"""`barnabas cluster unregister --broker N`: forget a removed broker, as ``kafka-cluster.sh unregister --id N``.

The last step of removing a broker: after ``cluster decommission`` emptied it and it was stopped,
UnregisterBroker (API 64, to any broker) deletes what the cluster keeps about the id (its claim on
its log dirs and its cordon), so a broker started later with that id on a new, empty disk joins as
a new broker instead of being refused. Refused in one line while the broker runs or still holds
replicas, and for an id the cluster does not know.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._any_broker import request_any_broker
from ._client import action_parser, non_negative_int
from .errors import CliError

UNREGISTER_BROKER, VERSION = 64, 0
DESCRIPTION = (
    "Forget broker ID once it is removed (Kafka's kafka-cluster.sh unregister): its claim on its log dirs and "
    "its cordon are deleted, so a new broker may take the id on a new, empty disk. Refused while the broker runs "
    "or while any partition still names it a replica (run `cluster decommission --broker ID` first)."
)


def add_action(actions: Any) -> None:
    parser = action_parser(
        actions, "unregister", help="forget a stopped, emptied broker so its id can be reused (UnregisterBroker)",
        description=DESCRIPTION,
    )  # fmt: skip
    parser.add_argument("--broker", type=non_negative_int, required=True, metavar="ID", help="the broker id")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from barnabas.protocol import ErrorCode, request_class

    broker_id: int = args.broker
    body = request_class(UNREGISTER_BROKER, VERSION)(broker_id=broker_id)
    answer = request_any_broker(args, UNREGISTER_BROKER, VERSION, body)
    if answer.error_code != ErrorCode.none:
        reason = answer.error_message or answer.error_code.name.upper()
        raise CliError(f"cannot unregister broker {broker_id}: {reason}")
    if args.json:
        print(json.dumps({"broker": broker_id, "unregistered": True}))
    else:
        print(f"broker {broker_id} is no longer registered: a new broker may take its id on a new disk")
    return 0
