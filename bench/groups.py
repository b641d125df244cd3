"""Consumer groups: rebalance time for 10 members and OffsetCommit throughput.

Starts real ``barnabas broker`` processes (embedded coordination) and, in the same run, measures
with librdkafka consumers (confluent-kafka, one thread each, eager ``range`` assignment):

1. Rebalance time, ``--rounds`` times each: *cold* — 10 members subscribe to a new group at once,
   time until every member has its assignment and the 12 partitions are owned exactly once
   (``group.initial.rebalance.delay.ms=0``, and once with Kafka's default 3000 ms); *join* — an
   11th member joins the stable group; *leave* — one member closes (LeaveGroup).
2. OffsetCommit: one consumer commits 12 partitions' offsets synchronously in a loop for
   ``--seconds``; commits per second and latency, on one broker and on a 3-broker cluster
   (``__consumer_offsets`` replicated 3 ways, every commit waits for all in-sync replicas).

Writes bench/results/groups.json and groups.md:

    python bench/groups.py [--rounds 5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from barnabas.benchmark._system import environment  # noqa: E402
from barnabas.testing import Broker, BrokerCluster  # noqa: E402

MEMBERS = 10
PARTITIONS = 12
POLL_S = 0.05


class Member:
    """One consumer in its own thread, polling; ``owned`` is what its rebalance callbacks gave it."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
            }
        )
        self.owned: set[int] = set()
        self.generation_seen = 0
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assign(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned = {p.partition for p in partitions}
        self.generation_seen += 1

    def _revoke(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned = set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(POLL_S)
        self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def settled(members: list[Member]) -> bool:
    owned = [p for m in members for p in m.owned]
    return sorted(owned) == list(range(PARTITIONS)) and all(m.owned for m in members)


def wait(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.005)
    return time.monotonic() - start


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)


def moved_on(members: list[Member], before: list[int]) -> Callable[[], bool]:
    """Settled again, with every member past the rebalance it was in (``before``: generations seen)."""
    return lambda: settled(members) and all(m.generation_seen > b for m, b in zip(members, before, strict=True))


def rebalances(bootstrap: str, rounds: int, tag: str) -> dict[str, list[float]]:
    topic = f"rebalanced-{tag}"
    create_topic(bootstrap, topic, PARTITIONS)
    times: dict[str, list[float]] = {"cold": [], "join": [], "leave": []}
    for round_no in range(rounds):
        group = f"bench-{tag}-{round_no}"
        start = time.monotonic()
        members = [Member(bootstrap, topic, group) for _ in range(MEMBERS)]
        wait(moved_on(members, [0] * MEMBERS), "10 members settled")
        times["cold"].append(time.monotonic() - start)
        before = [m.generation_seen for m in members]
        start = time.monotonic()
        members.append(Member(bootstrap, topic, group))
        wait(moved_on(members, [*before, 0]), "join")
        times["join"].append(time.monotonic() - start)
        before = [m.generation_seen for m in members[1:]]
        start = time.monotonic()
        members.pop(0).close()
        wait(moved_on(members, before), "leave")
        times["leave"].append(time.monotonic() - start)
        for member in members:
            member.close()
        print(f"  {tag} round {round_no + 1}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in times.items()))
    return times


def commits(bootstrap: str, seconds: float, tag: str) -> dict[str, float]:
    topic = f"committed-{tag}"
    create_topic(bootstrap, topic, PARTITIONS)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"committer-{tag}", "enable.auto.commit": False})
    latencies: list[float] = []
    offset = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            offset += 1
            batch = [TopicPartition(topic, p, offset) for p in range(PARTITIONS)]
            start = time.monotonic()
            consumer.commit(offsets=batch, asynchronous=False)
            latencies.append(time.monotonic() - start)
    finally:
        consumer.close()
    latencies.sort()
    return {
        "commits_per_s": len(latencies) / seconds,
        "partitions_per_commit": PARTITIONS,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(values) * 1000, "max_ms": max(values) * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    started = time.monotonic()
    results: dict[str, Any] = {"environment": environment(None), "rebalance": {}, "commit": {}}
    with tempfile.TemporaryDirectory(prefix="barnabas-groups-bench-") as tmp:
        base = Path(tmp)
        for delay in ("0", "3000"):
            broker = Broker(base / f"single-{delay}", properties={"group.initial.rebalance.delay.ms": delay})
            broker.start()
            try:
                rounds = args.rounds if delay == "0" else 1
                times = rebalances(broker.bootstrap, rounds, f"delay{delay}")
                results["rebalance"][f"initial delay {delay} ms"] = {k: summary(v) for k, v in times.items()}
                if delay == "0":
                    results["commit"]["1 broker"] = commits(broker.bootstrap, args.seconds, "single")
                    print(f"  1 broker: {results['commit']['1 broker']['commits_per_s']:.0f} commits/s")
            finally:
                broker.kill()
        (base / "cluster").mkdir()
        cluster = BrokerCluster(base / "cluster", 3, properties={"group.initial.rebalance.delay.ms": "0"}).start()
        try:
            results["commit"]["3 brokers, RF 3"] = commits(cluster.bootstrap, args.seconds, "cluster")
            print(f"  3 brokers: {results['commit']['3 brokers, RF 3']['commits_per_s']:.0f} commits/s")
        finally:
            cluster.stop()
    results["took_s"] = time.monotonic() - started
    write(args.output, results, args)
    return 0


def write(output: Path, results: dict[str, Any], args: argparse.Namespace) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "groups.json").write_text(json.dumps(results, indent=2) + "\n")
    env = results["environment"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S%z")
    lines = [
        f"# Consumer groups ({now})",
        "",
        f"`python bench/groups.py` on one broker (embedded coordination): {MEMBERS} librdkafka consumers (threads "
        f"of one process, eager `range`), a {PARTITIONS}-partition topic, {args.rounds} rounds. *cold*: all "
        f"subscribe to a new group at once, until each has its share; *join*: an 11th member joins; *leave*: "
        f"one member closes. Machine: {env.get('cpu_count', '?')} CPUs; the run took {results['took_s']:.0f} s.",
        "",
        "| group.initial.rebalance.delay.ms | cold p50 | max | join p50 | max | leave p50 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, kinds in results["rebalance"].items():
        cells = " | ".join(
            f"{kinds[k]['p50_ms']:.0f} ms | {kinds[k]['max_ms']:.0f} ms" for k in ("cold", "join", "leave")
        )
        lines.append(f"| {name.removeprefix('initial delay ')} | {cells} |")
    lines += [
        "",
        f"OffsetCommit: one consumer, synchronous commits of {PARTITIONS} partitions each, {args.seconds:.0f} s.",
        "",
        "| cluster | commits/s | partition offsets/s | p50 | p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, c in results["commit"].items():
        lines.append(
            f"| {name} | {c['commits_per_s']:.0f} | {c['commits_per_s'] * PARTITIONS:.0f} | "
            f"{c['p50_ms']:.1f} ms | {c['p99_ms']:.1f} ms |"
        )
    (output / "groups.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
