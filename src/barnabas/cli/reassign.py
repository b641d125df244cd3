"""`barnabas partitions reassign` and `reassignments`: move replicas between brokers (KIP-455).

As ``kafka-reassign-partitions.sh``: the plan is either ``--topic T --partition N --replicas
1,2,3`` or Kafka's reassignment JSON file (``{"version": 1, "partitions": [{"topic": ...,
"partition": ..., "replicas": [...]}]}``); ``--cancel`` stops the named partitions' ongoing
reassignments instead. Every replica list is checked before anything is sent: no duplicates,
only brokers in the cluster, only partitions that exist. The first replica is the preferred
leader. ``--wait`` follows the moves until ListPartitionReassignments no longer names them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.progress import Progress

from ._admin_requests import error_name, python_admin
from ._client import action_parser, connect_admin, non_negative_int, positive_float
from .errors import CliError

TopicPartition = tuple[str, int]
POLL_S = 0.5
DEFAULT_WAIT_S = 300.0


def add_actions(actions: Any) -> None:
    reassign = action_parser(
        actions, "reassign", help="move partitions' replicas to other brokers, or cancel moves",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )  # fmt: skip
    reassign.add_argument("--topic", help="the topic whose partitions move (with --partition)")
    reassign.add_argument("--partition", "-p", type=non_negative_int, action="append", help="with --topic")
    reassign.add_argument("--replicas", metavar="ID,ID,...", help="the new replica list, preferred leader first")
    reassign.add_argument("--file", type=Path, help="Kafka's reassignment JSON (as kafka-reassign-partitions.sh)")
    reassign.add_argument("--cancel", action="store_true", help="cancel the named partitions' ongoing moves")
    reassign.add_argument(
        "--wait", nargs="?", type=positive_float, const=DEFAULT_WAIT_S, metavar="SECONDS",
        help=f"follow the moves until done (at most SECONDS, default {DEFAULT_WAIT_S:g})",
    )  # fmt: skip
    reassign.add_argument("--json", action="store_true", help="print each partition's outcome as JSON")
    reassign.set_defaults(run=run_reassign)
    listing = action_parser(actions, "reassignments", help="ongoing reassignments (ListPartitionReassignments)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=run_list)


def _replica_list(text: str, where: str) -> list[int]:
    try:
        replicas = [int(item) for item in text.split(",")]
    except ValueError:
        raise CliError(f"{where}: replicas must be broker ids, as in 1,2,3, not {text!r}") from None
    return replicas


def _plan_from_file(path: Path) -> dict[TopicPartition, list[int] | None]:
    try:
        document = json.loads(path.read_text())
        entries = document["partitions"]
        return {
            (str(entry["topic"]), int(entry["partition"])): (
                None if entry.get("replicas") is None else [int(r) for r in entry["replicas"]]
            )
            for entry in entries
        }
    except OSError as exc:
        raise CliError(f"--file {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(
            f"--file {path}: not a reassignment plan ({type(exc).__name__}: {exc}); expected "
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}'
        ) from None


def _plan(args: argparse.Namespace) -> dict[TopicPartition, list[int] | None]:
    if args.file is not None:
        if args.topic or args.partition or args.replicas:
            raise CliError("--file replaces --topic, --partition and --replicas")
        plan = _plan_from_file(args.file)
    else:
        if args.topic is None or not args.partition:
            raise CliError("name the partitions to move: --topic T --partition N (or --file)")
        if args.replicas is None and not args.cancel:
            raise CliError("--replicas is needed (or --cancel)")
        replicas = None if args.cancel else _replica_list(args.replicas, "--replicas")
        plan = {(args.topic, p): replicas for p in sorted(set(args.partition))}
    if args.cancel:
        plan = dict.fromkeys(plan)
    if not plan:
        raise CliError("the plan names no partitions")
    return plan


def _check(admin: Any, plan: dict[TopicPartition, list[int] | None], timeout: float) -> None:
    metadata = admin.list_topics(timeout=timeout)
    brokers = set(metadata.brokers)
    for (topic, partition), replicas in plan.items():
        known = metadata.topics.get(topic)
        if known is None or known.error is not None:
            raise CliError(f"topic {topic} does not exist")
        if partition not in known.partitions:
            raise CliError(f"topic {topic} has no partition {partition} (it has {len(known.partitions)})")
        if replicas is None:
            continue
        if not replicas:
            raise CliError(f"{topic}-{partition}: the replica list is empty")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{topic}-{partition}: replica list {replicas} names a broker twice")
        if unknown := sorted(set(replicas) - brokers):
            raise CliError(
                f"{topic}-{partition}: broker {unknown[0]} is not in the cluster (brokers: "
                f"{','.join(map(str, sorted(brokers)))})"
            )


def run_reassign(args: argparse.Namespace) -> int:
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.errors import KafkaError

    plan = _plan(args)
    _check(connect_admin(args), plan, args.timeout)
    client = python_admin(args)
    try:
        answers = client.alter_partition_reassignments(
            {KafkaPythonPartition(t, p): replicas for (t, p), replicas in plan.items()},
            timeout_ms=int(args.timeout * 1000),
        )
        outcomes = {
            f"{tp.topic}-{tp.partition}": ("cancelled" if args.cancel else "started")
            if error is None
            else error_name(error)
            for tp, error in sorted(answers.items(), key=lambda item: (item[0].topic, item[0].partition))
        }
        started = [(t, p) for (t, p) in plan if outcomes.get(f"{t}-{p}") == "started"]
        if args.wait is not None and started:
            wait_for_reassignments(client, started, args.wait)
            outcomes.update({f"{t}-{p}": "done" for t, p in started})
    except KafkaError as exc:
        raise CliError(f"the controller refused the reassignment: {error_name(exc)}") from None
    finally:
        client.close()
    _report(outcomes, args.json)
    failed = [name for name, outcome in outcomes.items() if outcome not in ("started", "cancelled", "done")]
    if failed:
        raise CliError(f"{len(failed)} partitions were not reassigned, e.g. {failed[0]}: {outcomes[failed[0]]}")
    return 0


def wait_for_reassignments(
    client: Any, moving: list[TopicPartition], limit_s: float, what: str = "reassigning"
) -> None:
    """Follow ``moving`` with a progress bar until ListPartitionReassignments names none of them.

    Raises:
        CliError: some still move after ``limit_s``.
    """
    from kafka import TopicPartition as KafkaPythonPartition

    wanted = [KafkaPythonPartition(t, p) for t, p in moving]
    deadline = time.monotonic() + limit_s
    with Progress(transient=True) as progress:
        task = progress.add_task(what, total=len(wanted))
        while True:
            ongoing = client.list_partition_reassignments(wanted)
            progress.update(task, completed=len(wanted) - len(ongoing))
            if not ongoing:
                return
            if time.monotonic() >= deadline:
                tp = next(iter(ongoing))
                raise CliError(
                    f"{len(ongoing)} partitions still moving after {limit_s:g} s, e.g. {tp.topic}-{tp.partition} "
                    f"adding {ongoing[tp]['adding_replicas']}"
                )
            time.sleep(POLL_S)


def _report(outcomes: dict[str, str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(outcomes, indent=2))
        return
    for name, outcome in outcomes.items():
        print(f"{name}: {outcome}")


def run_list(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    connect_admin(args)
    client = python_admin(args)
    try:
        ongoing = client.list_partition_reassignments(timeout_ms=int(args.timeout * 1000))
    except KafkaError as exc:
        raise CliError(f"could not list reassignments: {error_name(exc)}") from None
    finally:
        client.close()
    rows = {
        f"{tp.topic}-{tp.partition}": {
            "replicas": state["replicas"], "adding": state["adding_replicas"], "removing": state["removing_replicas"],
        }
        for tp, state in sorted(ongoing.items(), key=lambda item: (item[0].topic, item[0].partition))
    }  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no reassignment in progress")
    else:
        for name, row in rows.items():
            print(f"{name}: replicas {row['replicas']}, adding {row['adding']}, removing {row['removing']}")
    return 0
