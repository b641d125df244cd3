"""Combine several `barnabas bench` runs into ranges: median (min–max) per phase.

Usage:
    python bench/summarize.py                      # every bench/results/runs/*.json not profiled
    python bench/summarize.py RUN.json RUN2.json   # just these
    python bench/summarize.py --since 20260101-000000 --output bench/results/summary.md

Runs are noisy (other processes share a 2-core machine); the "other cores" column says how much
CPU others took during each phase, and broker CPU ms/MB is the least noise-sensitive figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from barnabas.benchmark import summarise, summary_markdown

RESULTS = Path(__file__).resolve().parent / "results"


def load(paths: list[Path], since: str | None, include_profiled: bool) -> list[dict[str, Any]]:
    reports = []
    for path in sorted(paths):
        report = json.loads(path.read_text())
        if since and report["run_id"] < since:
            continue
        if report["settings"].get("profile") and not include_profiled:
            continue
        reports.append(report)
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("runs", nargs="*", type=Path, help="run JSON files (default: results/runs/*.json)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--since", help="only runs with this run id or later (YYYYmmdd-HHMMSS)")
    parser.add_argument("--include-profiled", action="store_true", help="include runs made with --profile")
    parser.add_argument("--output", type=Path, help="markdown file to write (default: RESULTS/summary.md)")
    args = parser.parse_args(argv)

    reports = load(args.runs or list((args.results / "runs").glob("*.json")), args.since, args.include_profiled)
    if not reports:
        print("no runs to summarise", file=sys.stderr)
        return 1
    phases = [phase for report in reports for phase in report["phases"]]
    summary = summarise(phases)
    env = reports[-1]["environment"]

    table = Table(title=f"{len(reports)} runs: {env['cpu_model']}, {env['cpu_count']} cores, {env['python']}")
    columns = ["phase", "n", "MB/s median (min–max)", "broker CPU ms/MB", "broker cores", "other cores"]
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")

    def spread(value: dict[str, float] | None, digits: int) -> str:
        if not value:
            return "–"
        return f"{value['median']:,.{digits}f} ({value['min']:,.{digits}f}–{value['max']:,.{digits}f})"

    for row in summary:
        table.add_row(
            row["name"],
            str(row["runs"]),
            spread(row["mb_per_s"], 1),
            spread(row.get("broker_cpu_ms_per_mb"), 2),
            spread(row.get("broker_cores"), 2),
            spread(row.get("other_cores"), 2),
        )
    Console(width=160).print(table)

    run_ids = ", ".join(r["run_id"] for r in reports)
    text = (
        f"# barnabas bench: {len(reports)} runs\n\n"
        f"Runs {run_ids}; {env['cpu_model']}, {env['cpu_count']} cores, {env['python']}, "
        f"librdkafka {env['versions']['librdkafka']}.\n\n"
        f"{summary_markdown(summary)}\n\n"
        "Median (min–max) over runs; MB/s = 10^6 bytes of record values per second; 'other' = CPU taken by "
        "other users' processes during the phase (the machine is shared).\n"
    )
    output = args.output or args.results / "summary.md"
    output.write_text(text)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
