"""Present a compare report: the side-by-side rows, a rich table, a markdown page and the files.

Rules this module keeps:

- A row is one workload on one topology with every system's absolute figure, the limit that
  applies, and the ratios barnabas ÷ Kafka, barnabas ÷ Tansu and barnabas ÷ limit, each exactly
  the quotient of the figures shown (computed from the unrounded report values).
- barnabas through its proxy has a column of its own and the ratio proxy ÷ direct (barnabas via
  proxy ÷ barnabas) on every row both have; on millisecond rows also the difference, proxy − direct
  (the latency the proxy adds), from the same unrounded values. Rows only the proxy has: its CPU
  per MB/s moved (mcore per MB/s: its cores × 1000 ÷ the phase's MB/s) in the produce and consume
  phases, and its memory per client connection. The proxy columns appear only when it was measured.
- ``proxy_overhead`` holds those figures against the aims the proxy was built to (throughput ≥ 0.9×
  direct, ≤ 0.5 ms added p50 at 10 % load) and Kroxylicious' 10 mcore per MB/s for reference.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from rich.table import Table

from ._names import PRODUCTS, PROXIED

__all__ = ["compare_markdown", "compare_rich_table", "compare_rows", "proxy_overhead", "write_compare_report"]

#: The least proxy ÷ direct throughput, and the most added end-to-end p50 at 10 % load (ms), aimed for.
PROXY_MIN_THROUGHPUT = 0.9
PROXY_MAX_ADDED_P50_MS = 0.5
#: Kroxylicious' proxy CPU for comparison (its published benchmark: 10 mcore per MB/s).
KROXYLICIOUS_MCORE_PER_MB_S = 10.0


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


class _Metric(NamedTuple):
    """One row's figure: which phase, what is read from it, how it is named and which way is better."""

    phase: str
    metric: str
    workload: str
    unit: str
    better: str
    value_of: Callable[[dict[str, Any]], float | None]


_MB_S = "MB/s"
_MCORE = "mcore per MB/s"
#: (phase key, workload, short name) of the throughput phases.
_THROUGHPUT = (
    ("produce_acks_1", "produce acks=1", "produce acks=1"),
    ("produce_acks_all", "produce acks=all", "produce acks=all"),
    ("consume", "consume from the beginning", "consume"),
)


def _workload_rows(report: dict[str, Any]) -> list[_Metric]:
    """Every row's metric, in table order."""
    rows = [_Metric(key, "mb_per_s", name, _MB_S, "higher", _field("mb_per_s")) for key, name, _ in _THROUGHPUT]
    for load in report["settings"]["latency_loads"]:
        key = f"latency_{round(load * 100)}"
        for pct in ("p50", "p99", "p99.9"):
            rows.append(_Metric(key, pct, f"end-to-end {pct} at {load:.0%} of max", "ms", "lower", _getter(pct)))
    for rate in report["settings"].get("latency_rates", ()):
        key = f"latency_rate_{rate}"
        for pct in ("p50", "p99"):
            rows.append(_Metric(key, pct, f"end-to-end {pct} at {rate:,} records/s", "ms", "lower", _getter(pct)))
    count = report["settings"]["metadata_partitions"]
    metadata = f"Metadata ({count:,} partitions)"
    rows += [
        _Metric("metadata", "requests_per_s", metadata, "requests/s", "higher", _field("requests_per_s")),
        _Metric("metadata", "p50", f"{metadata} p50", "ms", "lower", _getter("p50")),
        _Metric("metadata", "p99", f"{metadata} p99", "ms", "lower", _getter("p99")),
    ]
    rows += [
        _Metric(key, "proxy_cpu", f"proxy CPU, {short}", _MCORE, "lower", _proxy_mcore_per_mb_s)
        for key, _, short in _THROUGHPUT
    ]
    rows.append(
        _Metric(
            "connections", "kib_per_connection", "proxy memory per client connection", "KiB", "lower",
            _field("kib_per_connection"),
        )
    )  # fmt: skip
    return rows


def _field(name: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda phase: phase[name]


def _getter(percentile: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda phase: phase["latency_ms"][percentile]


def _proxy_mcore_per_mb_s(phase: dict[str, Any]) -> float | None:
    """The proxy's CPU per MB/s moved in a phase (None where no proxy was measured)."""
    cores = (phase.get("cpu") or {}).get("proxy")
    if cores is None or not phase.get("mb_per_s"):
        return None
    return float(cores) * 1000 / float(phase["mb_per_s"])


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom == 0:
        return None
    return top / bottom


def _difference(top: float | None, bottom: float | None) -> float | None:
    return None if top is None or bottom is None else top - bottom


def compare_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side rows of ``report`` (see the module rules)."""
    systems = report["systems"]
    proxied, direct = PROXIED
    out = []
    for brokers in sorted({s["brokers"] for s in systems.values()}):
        on_topology = {s["product"]: s for s in systems.values() if s["brokers"] == brokers}
        for row in _workload_rows(report):
            values: dict[str, float | None] = {}
            states: dict[str, str] = {}
            for product in PRODUCTS:
                system = on_topology.get(product)
                if system is None:
                    continue
                phase = (system.get("phases") or {}).get(row.phase)
                values[product] = None if phase is None else row.value_of(phase)
                states[product] = "ok" if phase is not None else system["status"]
            if not any(v is not None for v in values.values()):
                continue
            limit = _limit(report, row.phase.split("_")[0], brokers) if row.unit == _MB_S else None
            mine = values.get("barnabas")
            out.append({
                "topology": _topology(brokers),
                "brokers": brokers,
                "phase": row.phase,
                "metric": row.metric,
                "workload": row.workload,
                "unit": row.unit,
                "better": row.better,
                "values": values,
                "states": states,
                "limit": limit,
                "ratios": {
                    "barnabas/kafka": _ratio(mine, values.get("kafka")),
                    "barnabas/tansu": _ratio(mine, values.get("tansu")),
                    "barnabas/limit": _ratio(mine, limit["value"] if limit else None),
                    "proxy/direct": _ratio(values.get(proxied), values.get(direct)),
                },
                # The milliseconds the proxy adds; on ms rows only (elsewhere the ratio says it).
                "proxy_added_ms": (
                    _difference(values.get(proxied), values.get(direct)) if row.unit == "ms" else None
                ),
            })  # fmt: skip
    return out


#: What ``proxy_overhead`` reports: (phase, metric, what it is, how it is judged).
_PROXY_FIGURES = (
    ("produce_acks_1", "mb_per_s", "produce acks=1 throughput", "ratio"),
    ("produce_acks_all", "mb_per_s", "produce acks=all throughput", "ratio"),
    ("consume", "mb_per_s", "consume throughput", "ratio"),
    ("latency_10", "p50", "end-to-end p50 at 10 % load", "added"),
    ("produce_acks_1", "proxy_cpu", "proxy CPU, produce acks=1", "cpu"),
    ("produce_acks_all", "proxy_cpu", "proxy CPU, produce acks=all", "cpu"),
    ("consume", "proxy_cpu", "proxy CPU, consume", "cpu"),
    ("connections", "kib_per_connection", "memory per client connection", "memory"),
)


def proxy_overhead(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proxy's figures from ``compare_rows`` against its aims, per topology where it was measured.

    Each entry: topology, what, figure (unrounded), shown (as printed), aim (None for a figure
    without one) and met (True, False, or None when there is no aim or no figure).
    """
    proxied, _ = PROXIED
    by_key = {(row["topology"], row["phase"], row["metric"]): row for row in rows}
    topologies = dict.fromkeys(row["topology"] for row in rows if row["values"].get(proxied) is not None)
    out = []
    fixed_rates = [
        (row["phase"], "p50", row["workload"], "added")
        for row in rows
        if row["phase"].startswith("latency_rate_") and row["metric"] == "p50"
    ]
    figures = list(_PROXY_FIGURES) + list(dict.fromkeys(fixed_rates))
    for topology in topologies:
        for phase, metric, what, judged in figures:
            row = by_key.get((topology, phase, metric))
            if row is None or row["values"].get(proxied) is None:
                continue
            figure, shown, aim, met = _judge(row, judged)
            out.append({"topology": topology, "what": what, "figure": figure, "shown": shown, "aim": aim, "met": met})
    return out


def _judge(row: dict[str, Any], judged: str) -> tuple[float | None, str, str | None, bool | None]:
    """(figure, as shown, aim, met) of one proxy figure."""
    proxied, _ = PROXIED
    if judged == "ratio":
        ratio = row["ratios"]["proxy/direct"]
        aim = f"≥ {PROXY_MIN_THROUGHPUT}× direct"
        return ratio, f"{_times(ratio)} direct", aim, None if ratio is None else ratio >= PROXY_MIN_THROUGHPUT
    if judged == "added":
        added = row["proxy_added_ms"]
        aim = f"≤ +{PROXY_MAX_ADDED_P50_MS} ms"
        return added, _added(added), aim, None if added is None else added <= PROXY_MAX_ADDED_P50_MS
    value = row["values"][proxied]
    shown = f"{_number(value, row['unit'])} {row['unit']}"
    if judged == "cpu":
        return value, shown, f"Kroxylicious: {KROXYLICIOUS_MCORE_PER_MB_S:.0f} {_MCORE}", None
    return value, shown, None, None


def _share_or_rate(phase: dict[str, Any]) -> str:
    """A latency run's load: its share of the max, or its fixed rate."""
    load = phase["load"]
    return f"{load:.0%}" if load is not None else f"{phase['target_records_per_s']:,} records/s"


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


def _added(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:+,.2f} ms" if abs(ms) < 100 else f"{ms:+,.0f} ms"


def _has_proxy(report: dict[str, Any]) -> bool:
    return any(s["product"] == PROXIED[0] for s in report["systems"].values())


def _columns(report: dict[str, Any]) -> tuple[str, ...]:
    """The table's columns: the proxy's two only when it was measured."""
    proxy = _has_proxy(report)
    return (
        "topology", "workload", "unit", "barnabas", *(("via proxy",) if proxy else ()), "Kafka", "Tansu", "limit",
        "÷ Kafka", "÷ Tansu", "÷ limit", *(("proxy ÷ direct",) if proxy else ()),
    )  # fmt: skip


def _proxy_cell(row: dict[str, Any]) -> str:
    """proxy ÷ direct, with the milliseconds added on ms rows: ``1.10× (+0.21 ms)``."""
    ratio, added = row["ratios"]["proxy/direct"], row["proxy_added_ms"]
    if ratio is None or added is None:
        return _times(ratio)
    return f"{_times(ratio)} ({_added(added)})"


def _table_rows(report: dict[str, Any]) -> list[list[str]]:
    proxy = _has_proxy(report)
    rows = []
    for row in compare_rows(report):
        limit = row["limit"]
        rows.append([
            row["topology"], row["workload"], row["unit"],
            _cell(row, "barnabas"), *([_cell(row, PROXIED[0])] if proxy else []), _cell(row, "kafka"),
            _cell(row, "tansu"),
            f"{_number(limit['value'], row['unit'])} ({limit['name']})" if limit else "–",
            _times(row["ratios"]["barnabas/kafka"]), _times(row["ratios"]["barnabas/tansu"]),
            _times(row["ratios"]["barnabas/limit"]), *([_proxy_cell(row)] if proxy else []),
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
    proxy_note = "proxy ÷ direct is barnabas via proxy ÷ barnabas (on ms rows + the ms it adds). "
    table = Table(
        title=f"barnabas bench compare {report['run_id']}: {env['cpu_model']}, {env['cpu_count']} cores",
        caption="÷ columns are barnabas ÷ that system (or limit); for ms rows lower is better. "
        + (proxy_note if _has_proxy(report) else "")
        + " ".join(_reasons(report)),
    )
    for index, column in enumerate(_columns(report)):
        table.add_column(column, justify="left" if index < 3 else "right")
    for row in _table_rows(report):
        table.add_row(*row)
    return table


def compare_table_markdown(report: dict[str, Any]) -> str:
    """The side-by-side rows as a markdown table (what the README carries)."""
    columns = _columns(report)
    lines = ["| " + " | ".join(columns) + " |", "|---|---|---|" + "---:|" * (len(columns) - 3)]
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

        proxy = f", proxy {spread('proxy')} cores" if any("proxy" in p["cpu"] for p in phases) else ""
        lines.append(f"- {system['label']}: broker {spread('broker')} cores{proxy}, other {spread('other')} cores")
    return lines


def _proxy_lines(report: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The proxy-overhead section of the markdown page (nothing when the proxy was not measured)."""
    figures = proxy_overhead(rows)
    if not figures:
        return []
    lines = ["", "Proxy overhead (barnabas via one proxy node against barnabas direct, the same brokers):", ""]
    verdicts = {None: "", True: ": met", False: ": not met"}
    for f in figures:
        aim = "" if f["aim"] is None else f" ({f['aim']}{verdicts[f['met']]})"
        lines.append(f"- {f['topology']}: {f['what']} {f['shown']}{aim}")
    for system in report["systems"].values():
        probe = (system.get("phases") or {}).get("connections")
        if probe:
            rss, sockets = probe["rss_kib"], probe["sockets"]
            lines.append(
                f"- {system['label']}: {probe['connections']} client connections, each after ApiVersions and "
                f"Metadata: proxy RSS {rss['before']:,} → {rss['open']:,} KiB ({rss['closed']:,} once closed), "
                f"sockets {sockets['before']} → {sockets['open']} ({probe['sockets_per_connection']} per connection)"
            )
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
    lines += _proxy_lines(report, compare_rows(report))
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
                f"{_share_or_rate(p)} = {p['mb_per_s']:,.1f} MB/s{_short_of_target(p)} "
                f"(max {p['latency_ms']['max']:,.0f} ms, producers "
                f"up to {p['worst_producer_lag_ms']:,.0f} ms behind schedule)"
                for p in runs
            )
            basis = runs[0].get("rate_of", system["label"])
            of = "" if basis == system["label"] else f" (loads are shares of {basis}'s acks=1 rate)"
            lines.append(f"- {system['label']}{of}: {rates}")
    lines += [
        "",
        "MB/s = 10^6 bytes of record values per second. Latency is from the producer's produce() call "
        "(CLOCK_MONOTONIC stamped into the record) to the consumer's consume() return; loads are shares of "
        "each system's own acks=1 produce rate in this run, except the rows at a fixed rate (records/s), the same "
        "for every system. ÷ columns are barnabas ÷ Kafka, ÷ Tansu, ÷ the "
        "limit; for ms rows lower is better, so a ratio above 1 means barnabas is slower.",
    ]
    if _has_proxy(report):
        lines += [
            "",
            "barnabas via proxy: the same brokers with one `barnabas proxy` node in front, clients bootstrapping "
            "from it only; its latency loads are shares of the direct barnabas's acks=1 rate when barnabas ran "
            "before it (the latency runs above name the basis), the same records/s, so proxy − direct is the "
            "latency the proxy adds. proxy ÷ direct is barnabas via proxy ÷ barnabas, on ms rows followed by the "
            "milliseconds added. Proxy CPU in mcore per MB/s = the proxy process's cores × 1000 ÷ the phase's "
            f"MB/s (Kroxylicious published {KROXYLICIOUS_MCORE_PER_MB_S:.0f} mcore per MB/s).",
        ]
    return "\n".join([*lines, ""])


def write_compare_report(report: dict[str, Any], output: Path) -> list[Path]:
    """Write latest.json, latest.md, latency.png and runs/<run id>.json under ``output``; the paths."""
    from ._compare_plot import plot_latency  # noqa: PLC0415 - matplotlib is the bench extra's, loaded when used

    output.mkdir(parents=True, exist_ok=True)
    (output / "runs").mkdir(exist_ok=True)
    rows = compare_rows(report)
    report = {**report, "rows": rows, "proxy_overhead": proxy_overhead(rows)}
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    paths = [output / "latest.json", output / "latest.md", output / "runs" / f"{report['run_id']}.json"]
    paths[0].write_text(text)
    paths[1].write_text(compare_markdown(report))
    paths[2].write_text(text)
    if plot := plot_latency(report, output / "latency.png"):
        paths.append(plot)
    return paths
