"""`barnabas cluster log-dirs` and the sizes in `topics describe`: DescribeLogDirs, as kafka-log-dirs.sh.

librdkafka has no API for it: the request goes over barnabas's own Kafka client, to every broker at once.
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

from ._client import action_parser, connect_admin
from .errors import CliError

DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION = 35, 4


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
    args: argparse.Namespace, brokers: Mapping[int, str], partitions: Mapping[str, Iterable[int]] | None = None
) -> LogDirs:
    """Ask each broker (id -> host:port) for its log dirs (only the replicas of ``partitions``, topic -> indexes).

    Every broker is asked at once over a connection of its own, within ``--timeout``: a broker that does not
    answer holds up no other broker's answer, and is named in ``unanswered``.
    """
    import asyncio

    wanted = {topic: list(indexes) for topic, indexes in partitions.items()} if partitions is not None else None
    found = LogDirs([], {}, {})
    answers = asyncio.run(_ask_all(brokers, wanted, args.timeout))
    for broker, answer in sorted(answers.items()):
        if isinstance(answer, str):
            found.unanswered[broker] = answer
        else:
            _absorb(found, broker, answer)
    return found


async def _ask_all(
    brokers: Mapping[int, str], wanted: Mapping[str, list[int]] | None, timeout_s: float
) -> dict[int, Any]:
    """Each broker's DescribeLogDirs response, or why there is none."""
    import asyncio

    from barnabas.protocol import request_class

    topic_cls = request_class(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, "DescribableLogDirTopic")
    topics = None if wanted is None else tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in wanted.items())
    body = request_class(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION)(topics=topics)
    addresses = sorted(brokers.items())
    results = await asyncio.gather(*(_ask(address, body, timeout_s) for _, address in addresses))
    return {broker: result for (broker, _), result in zip(addresses, results, strict=True)}


async def _ask(address: str, body: Any, timeout_s: float) -> Any:
    from barnabas.client import BrokerConnectionError, KafkaClient

    host, _, port = address.rpartition(":")
    try:
        async with await KafkaClient.connect(host, int(port), client_id="barnabas-cli", timeout_s=timeout_s) as client:
            return await client.request(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, body)
    except (BrokerConnectionError, TimeoutError, OSError) as exc:
        return f"{address}: {exc or type(exc).__name__}"


def broker_addresses(metadata: Any) -> dict[int, str]:
    """id -> host:port of every broker in a confluent-kafka ClusterMetadata."""
    return {broker_id: f"{broker.host}:{broker.port}" for broker_id, broker in metadata.brokers.items()}


def _absorb(found: LogDirs, broker: int, response: Any) -> None:
    for result in response.results:
        log_dir = str(result.log_dir)
        found.volumes[(broker, log_dir)] = (int(result.total_bytes), int(result.usable_bytes))
        for topic in result.topics:
            for p in topic.partitions:
                found.replicas.append(
                    ReplicaSize(
                        broker,
                        log_dir,
                        str(topic.name),
                        int(p.partition_index),
                        int(p.partition_size),
                        int(p.offset_lag),
                    )
                )


def run(args: argparse.Namespace) -> int:
    from .topics import existing_topic  # topics describe shows sizes from here

    admin = connect_admin(args)
    wanted = None
    if args.topic:
        wanted = {topic: list(existing_topic(admin, topic, args.timeout).partitions) for topic in args.topic}
    found = describe_log_dirs(args, broker_addresses(admin.list_topics(timeout=args.timeout)), wanted)
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
