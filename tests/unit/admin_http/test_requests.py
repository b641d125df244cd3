"""RequestMetrics: what the hot path counts and how it reads as Prometheus families."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from barnabas.admin_http import TOTAL_TIME_BUCKETS_MS, RequestMetrics

NAMES = {0: "Produce", 3: "Metadata"}


class Fixed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def exposed(requests: RequestMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The families rendered by prometheus-client and parsed back: sample (name, labels) -> value."""
    registry = CollectorRegistry()
    registry.register(Fixed(requests.families(NAMES.__getitem__)))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_requests_are_counted_per_api_and_version() -> None:
    requests = RequestMetrics()
    for version in (9, 9, 11):
        requests.record(0, version, 0.001)
    requests.record(3, 12, 0.001)
    samples = exposed(requests)
    name = "kafka_network_requestmetrics_requests_total"
    assert samples[(name, (("request", "Produce"), ("version", "9")))] == 2
    assert samples[(name, (("request", "Produce"), ("version", "11")))] == 1
    assert samples[(name, (("request", "Metadata"), ("version", "12")))] == 1
    assert requests.count(0) == 3 and requests.count(1) == 0


def test_total_time_is_a_cumulative_histogram_in_milliseconds() -> None:
    requests = RequestMetrics()
    for ms in (0.2, 0.5, 0.7, 3.0, 60_000.0):  # 0.5 lands in le=0.5: bounds are inclusive, as Prometheus' are
        requests.record(0, 9, ms / 1000)
    samples = exposed(requests)

    def bucket(le: str) -> float:
        return samples[("kafka_network_requestmetrics_totaltimems_bucket", (("le", le), ("request", "Produce")))]

    assert bucket("0.5") == 2
    assert bucket("1.0") == 3
    assert bucket("5.0") == 4
    assert bucket(str(TOTAL_TIME_BUCKETS_MS[-1])) == 4
    assert bucket("+Inf") == 5
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 5
    total = samples[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))]
    assert abs(total - 60_004.4) < 1e-6


def test_record_since_measures_from_a_perf_counter_start() -> None:
    requests = RequestMetrics()
    requests.record_since(3, 12, float("-inf"), object())  # as a done callback: the future is ignored
    samples = exposed(requests)
    assert samples[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "+Inf"), ("request", "Metadata")))] == 1
