"""`barnabas cluster log-dirs` and the sizes in `topics describe`: DescribeLogDirs, as kafka-log-dirs.sh.

Every broker is asked for its log dirs: the replicas each holds with their size in bytes and
offset lag, and the volume's total and usable bytes. A broker that does not answer is named in
the output rather than failing the whole command (its replicas' sizes are unknown).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ._admin_requests import python_admin
from ._client import action_parser, connect_admin
from .errors import CliError


@dataclass(frozen=True)
class ReplicaSize:
    """One replica on one broker's log dir."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int


@dataclass
class LogDirs:
    """What the brokers said: every replica found, each dir's volume, and the brokers that did not answer."""

    replicas: list[ReplicaSize]
    volumes: dict[tuple[int, str], tuple[int, int]]  # (broker, dir) -> (total, usable) bytes
    unanswered: dict[int, str]

    def sizes(self, topic: str) -> dict[int, dict[int, int]]:
        """partition -> broker -> size in bytes, for one topic."""
        found: dict[int, dict[int, int]] = {}
        for replica in self.replicas:
            if replica.topic == topic:
                found.setdefault(replica.partition, {})[replica.broker] = replica.size_bytes
        return found


def add_action(actions: Any) -> None:
    parser = action_parser(
        actions, "log-dirs", help="each broker's log dirs: replicas, sizes, lag, free space (DescribeLogDirs)"
    )
    parser.add_argument("--topic", "-t", action="append", metavar="TOPIC", help="only these topics (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def describe_log_dirs(
    args: argparse.Namespace, brokers: Iterable[int], partitions: Mapping[str, Iterable[int]] | None = None
) -> LogDirs:
    """Ask each of ``brokers`` for its log dirs (only the replicas of ``partitions``, topic -> indexes, if given).

    The partitions are named, not looked up, so no Metadata request can wait on a broker that does not answer.
    """
    from kafka.errors import KafkaError

    admin = python_admin(args)
    wanted = {topic: list(indexes) for topic, indexes in partitions.items()} if partitions is not None else None
    found = LogDirs([], {}, {})
    try:
        for broker in sorted(brokers):
            try:
                answers = admin.describe_log_dirs(wanted, brokers=[broker])
            except KafkaError as exc:
                found.unanswered[broker] = str(exc) or type(exc).__name__
                continue
            for answer in answers:
                _absorb(found, answer)
    finally:
        admin.close()
    return found


def _absorb(found: LogDirs, answer: dict[str, Any]) -> None:
    broker = int(answer["broker"])
    for result in answer["log_dirs"]:
        found.volumes[(broker, result["log_dir"])] = (result.get("total_bytes", -1), result.get("usable_bytes", -1))
        for topic in result["topics"]:
            for p in topic["partitions"]:
                found.replicas.append(
                    ReplicaSize(
                        broker,
                        result["log_dir"],
                        topic["name"],
                        p["partition_index"],
                        p["partition_size"],
                        p["offset_lag"],
                    )
                )


def run(args: argparse.Namespace) -> int:
    from .topics import existing_topic  # topics describe shows sizes from here

    admin = connect_admin(args)
    wanted = None
    if args.topic:
        wanted = {topic: list(existing_topic(admin, topic, args.timeout).partitions) for topic in args.topic}
    found = describe_log_dirs(args, admin.list_topics(timeout=args.timeout).brokers, wanted)
    replicas = sorted(found.replicas, key=lambda r: (r.broker, r.log_dir, r.topic, r.partition))
    if args.json:
        document = {
            "log_dirs": [
                {"broker": broker, "log_dir": log_dir, "total_bytes": total, "usable_bytes": usable}
                for (broker, log_dir), (total, usable) in sorted(found.volumes.items())
            ],
            "replicas": [asdict(r) for r in replicas],
            "unanswered": {str(b): reason for b, reason in found.unanswered.items()},
        }
        print(json.dumps(document, indent=2))
    else:
        _print(found, replicas)
    if found.unanswered:
        broker, reason = next(iter(found.unanswered.items()))
        raise CliError(f"{len(found.unanswered)} brokers did not answer, e.g. broker {broker}: {reason}")
    return 0


def _print(found: LogDirs, replicas: list[ReplicaSize]) -> None:
    console = Console()
    for (broker, log_dir), (total, usable) in sorted(found.volumes.items()):
        held = [r for r in replicas if (r.broker, r.log_dir) == (broker, log_dir)]
        size = sum(r.size_bytes for r in held)
        console.print(
            f"broker {broker} {log_dir}: {len(held)} replicas, {human_bytes(size)}; "
            f"volume {human_bytes(usable)} free of {human_bytes(total)}"
        )
    table = Table(box=None)
    for column in ("broker", "topic", "partition", "size", "offset lag"):
        table.add_column(column)
    for r in replicas:
        table.add_row(str(r.broker), r.topic, str(r.partition), human_bytes(r.size_bytes), str(r.offset_lag))
    console.print(table)


def human_bytes(count: int) -> str:
    """1536 -> '1.5 KiB'; negative (unknown) -> '-'."""
    if count < 0:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
