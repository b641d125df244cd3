"""Present a compare report: the side-by-side rows, a rich table, a markdown page and the files.

Rules this module keeps:

- A row is one workload on one topology with every system's absolute figure, the limit that
  applies, and the ratios barnabas ÷ Kafka, barnabas ÷ Tansu and barnabas ÷ limit, each exactly
  the quotient of the figures shown (computed from the unrounded report values).
- Limits: produce is bounded by the loopback ingress ceiling and by the disk's plain write
  bandwidth (the lower applies; divided by 3 on three brokers, which move and write each byte three
  times on this one machine); consume by the loopback egress ceiling. Latency and Metadata have
  no limit here.
- A system that is not applicable or failed shows "n/a" or "failed"; the reasons follow the table.
- ``latest.json``, ``latest.md`` and ``latency.png`` are overwritten by every run;
  ``runs/<run id>.json`` keeps each run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from ._names import PRODUCTS

__all__ = ["compare_markdown", "compare_rich_table", "compare_rows", "write_compare_report"]

_NAMES = {"barnabas": "barnabas", "kafka": "Kafka", "tansu": "Tansu"}


def _topology(brokers: int) -> str:
    return "1 broker" if brokers == 1 else f"{brokers} brokers, RF={min(brokers, 3)}"


def _limit(report: dict[str, Any], kind: str, brokers: int) -> dict[str, Any] | None:
    limits = report.get("limits") or {}
    if kind == "produce":
        options = []
        if (ingress := limits.get("loopback_ingress")) is not None:
            options.append(("loopback ingress", ingress["mb_per_s"]))
        if (disk := limits.get("disk")) is not None:
            options.append(("disk, plain writes", disk["plain"]["mb_per_s"]))
        if not options:
            return None
        name, value = min(options, key=lambda option: option[1])
        if brokers > 1:
            return {"name": f"{name} ÷ 3", "value": value / 3}
        return {"name": name, "value": value}
    if kind == "consume" and (egress := limits.get("loopback_egress")) is not None:
        return {"name": "loopback egress", "value": egress["mb_per_s"]}
    return None


def _workload_rows(report: dict[str, Any]) -> list[tuple[str, str, str, str, Any]]:
    """(phase key, workload, unit, better, value getter) in table order."""
    rows: list[tuple[str, str, str, str, Any]] = [
        ("produce_acks_1", "produce acks=1", "MB/s", "higher", lambda p: p["mb_per_s"]),
        ("produce_acks_all", "produce acks=all", "MB/s", "higher", lambda p: p["mb_per_s"]),
        ("consume", "consume from the beginning", "MB/s", "higher", lambda p: p["mb_per_s"]),
    ]
    for load in report["settings"]["latency_loads"]:
        key = f"latency_{round(load * 100)}"
        for pct in ("p50", "p99", "p99.9"):
            rows.append((key, f"end-to-end {pct} at {load:.0%} of max", "ms", "lower", _getter(pct)))
    count = report["settings"]["metadata_partitions"]
    rows += [
        ("metadata", f"Metadata ({count:,} partitions)", "requests/s", "higher", lambda p: p["requests_per_s"]),
        ("metadata", f"Metadata ({count:,} partitions) p50", "ms", "lower", _getter("p50")),
        ("metadata", f"Metadata ({count:,} partitions) p99", "ms", "lower", _getter("p99")),
    ]
    return rows


def _getter(percentile: str) -> Any:
    return lambda phase: phase["latency_ms"][percentile]


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom == 0:
        return None
    return top / bottom


def compare_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side rows of ``report`` (see the module rules)."""
    systems = report["systems"]
    out = []
    for brokers in sorted({s["brokers"] for s in systems.values()}):
        on_topology = {s["product"]: s for s in systems.values() if s["brokers"] == brokers}
        for phase_key, workload, unit, better, value_of in _workload_rows(report):
            values: dict[str, float | None] = {}
            states: dict[str, str] = {}
            for product in PRODUCTS:
                system = on_topology.get(product)
                if system is None:
                    continue
                phase = (system.get("phases") or {}).get(phase_key)
                values[product] = None if phase is None else value_of(phase)
                states[product] = "ok" if phase is not None else system["status"]
            if not any(v is not None for v in values.values()):
                continue
            kind = phase_key.split("_")[0]
            limit = _limit(report, kind, brokers)
            mine = values.get("barnabas")
            out.append({
                "topology": _topology(brokers),
                "brokers": brokers,
                "workload": workload,
                "unit": unit,
                "better": better,
                "values": values,
                "states": states,
                "limit": limit,
                "ratios": {
                    "barnabas/kafka": _ratio(mine, values.get("kafka")),
                    "barnabas/tansu": _ratio(mine, values.get("tansu")),
                    "barnabas/limit": _ratio(mine, limit["value"] if limit else None),
                },
            })  # fmt: skip
    return out


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "ms":
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _cell(row: dict[str, Any], product: str) -> str:
    if product not in row["states"]:
        return "–"
    state = row["states"][product]
    if state == "ok":
        return _number(row["values"][product], row["unit"])
    return "n/a" if state == "n/a" else state


def _times(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.2f}×"


_COLUMNS = ("topology", "workload", "unit", "barnabas", "Kafka", "Tansu", "limit", "÷ Kafka", "÷ Tansu", "÷ limit")


def _table_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for row in compare_rows(report):
        limit = row["limit"]
        rows.append([
            row["topology"], row["workload"], row["unit"],
            _cell(row, "barnabas"), _cell(row, "kafka"), _cell(row, "tansu"),
            f"{_number(limit['value'], row['unit'])} ({limit['name']})" if limit else "–",
            _times(row["ratios"]["barnabas/kafka"]), _times(row["ratios"]["barnabas/tansu"]),
            _times(row["ratios"]["barnabas/limit"]),
        ])  # fmt: skip
    return rows


def _reasons(report: dict[str, Any]) -> list[str]:
    """Why a system has no figures, and records a system acknowledged but never delivered."""
    out = [f"{s['label']}: {s['status']} — {s['reason']}" for s in report["systems"].values() if s["status"] != "ok"]
    for system in report["systems"].values():
        for phase in (system.get("phases") or {}).values():
            if phase.get("undelivered"):
                out.append(
                    f"{system['label']}: {phase['name']}: {phase['undelivered']:,} of {phase['records']:,} "
                    "acknowledged records never reached the consumers (left out of the percentiles)"
                )
    return out


def compare_rich_table(report: dict[str, Any]) -> Table:
    """The side-by-side rows as a rich table."""
    env = report["environment"]
    table = Table(
        title=f"barnabas bench compare {report['run_id']}: {env['cpu_model']}, {env['cpu_count']} cores",
        caption="÷ columns are barnabas ÷ that system (or limit); for ms rows lower is better. "
        + " ".join(_reasons(report)),
    )
    for index, column in enumerate(_COLUMNS):
        table.add_column(column, justify="left" if index < 3 else "right")
    for row in _table_rows(report):
        table.add_row(*row)
    return table


def compare_table_markdown(report: dict[str, Any]) -> str:
    """The side-by-side rows as a markdown table (what the README carries)."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|---|---|---|" + "---:|" * (len(_COLUMNS) - 3)]
    lines += ["| " + " | ".join(row) + " |" for row in _table_rows(report)]
    return "\n".join(lines)


def _other_load(report: dict[str, Any]) -> str:
    """The range of 'other' CPU (other users' processes) over every measured phase."""
    values = [
        phase["cpu"]["other"]
        for system in report["systems"].values()
        for phase in (system.get("phases") or {}).values()
        if phase.get("cpu", {}).get("other") is not None
    ]
    return f"{min(values):.2f}–{max(values):.2f}" if values else "?"


def _short_of_target(phase: dict[str, Any]) -> str:
    """How far short of its target a paced run fell, when its producers sent under 95 % of it (saturated)."""
    achieved, target = phase["records_per_s"], phase["target_records_per_s"]
    if achieved >= 0.95 * target:
        return ""
    return f" of {target * phase['mb_per_s'] / achieved:,.1f} targeted"


def _cpu_lines(report: dict[str, Any]) -> list[str]:
    """Per system: the broker's cores and other users' cores over its throughput phases."""
    lines = []
    for system in report["systems"].values():
        phases = [
            p for p in (system.get("phases") or {}).values() if p["kind"] in ("produce", "consume") and p.get("cpu")
        ]
        if not phases:
            continue

        def spread(key: str, of: list[dict[str, Any]] = phases) -> str:
            values = [p["cpu"][key] for p in of if p["cpu"].get(key) is not None]
            return f"{min(values):.2f}–{max(values):.2f}" if values else "?"

        lines.append(f"- {system['label']}: broker {spread('broker')} cores, other {spread('other')} cores")
    return lines


def compare_markdown(report: dict[str, Any]) -> str:
    """The whole report as a markdown page."""
    env = report["environment"]
    settings = report["settings"]
    limits = report.get("limits") or {}
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    load = env.get("load_before", {})
    lines = [
        f"# barnabas bench compare {report['run_id']}",
        "",
        f"- started {report['started_at']}, took {report['seconds']} s",
        f"- machine: {env['cpu_model']}, {env['cpu_count']} cores, {env['memory_mb']} MB, {env['os']}, "
        f"data on {env.get('data_dir_filesystem') or '?'}",
        f"- {env['python']}; {versions}",
        f"- load before: loadavg {', '.join(f'{x:.2f}' for x in load.get('loadavg', []))}, busy "
        f"{load.get('busy_cores')} cores; 'other' CPU during the phases: {_other_load(report)} cores",
        f"- workload: {settings['record_size']} B records, {settings['partitions']} partitions per topic, "
        f"{settings['producers']} producer and {settings['consumers']} consumer processes (librdkafka), "
        f"produce {settings['produce_s']} s per acks value, consume the median of "
        f"{settings.get('consume_rounds', 1)} rounds reading every produced record, "
        f"latency {settings['latency_s']} s per load, "
        f"Metadata {settings['metadata_s']} s; systems ran in this order: {', '.join(settings.get('systems', ()))}; "
        "every measured phase starts after os.sync()",
        "",
        compare_table_markdown(report),
        "",
    ]
    lines += [f"- {reason}" for reason in _reasons(report)]
    if limits:
        disk = limits.get("disk", {})
        lines += [
            "",
            "Limits: loopback ceiling (two plain Python processes, 1 MiB Kafka frames) "
            f"{limits['loopback_ingress']['mb_per_s']:,.0f} MB/s ingress, "
            f"{limits['loopback_egress']['mb_per_s']:,.0f} MB/s egress; disk "
            f"{disk['plain']['mb_per_s']:,.0f} MB/s plain writes, {disk['fsync']['mb_per_s']:,.0f} MB/s with an "
            f"fsync every {disk['fsync']['fsync_every_bytes'] >> 20} MiB.",
        ]
    lines += ["", "CPU during the produce and consume phases (cores; 'other' = other users' processes):", ""]
    lines += _cpu_lines(report)
    lines += ["", "Latency runs (paced rate each system ran at):", ""]
    for system in report["systems"].values():
        runs = [p for p in (system.get("phases") or {}).values() if p["kind"] == "latency"]
        if runs:
            rates = ", ".join(
                f"{p['load']:.0%} = {p['mb_per_s']:,.1f} MB/s{_short_of_target(p)} "
                f"(max {p['latency_ms']['max']:,.0f} ms, producers "
                f"up to {p['worst_producer_lag_ms']:,.0f} ms behind schedule)"
                for p in runs
            )
            lines.append(f"- {system['label']}: {rates}")
    lines += [
        "",
        "MB/s = 10^6 bytes of record values per second. Latency is from the producer's produce() call "
        "(CLOCK_MONOTONIC stamped into the record) to the consumer's consume() return; loads are shares of "
        "each system's own acks=1 produce rate in this run. ÷ columns are barnabas ÷ Kafka, ÷ Tansu, ÷ the "
        "limit; for ms rows lower is better, so a ratio above 1 means barnabas is slower.",
        "",
    ]
    return "\n".join(lines)


def write_compare_report(report: dict[str, Any], output: Path) -> list[Path]:
    """Write latest.json, latest.md, latency.png and runs/<run id>.json under ``output``; the paths."""
    from ._compare_plot import plot_latency  # noqa: PLC0415 - matplotlib is the bench extra's, loaded when used

    output.mkdir(parents=True, exist_ok=True)
    (output / "runs").mkdir(exist_ok=True)
    report = {**report, "rows": compare_rows(report)}
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    paths = [output / "latest.json", output / "latest.md", output / "runs" / f"{report['run_id']}.json"]
    paths[0].write_text(text)
    paths[1].write_text(compare_markdown(report))
    paths[2].write_text(text)
    if plot := plot_latency(report, output / "latency.png"):
        paths.append(plot)
    return paths
