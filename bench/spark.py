"""The `barnabas` Spark source against Spark's JVM Kafka connector, reading the same topic in the same run.

Starts one real ``barnabas broker`` process, produces ``--records`` records of ``--size`` bytes into a
``--partitions``-partition topic with librdkafka, then in one SparkSession (local[2], the JVM connector
from Maven Central via ``spark.jars.packages``) reads the whole topic ``--runs`` times with each source,
alternating, into Spark's ``noop`` sink (every row is produced and dropped, so the read path is what is
timed). Both read the same schema (key, value, topic, partition, offset, timestamp, timestampType).
MB/s counts record values (10^6 bytes per second); the best and median of the runs are reported.

Writes bench/results/spark.json and spark.md:

    python bench/spark.py [--records 500000] [--size 1024] [--partitions 4] [--runs 3]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.spark.jvm_connector import SPARK_KAFKA_PACKAGE  # noqa: E402

from barnabas.testing import Broker  # noqa: E402

MB = 1_000_000
TOPIC = "spark-bench"


def produce(bootstrap: str, records: int, size: int, partitions: int) -> float:
    """Create the topic and fill it; returns the seconds it took."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        future.result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
            "acks": "1",
        }
    )
    value = os.urandom(size)
    started = time.perf_counter()
    for n in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, b"%d" % n)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise SystemExit("produce: records not acknowledged")
    return time.perf_counter() - started


def spark_session() -> Any:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import barnabas.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("barnabas-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.jars.packages", SPARK_KAFKA_PACKAGE)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    barnabas.spark.register(session)
    return session


def cpu_seconds(broker_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the broker, this run's Spark JVM and its Python workers (from /proc).

    Only this process's descendants count (other Spark jobs may share the machine). Python workers are
    forked by `pyspark.daemon` processes, which the JVM starts; a process's reaped children count in its
    cutime/cstime, so workers that have exited are still counted.
    """
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float, float]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        own, children = (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick
        stats[int(pid)] = (int(fields[1]), command, own, children)

    def descends_from_us(pid: int) -> bool:
        while pid in stats and pid > 1:
            pid = stats[pid][0]
            if pid == os.getpid():
                return True
        return False

    groups = {"broker": 0.0, "jvm": 0.0, "python_workers": 0.0}
    for pid, (_parent, command, own, children) in stats.items():
        if pid == broker_pid:
            groups["broker"] += own
        elif not descends_from_us(pid):
            continue
        elif "java" in command and "SparkSubmit" in command:
            groups["jvm"] += own
            groups["python_workers"] += children
        elif "pyspark.daemon" in command:
            groups["python_workers"] += own + children
    return groups


def read_once(spark: Any, fmt: str, bootstrap: str, broker_pid: int) -> tuple[float, dict[str, float]]:
    """Read the whole topic into the noop sink; returns the seconds it took and the CPU seconds per process."""
    df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()
    before = cpu_seconds(broker_pid)
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    after = cpu_seconds(broker_pid)
    return elapsed, {name: round(after[name] - before[name], 2) for name in after}


def count_rows(spark: Any, fmt: str, bootstrap: str) -> int:
    df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()
    return int(df.count())


def summarize(seconds: list[float], records: int, size: int) -> dict[str, Any]:
    best, median = min(seconds), statistics.median(seconds)
    return {
        "seconds": [round(s, 3) for s in seconds],
        "rows_per_s_best": round(records / best),
        "rows_per_s_median": round(records / median),
        "mb_per_s_best": round(records * size / MB / best, 1),
        "mb_per_s_median": round(records * size / MB / median, 1),
    }


def markdown(result: dict[str, Any]) -> str:
    ours, jvm = result["sources"]["barnabas"], result["sources"]["kafka"]
    lines = [
        "# Spark: the `barnabas` source vs the JVM Kafka connector",
        "",
        f"{result['records']:,} records × {result['size']} B in {result['partitions']} partitions of one barnabas "
        f"broker; Spark {result['spark']} local[2], noop sink, {result['runs']} alternating runs per source, "
        f"{result['when']}, {result['cpus']} CPUs, load average {result['load_average'][0]:.1f} at the end "
        "(other jobs shared the machine). MB/s = record values, 10^6 B/s.",
        "",
        "| source | rows/s (best) | MB/s (best) | rows/s (median) | MB/s (median) | runs (s) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, label in (("barnabas", "`barnabas` (Python Data Source)"), ("kafka", "`kafka` (JVM connector)")):
        s = result["sources"][name]
        lines.append(
            f"| {label} | {s['rows_per_s_best']:,} | {s['mb_per_s_best']:,} | {s['rows_per_s_median']:,} | "
            f"{s['mb_per_s_median']:,} | {', '.join(map(str, s['seconds']))} |"
        )
    ratio = ours["rows_per_s_median"] / jvm["rows_per_s_median"]
    lines += ["", f"barnabas ÷ JVM (median): **{ratio:.2f}×**", ""]
    lines += ["CPU seconds per run (median), by process:", ""]
    lines += ["| source | broker | Spark JVM | Python workers | total |", "|---|---:|---:|---:|---:|"]
    for name in ("barnabas", "kafka"):
        runs = result["sources"][name]["cpu_s"]
        medians = [statistics.median(run[group] for run in runs) for group in ("broker", "jvm", "python_workers")]
        total = statistics.median(sum(run.values()) for run in runs)
        lines.append(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + f" | {total:.2f} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="barnabas-spark-bench-") as tmp:
        broker = Broker(Path(tmp) / "data").start()
        try:
            produce_s = produce(broker.bootstrap, args.records, args.size, args.partitions)
            print(f"produced {args.records:,} records in {produce_s:.1f} s", flush=True)
            spark = spark_session()
            try:
                for fmt in ("barnabas", "kafka"):
                    rows = count_rows(spark, fmt, broker.bootstrap)  # also warms up both paths
                    if rows != args.records:
                        raise SystemExit(f"{fmt} counted {rows} rows, expected {args.records}")
                seconds: dict[str, list[float]] = {"barnabas": [], "kafka": []}
                cpu: dict[str, list[dict[str, float]]] = {"barnabas": [], "kafka": []}
                assert broker.process.pid is not None
                for run in range(args.runs):
                    for fmt in ("barnabas", "kafka") if run % 2 == 0 else ("kafka", "barnabas"):
                        elapsed, used = read_once(spark, fmt, broker.bootstrap, broker.process.pid)
                        seconds[fmt].append(elapsed)
                        cpu[fmt].append(used)
                        print(f"run {run + 1}: {fmt} {elapsed:.2f} s, CPU s {used}", flush=True)
                version = spark.version
            finally:
                spark.stop()
        finally:
            broker.stop()

    result = {
        "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "records": args.records,
        "size": args.size,
        "partitions": args.partitions,
        "runs": args.runs,
        "spark": version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "sources": {fmt: summarize(s, args.records, args.size) | {"cpu_s": cpu[fmt]} for fmt, s in seconds.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "spark.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
