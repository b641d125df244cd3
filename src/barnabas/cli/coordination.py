"""`barnabas coordination check URL`: self-test a coordination backend and time it."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from barnabas.coordination import CoordinationError
from barnabas.coordination.selftest import SelfTestReport, run_selftest

from .errors import CliError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("coordination", help="inspect and test coordination backends")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="self-test a backend and measure CAS and watch round-trip latency",
        description="Connect to URL (sqlite:///path, etcd://h:p/prefix, zookeeper://h:p/chroot, "
        "postgresql://user@h:p/db, cassandra://h/keyspace), run a self-test under a temporary prefix "
        "(storage, ephemeral keys, election) and measure compare-and-set and watch latency.",
    )
    check.add_argument("url")
    check.add_argument("--cas", type=int, default=200, help="sequential CAS operations to time (default 200)")
    check.add_argument("--watches", type=int, default=50, help="watch round trips to time (default 50)")
    check.add_argument("--clients", type=int, default=4, help="concurrent clients for CAS throughput (default 4)")
    check.add_argument("--seconds", type=float, default=3.0, help="CAS throughput duration (default 3)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        report = asyncio.run(
            run_selftest(
                args.url, cas_count=args.cas, watch_count=args.watches, clients=args.clients,
                throughput_s=args.seconds,
            )
        )  # fmt: skip
    except (CoordinationError, ValueError) as exc:
        raise CliError(f"{args.url}: {exc}") from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print(report)
    if not report.ok:
        failed = next(name for name, result in report.checks.items() if result != "ok")
        raise CliError(f"{failed}: {report.checks[failed]}")
    return 0


def _print(report: SelfTestReport) -> None:
    console = Console()
    table = Table(title=f"coordination check {report.url}")
    table.add_column("check")
    table.add_column("result")
    for name, result in report.checks.items():
        table.add_row(name, result)
    if report.cas_latency is not None:
        lat = report.cas_latency
        table.add_row("CAS latency", f"p50 {lat.p50_ms:.2f} ms, p99 {lat.p99_ms:.2f} ms over {lat.count}")
    if report.cas_ops_per_s is not None:
        table.add_row("CAS throughput", f"{report.cas_ops_per_s:,.0f} ops/s with {report.cas_clients} clients")
    if report.watch_latency is not None:
        lat = report.watch_latency
        table.add_row("watch latency", f"p50 {lat.p50_ms:.2f} ms, p99 {lat.p99_ms:.2f} ms over {lat.count}")
    console.print(table)
