"""Throughput benchmark: loopback ceiling, librdkafka produce and consume against a broker.

``run_benchmark(BenchSettings(...))`` runs it and returns the report; ``write_report`` and
``rich_table`` present it. ``run_compare(CompareSettings(...))`` measures barnabas, Apache Kafka
and Tansu side by side; ``write_compare_report`` and ``compare_rich_table`` present that. The
``barnabas bench`` and ``barnabas bench compare`` commands are thin wrappers over these.
"""

from ._compare import WORKLOADS, CompareSettings, run_compare
from ._compare_report import compare_rich_table, compare_rows, write_compare_report
from ._profiles import summarise_speedscope
from ._report import markdown_report, rich_table, summary_markdown, write_report
from ._runner import run_benchmark, summarise
from ._settings import BenchError, BenchSettings, consumer_config, producer_config

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
    "rich_table",
    "run_benchmark",
    "run_compare",
    "summarise",
    "summarise_speedscope",
    "summary_markdown",
    "write_compare_report",
    "write_report",
]
