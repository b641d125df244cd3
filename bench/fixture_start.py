"""How long barnabas.testing takes to give a test a ready broker, and a ready 3-broker cluster.

Each run starts from nothing (a fresh directory, a fresh SQLite coordination file) and stops when
the broker serves (its port file written), or when every broker of the cluster is registered and
listed by Metadata; then they are stopped. The pytest plugin's fixtures wait for exactly this.

Writes bench/results/fixture-start.json and fixture-start.md:

    python bench/fixture_start.py [--runs 10]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from barnabas import __version__
from barnabas.testing import Broker, BrokerCluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def timed(start: Callable[[Path], Callable[[], object]], runs: int) -> list[float]:
    """Seconds from launch to ready, per run; ``start`` starts in a directory and returns how to stop."""
    seconds = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="fixture-start-") as tmp:
            began = time.perf_counter()
            stop = start(Path(tmp))
            seconds.append(time.perf_counter() - began)
            stop()
    return seconds


def one_broker(directory: Path) -> Callable[[], object]:
    broker = Broker(directory / "data").start()
    return broker.stop


def three_brokers(directory: Path) -> Callable[[], object]:
    cluster = BrokerCluster(directory, 3).start()
    return lambda: [broker.stop() for broker in cluster.brokers]


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "max_s": round(max(seconds), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    timed(one_broker, 1)  # warm the page cache and the bytecode once; not counted
    results = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "barnabas": __version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        # With PYTHONDONTWRITEBYTECODE set, every broker compiles barnabas' sources as it starts.
        "bytecode_cache": not sys.dont_write_bytecode,
        "runs": args.runs,
        "one_broker": summary(timed(one_broker, args.runs)),
        "three_broker_cluster": summary(timed(three_brokers, args.runs)),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fixture-start.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        "| fixture | median | min | max |",
        "|---|---:|---:|---:|",
        *(
            "| {} | {median_s:.2f} s | {min_s:.2f} s | {max_s:.2f} s |".format(label, **results[key])
            for key, label in (("one_broker", "one broker"), ("three_broker_cluster", "3-broker cluster"))
        ),
    ]
    table = "\n".join(rows)
    (RESULTS / "fixture-start.md").write_text(
        f"# Fixture start ({results['date']}, {args.runs} runs, {results['cpus']} CPUs)\n\n{table}\n"
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
