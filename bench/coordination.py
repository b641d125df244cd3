"""Coordination backends side by side: CAS latency and throughput, watch notification latency.

Starts each backend's real server here (the contract suite's fixture classes; every server
fsyncs: PostgreSQL runs with fsync on for this), runs ``barnabas.coordination.selftest`` against
it in the same run, stops it, and writes bench/results/coordination.json and .md:

    python bench/coordination.py [--backends sqlite,etcd,zookeeper,postgres,cassandra] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from barnabas.coordination.selftest import SelfTestReport, run_selftest  # noqa: E402
from barnabas.testing.servers.cassandra import CassandraServer, build_cassandra  # noqa: E402
from barnabas.testing.servers.etcd import EtcdServer  # noqa: E402
from barnabas.testing.servers.postgres import PostgresInstall, PostgresServer  # noqa: E402
from barnabas.testing.servers.zookeeper import ZooKeeperServer  # noqa: E402

BACKENDS = ("sqlite", "etcd", "zookeeper", "postgres", "cassandra")
#: The Maven resolve of cassandra-all the tests use too.
CASSANDRA_BUILD = ROOT / "tests" / "contract" / "servers" / "cassandra"


@contextlib.contextmanager
def server_for(backend: str, base: Path) -> Iterator[tuple[str, float]]:
    """Start ``backend``'s server under ``base``; yield (url, seconds it took to start)."""
    began = time.monotonic()
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if backend == "sqlite":
        url = f"sqlite://{base / 'sqlite' / 'coordination.db'}"
    elif backend == "etcd":
        etcd = EtcdServer(base).start()
        url, stop = etcd.url_for(), etcd.stop
    elif backend == "zookeeper":
        zookeeper = ZooKeeperServer(base).start()
        url, stop = zookeeper.url_for(), zookeeper.stop
    elif backend == "postgres":
        install = PostgresInstall().initdb()
        postgres = PostgresServer(install, "bench", durable=True).start()
        url = postgres.url_for()

        def stop() -> None:
            postgres.stop()
            install.cleanup(keep=False)

    elif backend == "cassandra":
        cassandra = CassandraServer(
            base / "cassandra", build_cassandra(CASSANDRA_BUILD / "build.sh", CASSANDRA_BUILD / "build" / "lib")
        ).start()
        url, stop = cassandra.url_for(), cassandra.stop
    else:
        raise SystemExit(f"unknown backend {backend!r}")
    started = time.monotonic() - began
    try:
        yield url, started
    finally:
        stop()


def markdown(rows: list[dict[str, object]], clients: int) -> str:
    lines = [
        "| backend | server start | CAS p50 | CAS p99 | CAS ops/s "
        f"({clients} clients) | watch p50 | watch p99 | self-test |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        report = row["report"]
        assert isinstance(report, dict)
        cas, watch = report.get("cas_latency") or {}, report.get("watch_latency") or {}
        ok = "ok" if report.get("ok") else "failed"
        ops = report.get("cas_ops_per_s")
        lines.append(
            f"| {row['backend']} | {row['start_s']:.1f} s "
            f"| {cas.get('p50_ms', 0):.2f} ms | {cas.get('p99_ms', 0):.2f} ms | {ops or 0:,.0f} "
            f"| {watch.get('p50_ms', 0):.2f} ms | {watch.get('p99_ms', 0):.2f} ms | {ok} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--seconds", type=float, default=5.0, help="CAS throughput duration per backend")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--cas", type=int, default=500, help="sequential CAS operations timed")
    parser.add_argument("--watches", type=int, default=200, help="watch round trips timed")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="barnabas-coordination-bench-") as tmp:
        for backend in args.backends.split(","):
            print(f"{backend}: starting", flush=True)
            with server_for(backend, Path(tmp) / backend) as (url, started):
                report: SelfTestReport = asyncio.run(
                    run_selftest(url, cas_count=args.cas, watch_count=args.watches, clients=args.clients,
                                 throughput_s=args.seconds)
                )  # fmt: skip
            rows.append({"backend": backend, "start_s": started, "report": report.to_dict()})
            print(f"{backend}: {json.dumps(asdict(report), default=str)}", flush=True)
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "clients": args.clients,
        "rows": rows,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "coordination.json").write_text(json.dumps(result, indent=2, default=str))
    table = markdown(rows, args.clients)
    (args.output / "coordination.md").write_text(f"# Coordination backends ({result['when']})\n\n{table}")
    print(table)
    return 0 if all(row["report"]["ok"] for row in rows if isinstance(row["report"], dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
