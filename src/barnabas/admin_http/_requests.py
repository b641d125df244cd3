"""Requests per API and their total time, counted on the hot path and exposed under Kafka's names.

Kafka's RequestMetrics MBeans as the Prometheus JMX exporter names them (lowercased):
``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9`` becomes
``kafka_network_requestmetrics_requests_total{request="Produce",version="9"}``, and TotalTimeMs
``kafka_network_requestmetrics_totaltimems``, here a Prometheus histogram in milliseconds (buckets,
``_sum`` and ``_count``) rather than the exporter's precomputed quantiles, so it aggregates across
brokers.

Rules this module keeps:

- Counting is plain integer arithmetic on the event loop, no locks: measured at about 0.6 µs per
  request (the clock read included), where prometheus-client's Counter and Histogram children
  (a lock each) take about 2.5 µs. The families are built only at scrape time, on the loop
  (``families``), and rendered by prometheus-client.
- The time of a request runs from its frame being taken up to its answer being ready (for a
  pipelined Produce, the acks included); the time a ready answer then waits behind earlier ones
  to be written is not counted.
- API names come from the caller at scrape time (the API table's), never from the hot path.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

__all__ = ["TOTAL_TIME_BUCKETS_MS", "RequestMetrics"]

#: Upper bounds of the total-time histogram's buckets, in milliseconds (+Inf is implied).
TOTAL_TIME_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                         30000.0)  # fmt: skip


class _ApiStats:
    __slots__ = ("buckets", "sum_ms", "versions")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        #: Per bucket, not cumulative; the last one is +Inf.
        self.buckets = [0] * (len(TOTAL_TIME_BUCKETS_MS) + 1)
        self.sum_ms = 0.0


class RequestMetrics:
    """Requests per API key and version, and a histogram of their total time; used on the event loop only."""

    def __init__(self) -> None:
        self._apis: dict[int, _ApiStats] = {}

    def record(self, api_key: int, version: int, seconds: float) -> None:
        """Count one request of ``api_key`` v``version`` that took ``seconds``."""
        stats = self._apis.get(api_key)
        if stats is None:
            stats = self._apis[api_key] = _ApiStats()
        versions = stats.versions
        versions[version] = versions.get(version, 0) + 1
        ms = seconds * 1000.0
        stats.buckets[bisect.bisect_left(TOTAL_TIME_BUCKETS_MS, ms)] += 1
        stats.sum_ms += ms

    def record_since(self, api_key: int, version: int, started: float, _: object = None) -> None:
        """Count one request that started at ``started`` (``time.perf_counter()``) and is answered now.

        The trailing argument lets it be a future's done callback (``functools.partial``).
        """
        self.record(api_key, version, time.perf_counter() - started)

    def count(self, api_key: int) -> int:
        """Requests of ``api_key`` counted so far, every version."""
        stats = self._apis.get(api_key)
        return sum(stats.versions.values()) if stats is not None else 0

    def families(self, name_of: Callable[[int], str]) -> list[Metric]:
        """The requests counter and total-time histogram, API keys named by ``name_of``."""
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests received, per API and version (Kafka's RequestMetrics RequestsPerSec).",
            labels=("request", "version"),
        )
        total_time = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request being taken up to its answer being ready (Kafka's TotalTimeMs).",
            labels=("request",),
        )
        bounds = [*map(floatToGoString, TOTAL_TIME_BUCKETS_MS), "+Inf"]
        for api_key, stats in sorted(self._apis.items()):
            name = name_of(api_key)
            for version, count in sorted(stats.versions.items()):
                requests.add_metric([name, str(version)], count)
            cumulative, running = [], 0
            for bound, count in zip(bounds, stats.buckets, strict=True):
                running += count
                cumulative.append((bound, float(running)))
            total_time.add_metric([name], cumulative, stats.sum_ms)
        return [requests, total_time]
