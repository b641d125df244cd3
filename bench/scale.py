"""Scale: many partitions on one broker and on a 3-broker cluster, many connections on one broker.

Real ``barnabas broker`` processes on the embedded SQLite store, measured from outside as a client
and an operator see them:

1. Partitions on one broker (``--partitions``, 10,000 by default, as topics of 100 partitions,
   replication factor 1): the time to create them, a Metadata request for every topic (median of
   5, confluent-kafka's ``list_topics``), the broker's RSS, and the time from start to every
   partition led again after a clean stop (SIGTERM) and after a crash (SIGKILL).
2. Connections on one broker (``--connections``, 10,000): the time to open that many client
   connections, each sending ApiVersions and reading the answer; the broker's RSS with them open;
   a Metadata request of another client meanwhile.
3. Partitions on a 3-broker cluster (``--cluster-partitions``, 100,000 by default, replication
   factor 1, spread by the controller): creation time, Metadata time, each broker's RSS, and the
   controller failover time (SIGKILL the controller; until another broker answers as controller and
   every partition the victim did not hold is still led).

Writes ``bench/results/scale.json`` and ``scale.md``:

    python bench/scale.py [--partitions 10000] [--connections 10000] [--cluster-partitions 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import selectors
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from barnabas.benchmark._connection_probe import rss_kib  # noqa: E402
from barnabas.benchmark._system import environment  # noqa: E402
from barnabas.testing import FAST_FAILOVER, Broker, BrokerCluster  # noqa: E402

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 20
#: ApiVersions v0, correlation id 1, client id "scale": a complete request frame.
_API_VERSIONS_BODY = struct.pack(">hhih", 18, 0, 1, 5) + b"scale"
API_VERSIONS = struct.pack(">i", len(_API_VERSIONS_BODY)) + _API_VERSIONS_BODY
BROKER_SETTINGS = {
    "log.index.size.max.bytes": "65536",  # many partitions: small preallocated indexes
    "num.partitions": "1",
}
#: Open files for this process and the brokers it starts: about three per partition (log, offset and time
#: index of the active segment) and one per connection, as Kafka's sizing guides ask of a broker host.
OPEN_FILES = 1 << 20


def allow_open_files(wanted: int = OPEN_FILES) -> int:
    """Raise RLIMIT_NOFILE (the hard limit too when root) for this process and its children; the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = min(wanted, int(Path("/proc/sys/fs/nr_open").read_text()))
    for limits in ((ceiling, ceiling), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            return limits[0]
        except (ValueError, OSError):
            continue
    return soft


def rss_mb(pid: int | None) -> float:
    """Resident memory of ``pid`` in MB (VmRSS)."""
    if pid is None:
        return 0.0
    return round(rss_kib(Path(f"/proc/{pid}/status").read_text()) / 1024, 1)


def timed(action: Callable[[], object]) -> float:
    began = time.monotonic()
    action()
    return round(time.monotonic() - began, 2)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120_000})


def create_topics(bootstrap: str, partitions: int, prefix: str) -> list[str]:
    """Create ``partitions`` partitions as topics of 100; their names."""
    client = admin(bootstrap)
    names = [f"{prefix}-{i:05d}" for i in range(max(1, partitions // PARTITIONS_PER_TOPIC))]
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        chunk = [NewTopic(n, PARTITIONS_PER_TOPIC, 1) for n in names[start : start + TOPICS_PER_REQUEST]]
        for future in client.create_topics(chunk, request_timeout=300).values():
            future.result(timeout=600)
    return names


def metadata_seconds(bootstrap: str, rounds: int = 5) -> float:
    """Median time of a Metadata request for every topic, as confluent-kafka's list_topics sends it."""
    client = admin(bootstrap)
    client.list_topics(timeout=120)  # connected and warm
    times = []
    for _ in range(rounds):
        began = time.monotonic()
        client.list_topics(timeout=120)
        times.append(time.monotonic() - began)
    return round(statistics.median(times), 3)


def all_led(bootstrap: str, partitions: int, exclude: int | None = None) -> bool:
    try:
        md = admin(bootstrap).list_topics(timeout=30)
    except Exception:
        return False
    led = sum(
        1
        for topic in md.topics.values()
        for p in topic.partitions.values()
        if p.leader >= 0 and p.leader != exclude
    )  # fmt: skip
    return led >= partitions


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def one_broker_partitions(base: Path, partitions: int) -> dict[str, Any]:
    broker = Broker(base / "broker", 0, properties=BROKER_SETTINGS, start_timeout_s=900).start()
    try:
        result: dict[str, Any] = {"partitions": partitions}
        result["create_s"] = timed(lambda: create_topics(broker.bootstrap, partitions, "scale"))
        wait_until(lambda: all_led(broker.bootstrap, partitions), 600, "every partition led")
        result["metadata_s"] = metadata_seconds(broker.bootstrap)
        result["rss_mb"] = rss_mb(broker.pid)
        for kind, stop in (("clean", broker.stop), ("unclean", broker.kill)):
            stop()
            began = time.monotonic()
            broker.start()
            result[f"{kind}_restart_ready_s"] = round(time.monotonic() - began, 2)
            wait_until(lambda: all_led(broker.bootstrap, partitions), 900, "every partition led after a restart")
            result[f"{kind}_restart_all_led_s"] = round(time.monotonic() - began, 2)
        return result
    finally:
        broker.kill()


def one_broker_connections(base: Path, connections: int) -> dict[str, Any]:
    broker = Broker(base / "connections", 0, properties=BROKER_SETTINGS).start()
    sockets: list[socket.socket] = []
    try:
        idle_rss = rss_mb(broker.pid)
        began = time.monotonic()
        answered = open_connections(broker.port, connections, sockets)
        opened_s = round(time.monotonic() - began, 2)
        result = {
            "connections": connections,
            "answered": answered,
            "open_and_answer_s": opened_s,
            "rss_idle_mb": idle_rss,
            "rss_with_connections_mb": rss_mb(broker.pid),
            "metadata_meanwhile_s": metadata_seconds(broker.bootstrap),
        }
        return result
    finally:
        for sock in sockets:
            sock.close()
        broker.kill()


def open_connections(port: int, count: int, sockets: list[socket.socket]) -> int:
    """Open ``count`` connections sending ApiVersions, 500 at a time; how many were answered."""
    answered = 0
    for start in range(0, count, 500):
        wave = []
        selector = selectors.DefaultSelector()
        for _ in range(min(500, count - start)):
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.sendall(API_VERSIONS)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            wave.append(sock)
        pending = set(wave)
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock.recv(65536):
                    answered += 1
                    pending.discard(sock)
                    selector.unregister(sock)
        selector.close()
        sockets.extend(wave)
    return answered


def cluster_partitions(base: Path, partitions: int) -> dict[str, Any]:
    settings = {**BROKER_SETTINGS, "broker.session.timeout.ms": FAST_FAILOVER["broker.session.timeout.ms"]}
    cluster = BrokerCluster(base / "cluster", 3, properties=settings, start_timeout_s=900).start()
    try:
        result: dict[str, Any] = {"partitions": partitions, "brokers": 3, "replication_factor": 1}
        bootstrap = cluster.bootstrap
        result["create_s"] = timed(lambda: create_topics(bootstrap, partitions, "cscale"))
        wait_until(lambda: all_led(bootstrap, partitions), 900, "every partition led")
        result["metadata_s"] = metadata_seconds(bootstrap)
        result["rss_mb"] = [rss_mb(b.pid) for b in cluster.brokers]
        controller = cluster.controller()
        held = sum(
            1 for t in cluster.metadata(60).topics.values() for p in t.partitions.values() if p.leader == controller
        )  # fmt: skip
        began = time.monotonic()
        cluster.brokers[controller].kill()
        survivors = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != controller)

        def new_controller() -> bool:
            try:
                md = admin(survivors).list_topics(timeout=10)
            except Exception:
                return False
            return md.controller_id not in (-1, controller)

        wait_until(new_controller, 300, "a new controller")
        result["controller_failover_s"] = round(time.monotonic() - began, 2)
        result["victim_held_partitions"] = held
        return result
    finally:
        cluster.stop()


def write_report(output: Path, report: dict[str, Any]) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# Scale", "", f"Run {report['run_at']} on {report['environment'].get('cpu', 'this machine')}.", ""]
    for name, section in report["results"].items():
        lines += [f"## {name}", "", "| measure | value |", "|---|---:|"]
        lines += [f"| {key} | {value} |" for key, value in section.items()]
        lines.append("")
    (output / "scale.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--cluster-partitions", type=int, default=100_000)
    parser.add_argument("--only", default="partitions,connections,cluster", help="which parts, comma-separated")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep the brokers' dirs and logs here")
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",")}
    results: dict[str, Any] = {"limits": {"open_files": allow_open_files()}}
    with tempfile.TemporaryDirectory(prefix="barnabas-scale-") as tmp:
        base = args.work_dir or Path(tmp)
        if "partitions" in parts:
            results["partitions on one broker"] = one_broker_partitions(base, args.partitions)
            print(results["partitions on one broker"], flush=True)
        if "connections" in parts:
            results["connections on one broker"] = one_broker_connections(base, args.connections)
            print(results["connections on one broker"], flush=True)
        if "cluster" in parts:
            results["partitions on a 3-broker cluster"] = cluster_partitions(base, args.cluster_partitions)
            print(results["partitions on a 3-broker cluster"], flush=True)
    report = {"run_at": time.strftime("%Y-%m-%d %H:%M:%S"), "environment": environment(None), "results": results}
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
