"""The admin endpoint on a real event loop and real sockets: probes that ask the loop, prometheus-client's /metrics.

A blocked loop is a real one: the test's coroutine blocks its own loop by joining the thread that
probes the endpoint, so the probe can only be answered by the endpoint's timeout.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from barnabas.admin_http import AdminEndpoint, LoopCollector, LoopUnresponsiveError, call_on_loop

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
PROBE_TIMEOUT_S = 0.2


def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    """An HTTP request to the endpoint, from the calling thread: (status, body)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Served:
    """An endpoint serving a registry with one loop-built gauge and a readiness that says what ``reasons`` holds."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.value = 1.0
        self.registry = CollectorRegistry()
        self.endpoint = AdminEndpoint(
            "127.0.0.1", 0, registry=self.registry, readiness=lambda: self.reasons, probe_timeout_s=PROBE_TIMEOUT_S
        )

    def families(self) -> list[Metric]:
        return [GaugeMetricFamily("test_value", "A value read on the loop.", value=self.value)]

    async def get(self, path: str, method: str = "GET") -> tuple[int, str]:
        return await asyncio.to_thread(get, self.endpoint.port, path, method)


def run(scenario: Callable[[Served], Awaitable[T]]) -> T:
    async def main() -> T:
        served = Served()
        served.registry.register(LoopCollector(asyncio.get_running_loop(), served.families, PROBE_TIMEOUT_S))
        served.endpoint.start()
        try:
            return await scenario(served)
        finally:
            await served.endpoint.stop()

    return asyncio.run(main())


def while_blocked(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` from another thread while this thread (the event loop's) waits for the answer, blocked."""
    answers: list[tuple[int, str]] = []
    probe = threading.Thread(target=lambda: answers.append(get(port, path)))
    probe.start()
    probe.join(30)  # blocks the event loop until the endpoint has answered without it
    assert answers, "no answer within 30 s"
    return answers[0]


def scraped(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def test_healthz_answers_while_the_loop_runs() -> None:
    assert run(lambda served: served.get("/healthz")) == (200, "ok\n")


def test_readyz_lists_the_reasons_until_there_are_none() -> None:
    async def scenario(served: Served) -> list[tuple[int, str]]:
        served.reasons = ["not registered in the cluster yet", "coordination session is lost"]
        first = await served.get("/readyz")
        served.reasons = []
        return [first, await served.get("/readyz")]

    assert run(scenario) == [
        (503, "not registered in the cluster yet\ncoordination session is lost\n"),
        (200, "ready\n"),
    ]


def test_a_blocked_loop_fails_healthz_and_readyz_and_drops_the_loops_metrics() -> None:
    async def scenario(served: Served) -> list[tuple[int, str]]:
        port = served.endpoint.port
        healthy = await served.get("/healthz")
        blocked = [while_blocked(port, path) for path in ("/healthz", "/readyz", "/metrics")]
        return [healthy, *blocked, await served.get("/healthz")]

    healthy, healthz, readyz, metrics, again = run(scenario)
    assert healthy == (200, "ok\n")
    assert healthz == (503, f"the event loop did not answer within {PROBE_TIMEOUT_S:g} s\n")
    assert readyz == healthz
    assert metrics[0] == 200 and "test_value" not in scraped(metrics[1])
    assert "process_cpu_seconds_total" not in scraped(metrics[1])  # the registry holds only what was registered
    assert again == (200, "ok\n")


def test_metrics_are_prometheus_clients_exposition_of_the_registry() -> None:
    async def scenario(served: Served) -> list[dict[str, float]]:
        first = scraped((await served.get("/metrics"))[1])
        served.value = 42.0
        return [first, scraped((await served.get("/metrics"))[1])]

    first, second = run(scenario)
    assert first["test_value"] == 1.0 and second["test_value"] == 42.0


def test_other_paths_and_methods_are_refused() -> None:
    async def scenario(served: Served) -> list[tuple[int, str]]:
        return [await served.get("/"), await served.get("/healthz", "POST")]

    (missing, why), (posted, _) = run(scenario)
    assert missing == 404 and "/healthz, /readyz and /metrics" in why
    assert posted == 405


def test_stop_closes_the_port() -> None:
    async def scenario(served: Served) -> int:
        port = served.endpoint.port
        await served.endpoint.stop()
        return port

    port = run(scenario)
    with pytest.raises(urllib.error.URLError):
        get(port, "/healthz")


def test_call_on_loop_runs_on_the_loops_thread_and_passes_errors_on() -> None:
    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        ran_on = await asyncio.to_thread(call_on_loop, loop, threading.get_ident, 5.0)
        with pytest.raises(ZeroDivisionError):
            await asyncio.to_thread(call_on_loop, loop, lambda: 1 // 0, 5.0)
        return ran_on, threading.get_ident()

    ran_on, loop_thread = asyncio.run(scenario())
    assert ran_on == loop_thread


def test_call_on_a_closed_loop_is_unresponsive() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(LoopUnresponsiveError, match="closed"):
        call_on_loop(loop, lambda: None, 1.0)


def test_a_loop_collector_called_on_its_own_loop_does_not_wait_for_itself() -> None:
    async def scenario() -> list[Metric]:
        collector = LoopCollector(asyncio.get_running_loop(), lambda: [GaugeMetricFamily("x", "x", value=1)], 0.1)
        return list(collector.collect())

    (family,) = asyncio.run(scenario())
    assert family.name == "x"
