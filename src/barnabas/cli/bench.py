"""`barnabas bench`: measure produce and consume throughput against the loopback ceiling."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


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
        producer_overrides=_pairs(args.producer_config, "--producer-config"),
        consumer_overrides=_pairs(args.consumer_config, "--consumer-config"),
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
