"""The broker's admin endpoint on a complete in-memory broker: readiness, and the endpoint served from it.

The broker binds no Kafka listener here (``in_memory.py``), but with ``admin.listeners`` its admin
endpoint listens on a real port, answered from a thread that asks the broker's event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from barnabas.broker.admin_endpoint import broker_readiness
from barnabas.coordination import SessionState
from tests.support.admin_metrics import get
from tests.support.requests import batch
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker
from tests.unit.broker.test_handlers import create, produce

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
ADMIN = {"admin.listeners": "http://127.0.0.1:0", "admin.probe.timeout.ms": "200"}


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path, ADMIN) as broker:
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_not_ready_before_joining_the_cluster() -> None:
    assert broker_readiness(None, None, stopping=False) == ["not registered in the cluster yet"]


def test_ready_once_joined_with_a_connected_session(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[str]:
        return broker_readiness(broker.state, SessionState.CONNECTED, stopping=False)

    assert run(tmp_path, scenario) == []


def test_not_ready_without_a_connected_session_or_while_stopping(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[list[str]]:
        return [
            broker_readiness(broker.state, SessionState.SUSPENDED, stopping=False),
            broker_readiness(broker.state, None, stopping=False),
            broker_readiness(broker.state, SessionState.CONNECTED, stopping=True),
        ]

    suspended, none, stopping = run(tmp_path, scenario)
    assert suspended == ["coordination session is suspended"]
    assert none == ["coordination session is not open"]
    assert stopping == ["shutting down"]


def test_the_endpoint_serves_health_readiness_and_the_brokers_metrics(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[tuple[int, str]]:
        await create(broker, "scraped")
        await produce(broker, "scraped", batch(b"a", b"b"))
        port = broker.broker.admin_port
        return [await asyncio.to_thread(get, port, path) for path in ("/healthz", "/readyz", "/metrics")]

    healthz, readyz, (status, text) = run(tmp_path, scenario)
    assert healthz == (200, "ok\n") and readyz == (200, "ready\n") and status == 200
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
               for s in f.samples}  # fmt: skip
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "scraped"),))] == 2
    assert samples[("kafka_server_replicamanager_leadercount", ())] >= 1
    assert samples[("barnabas_coordination_session_up", ())] == 1
    assert ("process_cpu_seconds_total", ()) in samples  # prometheus-client's process collector


def test_a_blocked_event_loop_fails_healthz(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[tuple[int, str], tuple[int, str]]:
        port = broker.broker.admin_port
        answers: list[tuple[int, str]] = []
        probe = threading.Thread(target=lambda: answers.append(get(port, "/healthz")))
        probe.start()
        probe.join(30)  # the broker's loop is blocked here, until the probe has its answer
        return answers[0], await asyncio.to_thread(get, port, "/healthz")

    blocked, free = run(tmp_path, scenario)
    assert blocked == (503, "the event loop did not answer within 0.2 s\n")
    assert free == (200, "ok\n")
