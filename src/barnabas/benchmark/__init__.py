"""Throughput benchmark: loopback ceiling, librdkafka produce and consume against a broker.

``run_benchmark(BenchSettings(...))`` runs it and returns the report; ``write_report`` and
``rich_table`` present it. The ``barnabas bench`` command is a thin wrapper over these.
"""

from ._profiles import summarise_speedscope
from ._report import markdown_report, rich_table, summary_markdown, write_report
from ._runner import run_benchmark, summarise
from ._settings import BenchError, BenchSettings, consumer_config, producer_config

__all__ = [
    "BenchError",
    "BenchSettings",
    "consumer_config",
    "markdown_report",
    "producer_config",
    "rich_table",
    "run_benchmark",
    "summarise",
    "summarise_speedscope",
    "summary_markdown",
    "write_report",
]
