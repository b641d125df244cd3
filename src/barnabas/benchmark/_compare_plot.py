"""The latency-percentile plot of a compare report (PNG, matplotlib's Agg backend, no display).

Two panels share the y axis (latency, log scale): percentiles against load as a share of each
system's own maximum (how the loads were chosen), and against the absolute rate (MB/s). One
colour per system; p50 solid, p99 dashed, p99.9 dotted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_latency"]

_STYLES = {"p50": "-", "p99": "--", "p99.9": ":"}
_COLOURS = {"barnabas": "tab:blue", "barnabas-proxy": "tab:purple", "kafka": "tab:orange", "tansu": "tab:green"}


def plot_latency(report: dict[str, Any], path: Path) -> Path | None:
    """Draw the latency percentiles of every system with latency runs into ``path``; None if none has."""
    series = []
    for system in report["systems"].values():
        runs = sorted(
            (p for p in (system.get("phases") or {}).values() if p["kind"] == "latency" and p["load"] is not None),
            key=lambda p: p["load"],
        )
        if runs:
            series.append((system, runs))
    if not series:
        return None
    figure, (by_load, by_rate) = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for system, runs in series:
        colour = _COLOURS.get(system["product"], "tab:gray")
        for percentile, style in _STYLES.items():
            latencies = [p["latency_ms"][percentile] for p in runs]
            label = f"{system['label']} {percentile}"
            by_load.plot([p["load"] * 100 for p in runs], latencies, style, color=colour, marker="o", label=label)
            by_rate.plot([p["mb_per_s"] for p in runs], latencies, style, color=colour, marker="o", label=label)
    by_load.set_yscale("log")
    by_load.set_xlabel("load, % of the system's own acks=1 produce maximum (via proxy: of barnabas direct's)")
    by_load.set_ylabel("end-to-end latency, ms (log)")
    by_rate.set_xlabel("rate, MB/s of 1 KiB records")
    for axes in (by_load, by_rate):
        axes.grid(True, which="both", alpha=0.3)
    by_rate.legend(fontsize="small", ncol=len(series))
    env = report["environment"]
    figure.suptitle(
        f"barnabas bench compare {report['run_id']}: end-to-end latency (librdkafka, acks=1), {env['cpu_count']} cores"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
