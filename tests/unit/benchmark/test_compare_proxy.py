"""barnabas-proxy as a compare system: its name, its CPU counted apart, and the rate its latency runs at."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from barnabas.benchmark._compare import CompareSettings, _Compare
from barnabas.benchmark._runner import _CpuMeter
from barnabas.benchmark._systems import ProxiedCluster, SystemSpec, build_system


def test_the_proxy_system_is_named_and_keyed_apart_from_barnabas() -> None:
    assert SystemSpec("barnabas-proxy", 1).label == "barnabas via proxy"
    three = SystemSpec("barnabas-proxy", 3)
    assert (three.key, three.label) == ("barnabas-proxy-3", "barnabas via proxy (3 brokers)")
    assert "barnabas-proxy" in CompareSettings().systems  # measured by default


def test_an_unstarted_proxied_cluster_has_no_processes(tmp_path: Path) -> None:
    system = build_system(SystemSpec("barnabas-proxy", 3), tmp_path, None)
    assert isinstance(system, ProxiedCluster)
    assert (system.pids, system.proxy_pids, system.problem()) == ([], [], None)
    assert len(system.cluster.brokers) == 3
    system.stop()  # nothing started: nothing to stop, no error


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_the_cpu_meter_counts_proxy_processes_apart() -> None:
    meter = _CpuMeter((), None, (os.getpid(),))
    _spin(0.2)
    cpu = meter.finish(0.0)
    assert cpu["proxy"] is not None and cpu["proxy"] > 0
    assert cpu["broker"] is None  # no broker pids given
    without = _CpuMeter((), None).finish(0.0)
    assert "proxy" not in without  # `barnabas bench` reports keep their shape


def _compare(tmp_path: Path, systems: dict[str, dict[str, Any]]) -> _Compare:
    settings = CompareSettings(systems=("barnabas", "barnabas-proxy"), show_progress=False)
    compare = _Compare(settings, Console(quiet=True), Progress(disable=True), tmp_path)
    compare.systems.update(systems)
    return compare


def _measured(rate: int, label: str = "barnabas") -> dict[str, Any]:
    return {"label": label, "status": "ok", "phases": {"produce_acks_1": {"records_per_s": rate}}}


def test_the_proxy_runs_its_latency_loads_at_the_direct_rate(tmp_path: Path) -> None:
    compare = _compare(tmp_path, {"barnabas": _measured(500_000)})
    own = {"produce_acks_1": {"records_per_s": 350_000}}
    assert compare._latency_basis(SystemSpec("barnabas-proxy", 1), own) == (500_000, "barnabas")
    assert compare._latency_basis(SystemSpec("barnabas", 1), own) == (350_000, "barnabas")


def test_without_a_direct_rate_the_proxy_uses_its_own(tmp_path: Path) -> None:
    own = {"produce_acks_1": {"records_per_s": 350_000}}
    proxy = SystemSpec("barnabas-proxy", 1)
    assert _compare(tmp_path, {})._latency_basis(proxy, own) == (350_000, "barnabas via proxy")
    failed = {"barnabas": {"label": "barnabas", "status": "failed", "reason": "x"}}
    assert _compare(tmp_path, failed)._latency_basis(proxy, own) == (350_000, "barnabas via proxy")
    # Another topology's barnabas is not the same brokers.
    other = {"barnabas-3": _measured(200_000, "barnabas (3 brokers)")}
    assert _compare(tmp_path, other)._latency_basis(proxy, own) == (350_000, "barnabas via proxy")
