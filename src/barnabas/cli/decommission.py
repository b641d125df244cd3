"""`barnabas cluster decommission --broker N`: move every replica off broker N, so it can be removed.

Scaling a StatefulSet down removes its highest ordinal, whatever that broker holds; Strimzi refuses a
scale-down while the broker has replicas. This command is the step before, in Kafka's order
(cordon, reassign, stop, unregister): by broker id (never by pod ordinal or position), it plans a
new replica list for every partition with a replica on N — N's slot taken by the remaining broker
that holds the fewest replicas, preferring a rack the partition does not use yet, never a cordoned
one — and refuses a plan that cannot be made (a replication factor as large as the brokers left)
before anything changes. Then it cordons N (``cordoned.log.dirs=*``, KIP-1066: no new topic or
partition is placed on it from now on), sends the plan as one reassignment (KIP-455, as
``kafka-reassign-partitions.sh --execute``), follows it with a progress bar, and checks the
metadata until no partition names N. Only then does it say N can be removed (exit 0): stopped,
then forgotten with ``cluster unregister``. A topic whose creation was under way as the cordon
was written may still land on N: the command plans again, a few rounds. N stays cordoned.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ._admin_requests import error_name, python_admin
from ._client import action_parser, connect_admin, non_negative_int, positive_float
from .cordon import cordoned_brokers, set_cordon
from .errors import CliError
from .reassign import wait_for_reassignments

TopicPartition = tuple[str, int]
DEFAULT_WAIT_S = 600.0
DESCRIPTION = (
    "Move every replica off broker ID (a broker id, not a pod ordinal) so it can be removed: each partition "
    "with a replica there gets that slot moved to the remaining broker holding the fewest replicas, a rack the "
    "partition does not use yet first (cordoned brokers take none). The broker is cordoned first, so no new "
    "topic lands on it; the moves go out as one reassignment and are followed until no partition names the "
    "broker; only then does the command say it is safe to remove (exit 0): stop it, then `cluster unregister`. "
    "A plan that cannot be made (a replication factor as large as the brokers left) is refused before anything "
    "changes. `cluster uncordon` lifts the cordon of a broker that stays."
)
#: Plans made at most: a partition placed on N as the cordon was written is moved by the next.
ROUNDS = 3
#: Seconds between Metadata reads while moves settle.
POLL_S = 0.2
#: Answers that leave a move for the next plan rather than failing the command.
RETRIABLE = frozenset({"REQUEST_TIMED_OUT", "NOT_CONTROLLER"})


@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]


def add_action(actions: Any) -> None:
    parser = action_parser(
        actions, "decommission", help="move every replica off a broker (by broker id) so it can be removed",
        description=DESCRIPTION,
    )  # fmt: skip
    parser.add_argument("--broker", type=non_negative_int, required=True, metavar="ID", help="the broker id to empty")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")
    parser.add_argument(
        "--wait", type=positive_float, default=DEFAULT_WAIT_S, metavar="SECONDS",
        help=f"how long the moves may take (default {DEFAULT_WAIT_S:g})",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.set_defaults(run=run)


def plan_moves(
    replicas: Mapping[TopicPartition, tuple[int, ...]],
    leaving: int,
    brokers: Mapping[int, str | None],
    left_out: Collection[int] = (),
) -> list[Move]:
    """New replica lists without ``leaving``: each of its slots to the least-loaded broker, new racks first.

    ``brokers`` maps every broker that may take replicas to its rack (``leaving`` is ignored there);
    ``left_out`` names the live brokers that may not (cordoned), for the refusal's message.

    Raises:
        CliError: a partition has no broker left that does not hold it already.
    """
    staying = {broker: rack for broker, rack in brokers.items() if broker != leaving}
    load = Counter({broker: 0 for broker in staying})
    load.update(r for rs in replicas.values() for r in rs if r in staying)
    moves = []
    for (topic, partition), before in sorted(replicas.items()):
        if leaving not in before:
            continue
        candidates = [broker for broker in staying if broker not in before]
        if not candidates:
            cordoned = f" (cordoned, so left out: {', '.join(map(str, sorted(left_out)))})" if left_out else ""
            raise CliError(
                f"cannot decommission broker {leaving}: {topic}-{partition} has {len(before)} replicas and only "
                f"{len(staying)} other brokers could hold them{cordoned}; add a broker or lower its replication "
                "factor first"
            )
        racks_used = {staying.get(r) for r in before if r != leaving}
        chosen = min(candidates, key=lambda b: (staying[b] is not None and staying[b] in racks_used, load[b], b))
        load[chosen] += 1
        after = tuple(chosen if r == leaving else r for r in before)
        moves.append(Move(topic, partition, before, after))
    return moves


def _placement(admin: Any, timeout: float) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None]]:
    """Every partition's replicas (internal topics too) and every registered broker's rack (cordoned ones too)."""
    metadata = admin.list_topics(timeout=timeout)
    replicas = {
        (name, partition.id): tuple(partition.replicas)
        for name, topic in metadata.topics.items()
        if topic.error is None
        for partition in topic.partitions.values()
    }
    describe = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    racks = {int(node.id): node.rack or None for node in describe.nodes}
    return replicas, racks


def _send(args: argparse.Namespace, moves: list[Move], leaving: int) -> None:
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.errors import KafkaError

    client = python_admin(args)
    try:
        try:
            answers = client.alter_partition_reassignments(
                {KafkaPythonPartition(m.topic, m.partition): list(m.after) for m in moves},
                timeout_ms=int(args.timeout * 1000),
            )
        except KafkaError as exc:
            if error_name(exc) not in RETRIABLE:
                raise CliError(f"the controller refused the reassignment: {error_name(exc)}") from None
            answers = {}  # some moves may have started: followed below, the rest planned again
        errors = {f"{tp.topic}-{tp.partition}": error_name(error) for tp, error in answers.items() if error}
        refused = {name: reason for name, reason in errors.items() if reason not in RETRIABLE}
        if refused:
            name, reason = sorted(refused.items())[0]
            raise CliError(f"the controller refused {len(refused)} moves, e.g. {name}: {reason}")
        # Followed until none moves, so that the next plan sees settled replica lists, never one mid-move.
        wait_for_reassignments(client, [(m.topic, m.partition) for m in moves], args.wait, f"emptying broker {leaving}")
    finally:
        client.close()


def run(args: argparse.Namespace) -> int:
    leaving: int = args.broker
    admin = connect_admin(args)
    started = time.monotonic()
    moves = _plan(admin, leaving, args.timeout)  # refused here, before anything changes
    if args.dry_run:
        _report(leaving, moves, 0.0, args.json, done=False)
        return 0
    set_cordon(args, leaving, cordoned=True)
    moved: list[Move] = []
    for _ in range(ROUNDS):
        if moves:
            _send(args, moves, leaving)
            _wait_settled(admin, moves, args.wait, args.timeout)
            moved += moves
        moves = _plan(admin, leaving, args.timeout)
        if not moves:
            break
    else:
        replicas, _ = _placement(admin, args.timeout)
        left = sorted(tp for tp, rs in replicas.items() if leaving in rs)
        if left:
            topic, partition = left[0]
            raise CliError(
                f"broker {leaving} still holds {len(left)} replicas after {ROUNDS} plans, e.g. {topic}-{partition}: "
                "are topics being created on it all the time?"
            )
    _report(leaving, moved, time.monotonic() - started, args.json, done=True)
    return 0


def settled(replicas: Mapping[TopicPartition, tuple[int, ...]], moves: Collection[Move]) -> bool:
    """Whether ``replicas`` (a Metadata answer) shows every move done: its partition held by its new brokers only.

    A reassignment lists the old and new brokers together until it completes, and a broker's view may
    trail the controller's by a moment: planned from such a view, a partition of replication factor 3 on
    4 brokers seemed to have 4 replicas and nowhere to go.
    """
    for move in moves:
        now = replicas.get((move.topic, move.partition))
        if now is not None and set(now) != set(move.after):  # (a partition gone with its topic is done)
            return False
    return True


def _wait_settled(admin: Any, moves: list[Move], wait_s: float, timeout: float) -> None:
    """Poll Metadata until it shows ``moves`` done (at most ``wait_s``); the next plan then starts from there."""
    deadline = time.monotonic() + wait_s
    while not settled(_placement(admin, timeout)[0], moves) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _plan(admin: Any, leaving: int, timeout: float) -> list[Move]:
    """The moves that empty ``leaving`` now, onto the live brokers that are not cordoned."""
    replicas, brokers = _placement(admin, timeout)
    cordoned = cordoned_brokers(admin, (b for b in brokers if b != leaving), timeout)
    eligible = {broker: rack for broker, rack in brokers.items() if broker not in cordoned}
    return plan_moves(replicas, leaving, eligible, cordoned)


def _report(leaving: int, moves: list[Move], seconds: float, as_json: bool, *, done: bool) -> None:
    if as_json:
        document = {
            "broker": leaving,
            "moves": [{"topic": m.topic, "partition": m.partition, "from": m.before, "to": m.after} for m in moves],
            "seconds": round(seconds, 3),
            "cordoned": done,
            "safe_to_remove": done,
        }
        print(json.dumps(document, indent=2))
        return
    for m in moves:
        print(f"{m.topic}-{m.partition}: {list(m.before)} -> {list(m.after)}")
    then = f"stop it, then `barnabas cluster unregister --broker {leaving}`"
    if not done:
        print(f"dry run: {len(moves)} partitions would move off broker {leaving}")
    elif moves:
        print(f"moved {len(moves)} replicas off broker {leaving} in {seconds:.1f} s; it holds none now and is "
              f"cordoned: safe to remove ({then})")  # fmt: skip
    else:
        print(f"broker {leaving} holds no replicas and is cordoned: safe to remove ({then})")
