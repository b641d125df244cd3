"""Replication's cost with and without incremental fetch sessions (KIP-227), barnabas alone.

A 3-broker cluster (embedded SQLite) holds ``--partitions`` partitions (topics of 100, replication
factor 3, min.insync.replicas 2), so each broker follows two thirds of them from the other two. With
every ISR whole, the cluster is first left at rest for ``--idle-seconds`` (each broker's CPU and the
Fetch requests answered: only the followers' long polls), then one producer writes ``--rate``
records/s (acks=all, 100-byte values, over every partition in turn) for ``--seconds``; measured
meanwhile: each broker's CPU (user and system time from /proc), the Fetch requests the brokers
answered (their admin endpoints), and the producer's acknowledgement latency (p50, p99). A follower
fetch returns as soon as any of its partitions has news, so under writes each fetch is answered
quickly, and without sessions each names, and is answered, every partition the follower fetches
from that leader.

Two runs of the same build: sessions on (Kafka's defaults), then off
(``max.incremental.fetch.session.cache.slots=0``: a leader makes no session, and its followers send
full fetches). Writes ``bench/results/fetch-sessions.json`` and ``.md``:

    python bench/fetch_sessions.py [--partitions 3000] [--rate 300] [--seconds 30] [--idle-seconds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import PARTITIONS_PER_TOPIC, cpu_seconds, create_topics  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from barnabas.benchmark._system import environment  # noqa: E402
from barnabas.testing import BrokerCluster  # noqa: E402

SETTINGS = {
    "log.index.size.max.bytes": "65536",
    "min.insync.replicas": "2",
    "admin.listeners": "http://127.0.0.1:0",
}
MODES = {"sessions": {}, "no sessions": {"max.incremental.fetch.session.cache.slots": "0"}}
RESULTS = ROOT / "bench" / "results"


def scraped(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and s.labels.get("request", "Fetch") == "Fetch"
    )


def whole(cluster: BrokerCluster, partitions: int) -> bool:
    md = cluster.metadata(60)
    isrs = [p for t in md.topics.values() if t.topic.startswith("rf3-") for p in t.partitions.values()]
    return len(isrs) == partitions and all(len(p.isrs) == 3 and p.leader >= 0 for p in isrs)


def produce_paced(bootstrap: str, topics: list[str], rate: int, seconds: float) -> list[float]:
    """``rate`` records/s for ``seconds`` over every partition in turn; each acknowledgement's latency (ms)."""
    latencies: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "enable.idempotence": True})

    def acked_from(sent: float) -> Callable[[Any, Any], None]:
        def acked(err: Any, _msg: Any) -> None:
            if err is None:
                latencies.append((time.monotonic() - sent) * 1000)

        return acked

    began = time.monotonic()
    i = 0
    value = b"v" * 100
    while (now := time.monotonic()) - began < seconds:
        due = began + i / rate
        if due > now:
            producer.poll(due - now)
            continue
        topic = topics[i % len(topics)]
        partition = (i // len(topics)) % PARTITIONS_PER_TOPIC
        producer.produce(topic, value, partition=partition, on_delivery=acked_from(now))
        i += 1
        producer.poll(0)
    producer.flush(60)
    return latencies


def run_mode(base: Path, mode: str, partitions: int, *, rate: int, seconds: float, idle_s: float) -> dict[str, Any]:
    cluster = BrokerCluster(base / mode.replace(" ", "-"), 3, properties={**SETTINGS, **MODES[mode]},
                            start_timeout_s=600).start()  # fmt: skip
    try:
        began = time.monotonic()
        topics = create_topics(cluster.bootstrap, partitions, "rf3", replication_factor=3)
        deadline = time.monotonic() + 900
        while not whole(cluster, partitions):
            if time.monotonic() > deadline:
                raise TimeoutError("every ISR whole")
            time.sleep(1)
        created_s = time.monotonic() - began
        pids = [b.pid for b in cluster.brokers if b.pid]
        ports = [b.admin_port for b in cluster.brokers]
        idle_before = [cpu_seconds(pid) for pid in pids]
        idle_fetches = sum(scraped(p, "kafka_network_requestmetrics_requests_total") for p in ports)
        time.sleep(idle_s)  # the cluster at rest: only the followers' fetches
        idle_cpu = [(cpu_seconds(pid) - b) / idle_s for pid, b in zip(pids, idle_before, strict=True)]
        idle_fetches = sum(scraped(p, "kafka_network_requestmetrics_requests_total") for p in ports) - idle_fetches
        cpu_before = [cpu_seconds(pid) for pid in pids]
        fetches_before = sum(scraped(p, "kafka_network_requestmetrics_requests_total") for p in ports)
        started = time.monotonic()
        latencies = produce_paced(cluster.bootstrap, topics, rate, seconds)
        elapsed = time.monotonic() - started
        cpu = [(cpu_seconds(pid) - b) / elapsed for pid, b in zip(pids, cpu_before, strict=True)]
        fetches = sum(scraped(p, "kafka_network_requestmetrics_requests_total") for p in ports) - fetches_before
        incremental = sum(scraped(p, "barnabas_fetch_incremental_total") for p in ports)
        quantiles = statistics.quantiles(latencies, n=100)
        return {
            "mode": mode,
            "created_s": round(created_s, 1),
            "idle_cpu_cores": [round(c, 3) for c in idle_cpu],
            "idle_fetches_per_s": round(idle_fetches / idle_s, 1),
            "cpu_cores": [round(c, 3) for c in cpu],
            "fetches_per_s": round(fetches / elapsed, 1),
            "incremental_fetches": int(incremental),
            "acked": len(latencies),
            "ack_p50_ms": round(statistics.median(latencies), 2),
            "ack_p99_ms": round(quantiles[98], 2),
        }
    finally:
        cluster.stop()


def report(result: dict[str, Any]) -> str:
    lines = [
        "# Replication with and without incremental fetch sessions",
        "",
        f"- measured {result['measured_at']}; {result['environment']}",
        f"- 3 brokers, {result['partitions']:,} partitions, replication factor 3; one producer, "
        f"{result['rate']:,} records/s of 100 B (acks=all), {result['seconds']} s",
        "",
        "| fetch sessions | at rest: CPU per broker (cores) | Fetch/s | producing: CPU per broker | Fetch/s "
        "| incremental fetches | acks | ack p50 | ack p99 |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for run in result["runs"]:
        idle = ", ".join(f"{c:.3f}" for c in run["idle_cpu_cores"])
        cpu = ", ".join(f"{c:.2f}" for c in run["cpu_cores"])
        lines.append(
            f"| {run['mode']} | {idle} | {run['idle_fetches_per_s']:,} | {cpu} | {run['fetches_per_s']:,} "
            f"| {run['incremental_fetches']:,} | {run['acked']:,} | {run['ack_p50_ms']} ms | {run['ack_p99_ms']} ms |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="fetch-sessions-") as tmp:
        for mode in MODES:
            runs.append(
                run_mode(
                    Path(tmp), mode, args.partitions, rate=args.rate, seconds=args.seconds, idle_s=args.idle_seconds
                )
            )
            print(json.dumps(runs[-1]), flush=True)
    env = environment(None)
    result = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "environment": f"{env['cpu_model']}, {env['cpus_usable']} cores, source {env['source']}",
        "partitions": args.partitions,
        "rate": args.rate,
        "seconds": args.seconds,
        "idle_seconds": args.idle_seconds,
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fetch-sessions.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "fetch-sessions.md").write_text(report(result))
    print(report(result))


if __name__ == "__main__":
    main()
