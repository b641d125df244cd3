"""Present a benchmark report: a rich table, a markdown page, and the files under ``--output``.

Rules this module keeps:

- A rate with one repetition is shown as a number; with several as ``median (min–max)``.
- ``latest.json`` and ``latest.md`` are overwritten by every run; ``runs/<run id>.json`` keeps
  each run, so ranges over several invocations can be computed later (bench/summarize.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from ._profiles import format_profile_markdown

__all__ = ["markdown_report", "rich_table", "summary_markdown", "write_report"]


def _spread(value: dict[str, float] | None, digits: int = 1, scale: float = 1.0) -> str:
    if not value:
        return "–"
    median = f"{value['median'] * scale:,.{digits}f}"
    if value["min"] == value["max"]:
        return median
    return f"{median} ({value['min'] * scale:,.{digits}f}–{value['max'] * scale:,.{digits}f})"


def _rows(summary: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for row in summary:
        ratio = _spread(row.get("ratio_to_ceiling"), 0, 100)
        aim = ""
        if "aim_mb_per_s" in row:
            aim = f"{row['aim_mb_per_s']:.0f} {'✔' if row['aim_met'] else '✘'}"
        rows.append([
            row["name"],
            _spread(row["mb_per_s"]),
            _spread(row.get("records_per_s"), 0),
            ratio + (" %" if ratio != "–" else ""),
            aim,
            _spread(row.get("broker_cores"), 2),
            _spread(row.get("broker_cpu_ms_per_mb"), 2),
            _spread(row.get("clients_cores"), 2),
            _spread(row.get("kernel_threads_cores"), 2),
            _spread(row.get("other_cores"), 2),
        ])  # fmt: skip
    return rows


_COLUMNS = (
    "phase",
    "MB/s",
    "records/s",
    "÷ ceiling",
    "aim MB/s",
    "broker cores",
    "broker CPU ms/MB",
    "client cores",
    "kernel thread cores",
    "other cores",
)


def rich_table(report: dict[str, Any]) -> Table:
    """The summary as a rich table."""
    env = report["environment"]
    table = Table(
        title=f"barnabas bench {report['run_id']}: {env['cpu_model']}, {env['cpu_count']} cores, {env['python']}",
        caption="MB/s = 10^6 B/s of record values; produce ÷ loopback ingress, consume ÷ loopback egress; "
        "cores = CPU-seconds per second; kernel threads = kworkers etc. (writeback); 'other' = other users' "
        "processes; broker CPU ms/MB = broker CPU time per MB moved (1000 ÷ it = MB/s the broker could do "
        "with one full core)",
    )
    for index, column in enumerate(_COLUMNS):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in _rows(report["summary"]):
        table.add_row(*row)
    return table


def _source(source: dict[str, Any] | None) -> str:
    if not source:
        return ""
    return f"; source {source['commit'][:10]} + {source['changed_files']} changed files under src/barnabas"


def markdown_report(report: dict[str, Any]) -> str:
    """The whole report as a markdown page."""
    env = report["environment"]
    settings = report["settings"]
    load = env.get("load_before", {})
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    busiest = ", ".join(f"{p['name']} {p['cores']}" for p in load.get("top_processes", [])) or "none"
    lines = [
        f"# barnabas bench {report['run_id']}",
        "",
        f"- started {report['started_at']}, took {report['seconds']} s",
        f"- machine: {env['cpu_model']}, {env['cpu_count']} cores ({env['cpus_usable']} usable), "
        f"{env['memory_mb']} MB, {env['os']}, data dir on {env.get('data_dir_filesystem') or '?'}",
        f"- {env['python']}; {versions}{_source(env.get('source'))}",
        f"- load before: loadavg {', '.join(f'{x:.2f}' for x in load.get('loadavg', []))}, "
        f"busy {load.get('busy_cores')} cores, steal {load.get('steal_cores')}; busiest: {busiest}",
        f"- workload: {settings['record_size']} B records, {settings['partitions']} partitions per topic, "
        + (f"{settings['records']} records" if settings["records"] else f"{settings['duration_s']} s")
        + f" per produce run, producers {settings['producers']}, consumers {settings['consumers']}, "
        f"acks {settings['acks']}, {settings['runs']} run(s), broker {settings['bootstrap']}"
        + (", **profiled with py-spy (rates are lower)**" if settings["profile"] else ""),
        "",
        summary_markdown(report["summary"]),
        "",
        "MB/s = 10^6 bytes of record values per second (median (min–max) over runs). Produce is compared with "
        "the loopback ingress ceiling (1 MiB ProduceRequest frames, client → server), consume with the "
        "egress ceiling (1 MiB FetchResponse frames, server → client). Cores are CPU-seconds per second; "
        "kernel threads (kworker writeback, softirqs) partly work for the broker; 'other' is CPU used by "
        "other users' processes during the phase. Broker CPU ms/MB is the "
        "broker's CPU time per MB moved, less sensitive to other load than MB/s: 1000 ÷ it is the rate the "
        "broker could sustain with one full core to itself.",
        "",
    ]
    for phase in report["phases"]:
        if phase.get("profile"):
            lines.append(format_profile_markdown(f"{phase['name']} (run {phase['rep'] + 1})", phase["profile"]))
    return "\n".join(lines)


def summary_markdown(summary: list[dict[str, Any]]) -> str:
    """The summary rows (see ``summarise``) as a markdown table."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|---|" + "---:|" * (len(_COLUMNS) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(summary)]
    return "\n".join(lines)


def write_report(report: dict[str, Any], output: Path) -> list[Path]:
    """Write latest.json, latest.md and runs/<run id>.json under ``output``; the paths written."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "runs").mkdir(exist_ok=True)
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    paths = [output / "latest.json", output / "latest.md", output / "runs" / f"{report['run_id']}.json"]
    paths[0].write_text(text)
    paths[1].write_text(markdown_report(report))
    paths[2].write_text(text)
    return paths
