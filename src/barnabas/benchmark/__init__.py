"""Throughput benchmark: loopback ceiling, librdkafka produce and consume against a broker.

``run_benchmark(BenchSettings(...))`` runs it and returns the report; ``write_report`` and
``rich_table`` present it. ``run_compare(CompareSettings(...))`` measures barnabas (direct and
through one proxy node), Apache Kafka and Tansu side by side; ``write_compare_report``,
``compare_rich_table`` and ``proxy_overhead`` present that. The
``barnabas bench`` and ``barnabas bench compare`` commands are thin wrappers over these.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._compare import CompareSettings, run_compare
    from ._compare_report import compare_rich_table, compare_rows, proxy_overhead, write_compare_report
    from ._names import WORKLOADS
    from ._profiles import summarise_speedscope
    from ._report import markdown_report, rich_table, summary_markdown, write_report
    from ._runner import run_benchmark, summarise
    from ._settings import BenchError, BenchSettings, consumer_config, producer_config

#: Where each public name lives: loaded on first use, so `barnabas --help` (whose parser reads
#: ``_names``) does not import the benchmark's clients and the protocol library.
_HOMES = {
    "WORKLOADS": "._names",
    "CompareSettings": "._compare", "run_compare": "._compare",
    "compare_rich_table": "._compare_report", "compare_rows": "._compare_report",
    "proxy_overhead": "._compare_report", "write_compare_report": "._compare_report",
    "summarise_speedscope": "._profiles",
    "markdown_report": "._report", "rich_table": "._report", "summary_markdown": "._report", "write_report": "._report",
    "run_benchmark": "._runner", "summarise": "._runner",
    "BenchError": "._settings", "BenchSettings": "._settings", "consumer_config": "._settings",
    "producer_config": "._settings",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


__all__ = [
    "WORKLOADS",
    "BenchError",
    "BenchSettings",
    "CompareSettings",
    "compare_rich_table",
    "compare_rows",
    "consumer_config",
    "markdown_report",
    "producer_config",
    "proxy_overhead",
    "rich_table",
    "run_benchmark",
    "run_compare",
    "summarise",
    "summarise_speedscope",
    "summary_markdown",
    "write_compare_report",
    "write_report",
]
