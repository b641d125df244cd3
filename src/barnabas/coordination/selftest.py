"""Self-test and latency measurement of a coordination backend, behind ``barnabas coordination check``.

Everything happens under a fresh ``selftest/<random>/`` prefix, which is removed afterwards:
storage round trip, an ephemeral key that must vanish when its session closes, an election won
and resigned, then timing — sequential compare-and-set latency, CAS throughput from several
concurrent clients, and watch notification latency (put, then wait for the hint).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .api import Changed, Metastore, Resync
from .election import LeaderElection
from .registry import open_metastore
from .storage import Storage

__all__ = ["LatencySummary", "SelfTestReport", "run_selftest"]


@dataclass(frozen=True)
class LatencySummary:
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> LatencySummary:
        ordered = sorted(seconds)
        if not ordered:
            return cls(0, 0.0, 0.0, 0.0)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return cls(len(ordered), statistics.median(ordered) * 1000, p99 * 1000, ordered[-1] * 1000)


@dataclass
class SelfTestReport:
    url: str
    checks: dict[str, str] = field(default_factory=dict)
    cas_latency: LatencySummary | None = None
    cas_ops_per_s: float | None = None
    cas_clients: int = 0
    watch_latency: LatencySummary | None = None

    @property
    def ok(self) -> bool:
        return all(result == "ok" for result in self.checks.values())

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


async def _timed(label: str, report: SelfTestReport, step: Callable[[], object]) -> None:
    try:
        result = step()
        if asyncio.iscoroutine(result):
            await result
    except Exception as exc:
        report.checks[label] = f"failed: {type(exc).__name__}: {exc}"
    else:
        report.checks[label] = "ok"


async def _storage_round_trip(storage: Storage, prefix: str) -> None:
    key = prefix + "round-trip"
    assert await storage.put_if_absent(key, b"1") == 1
    assert await storage.compare_and_set(key, b"2", 1) == 2
    found = await storage.get(key)
    assert found is not None and found.value == b"2"
    assert await storage.delete(key, 2)


async def _ephemeral(metastore: Metastore, storage: Storage, prefix: str, ttl_s: float) -> None:
    session = await metastore.open_session(ttl_s)
    key = prefix + "ephemeral"
    await storage.put_if_absent(key, b"x", session)
    await session.close()
    deadline = time.monotonic() + ttl_s + 5
    while await storage.get(key) is not None:
        if time.monotonic() > deadline:
            raise AssertionError("the closed session's ephemeral key did not vanish")
        await asyncio.sleep(0.05)


def _election_name(prefix: str) -> str:
    return prefix.strip("/")


async def _election(metastore: Metastore, prefix: str, ttl_s: float) -> None:
    session = await metastore.open_session(ttl_s)
    election = LeaderElection(metastore, _election_name(prefix))
    fence = await election.nominate(session, "selftest")
    assert await election.resign(fence)
    await session.close()


async def _cas_latency(storage: Storage, key: str, count: int) -> list[float]:
    version = await storage.put_if_absent(key, b"0")
    samples = []
    for i in range(count):
        began = time.perf_counter()
        version = await storage.compare_and_set(key, str(i).encode(), version)
        samples.append(time.perf_counter() - began)
    return samples


async def _cas_throughput(url: str, prefix: str, clients: int, duration_s: float) -> float:
    metastores = [await open_metastore(url) for _ in range(clients)]
    try:
        deadline = time.monotonic() + duration_s

        async def client(index: int) -> int:
            storage = Storage(metastores[index])
            key = f"{prefix}throughput/{index}"
            version = await storage.put_if_absent(key, b"0")
            done = 0
            while time.monotonic() < deadline:
                version = await storage.compare_and_set(key, b"x", version)
                done += 1
            return done

        began = time.monotonic()
        counts = await asyncio.gather(*(client(i) for i in range(clients)))
        return sum(counts) / (time.monotonic() - began)
    finally:
        for metastore in metastores:
            await metastore.close()


async def _watch_latency(url: str, storage: Storage, prefix: str, count: int) -> list[float]:
    watcher = await open_metastore(url)
    watch = watcher.watch(prefix + "watch/")
    samples = []
    try:
        async with asyncio.timeout(30):
            assert isinstance(await anext(watch), Resync)
        for i in range(count):
            key = f"{prefix}watch/{i}"
            began = time.perf_counter()
            await storage.put_if_absent(key, b"x")
            async with asyncio.timeout(30):
                while True:
                    event = await anext(watch)
                    if isinstance(event, Resync) or (isinstance(event, Changed) and key in event.keys):
                        break
            samples.append(time.perf_counter() - began)
    finally:
        await watch.aclose()
        await watcher.close()
    return samples


async def run_selftest(
    url: str,
    *,
    ttl_s: float = 5.0,
    cas_count: int = 200,
    watch_count: int = 50,
    clients: int = 4,
    throughput_s: float = 3.0,
) -> SelfTestReport:
    """Run the self-test and the measurements against ``url``; never raises for backend faults
    found along the way (they are reported), only for an unreachable backend.

    Raises:
        CoordinationError: the backend cannot be opened.
    """
    report = SelfTestReport(url=url)
    prefix = f"selftest/{uuid.uuid4().hex[:12]}/"
    metastore = await open_metastore(url)
    storage = Storage(metastore)
    try:
        await _timed("storage", report, lambda: _storage_round_trip(storage, prefix))
        await _timed("ephemeral keys", report, lambda: _ephemeral(metastore, storage, prefix, ttl_s))
        await _timed("election", report, lambda: _election(metastore, prefix, ttl_s))
        if report.ok:
            report.cas_latency = LatencySummary.of(await _cas_latency(storage, prefix + "cas", cas_count))
            report.cas_clients = clients
            report.cas_ops_per_s = await _cas_throughput(url, prefix, clients, throughput_s)
            report.watch_latency = LatencySummary.of(await _watch_latency(url, storage, prefix, watch_count))
    finally:
        with contextlib.suppress(Exception):
            # A throwaway election's epoch key may go with it; real elections keep theirs forever.
            for scope in (prefix, f"elections/{_election_name(prefix)}/"):
                for key, versioned in (await storage.list(scope)).items():
                    await storage.delete(key, versioned.version)
        await metastore.close()
    return report
