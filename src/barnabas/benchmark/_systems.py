"""The systems ``barnabas bench compare`` measures, started and stopped behind one small interface.

Rules this module keeps:

- A system is a product (``barnabas``, ``barnabas-proxy``, ``kafka``, ``tansu``) on a number of
  brokers (1 or 3).
  On 3 brokers every topic gets replication factor 3 and ``min.insync.replicas=2`` (the broker
  defaults set here), so acks=all waits for two followers' worth of replication.
- barnabas runs as ``python -m barnabas broker`` processes (three share one embedded SQLite
  coordination file); Kafka as KRaft JVMs (``_kafka``); Tansu as one memory-storage process.
- ``barnabas-proxy`` is the same barnabas cluster with one ``barnabas proxy`` node in front
  (``barnabas.testing.ProxyNode``, a process): its bootstrap is the proxy's address only, its
  ``pids`` include the proxy's, and ``proxy_pids`` names it so its CPU is reported apart from the
  brokers'.
- A combination that cannot be measured honestly is "not applicable" with a one-line reason
  (``not_applicable``) and is never started.
- Every started process is stopped by its pid through ``stop()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from barnabas import __version__
from barnabas.testing import ProxyNode, ServerStartError, free_ports

from ._broker import BrokerProcess
from ._kafka import KafkaCluster
from ._names import NAMES
from ._settings import BenchError
from ._tansu import TansuBroker

__all__ = ["RunningSystem", "SystemSpec", "build_system", "not_applicable"]

_CLUSTER_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SystemSpec:
    """One product on one number of brokers."""

    product: str
    brokers: int

    @property
    def key(self) -> str:
        return self.product if self.brokers == 1 else f"{self.product}-{self.brokers}"

    @property
    def name(self) -> str:
        return NAMES[self.product]

    @property
    def label(self) -> str:
        return self.name if self.brokers == 1 else f"{self.name} ({self.brokers} brokers)"


class RunningSystem(Protocol):
    """What the benchmark needs from a started system."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def pids(self) -> list[int]:
        """Every process of the system whose CPU a phase counts (proxy nodes included)."""

    @property
    def proxy_pids(self) -> list[int]:
        """Those of ``pids`` that are proxy nodes (their CPU is reported apart from the brokers')."""

    @property
    def version(self) -> str: ...

    def start(self) -> object:
        """Start every process and wait until the system answers; raises BenchError."""

    def problem(self) -> str | None:
        """Why the system stopped running (a process exited), or None."""

    def stop(self) -> None: ...


def not_applicable(spec: SystemSpec) -> str | None:
    """Why ``spec`` cannot be measured, or None."""
    if spec.product == "tansu" and spec.brokers > 1:
        return (
            "Tansu has no replication: it is leaderless and its memory storage engine lives in one process "
            "(replicas are the storage engine's job, e.g. PostgreSQL or S3)"
        )
    return None


def _replication_settings(brokers: int) -> dict[str, str]:
    replication = str(min(3, brokers))
    return {
        "default.replication.factor": replication,
        "min.insync.replicas": "2" if brokers >= 3 else "1",
        "offsets.topic.replication.factor": replication,
    }


class BarnabasCluster:
    """``size`` barnabas broker processes; more than one share an embedded SQLite coordination file."""

    def __init__(self, base: Path, size: int, settings: tuple[str, ...] = ()) -> None:
        replication = tuple(f"{k}={v}" for k, v in _replication_settings(size).items())
        coordination = f"sqlite:///{base / 'coordination.db'}" if size > 1 else None
        self.brokers = [
            BrokerProcess(base / f"barnabas-{i}", replication + settings, broker_id=i, coordination=coordination)
            for i in range(size)
        ]
        self.version = __version__

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def pids(self) -> list[int]:
        return [b.pid for b in self.brokers if b.proc is not None]

    @property
    def proxy_pids(self) -> list[int]:
        return []

    def start(self) -> BarnabasCluster:
        """Start every broker; with several, wait until Metadata lists all of them.

        Raises:
            BenchError: a broker did not start or the cluster did not form within a minute.
        """
        for broker in self.brokers:
            broker.start()
        if len(self.brokers) > 1:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            deadline = time.monotonic() + _CLUSTER_TIMEOUT_S
            seen = 0
            while seen < len(self.brokers):
                if problem := self.problem():
                    raise BenchError(problem)
                if time.monotonic() > deadline:
                    raise BenchError(f"barnabas: {seen} of {len(self.brokers)} brokers registered after a minute")
                try:
                    seen = len(admin.list_topics(timeout=2).brokers)
                except KafkaException:
                    seen = 0
                time.sleep(0.1)
        return self

    def problem(self) -> str | None:
        for broker in self.brokers:
            if broker.proc is not None and not broker.alive():
                last = broker.last_lines(1)
                return f"barnabas broker {broker.broker_id} exited with code {broker.proc.returncode}: " + (
                    last[0] if last else "no output"
                )
        return None

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()


class ProxiedCluster:
    """A BarnabasCluster with one ``barnabas proxy`` node in front; clients bootstrap from the proxy only."""

    def __init__(self, base: Path, size: int, settings: tuple[str, ...] = ()) -> None:
        self.cluster = BarnabasCluster(base, size, settings)
        self.directory = base / "proxy"
        self.proxy: ProxyNode | None = None
        self.version = __version__

    @property
    def bootstrap(self) -> str:
        assert self.proxy is not None, "not started"
        return self.proxy.bootstrap

    @property
    def pids(self) -> list[int]:
        return self.cluster.pids + self.proxy_pids

    @property
    def proxy_pids(self) -> list[int]:
        pid = self.proxy.pid if self.proxy is not None else None
        return [pid] if pid is not None else []

    def start(self) -> ProxiedCluster:
        """Start the brokers, then the proxy node, which reads the whole cluster before it serves.

        Raises:
            BenchError: a broker or the proxy did not start.
        """
        self.cluster.start()
        # A free port rather than port 0: ProxyNode names its files after the port and advertises it.
        self.proxy = ProxyNode(self.directory, self.cluster.bootstrap, free_ports(1)[0])
        try:
            self.proxy.start()
        except ServerStartError as exc:
            last = str(exc).strip().splitlines()[-1]
            raise BenchError(f"the proxy did not start: {last}") from None
        return self

    def problem(self) -> str | None:
        if problem := self.cluster.problem():
            return problem
        if self.proxy is not None and self.proxy.pid is not None and not self.proxy.running:
            last = self.proxy.tail(1)
            return f"the proxy exited with code {self.proxy.process.exit_code}: {last or 'no output'}"
        return None

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.cluster.stop()


def build_system(
    spec: SystemSpec, base: Path, kafka_lib: Path | None, barnabas_settings: tuple[str, ...] = ()
) -> RunningSystem:
    """``spec``, not yet started, with its data under ``base``: register ``stop()`` before ``start()``.

    Raises:
        BenchError: an unknown product.
    """
    base.mkdir(parents=True, exist_ok=True)
    if spec.product == "barnabas":
        return BarnabasCluster(base, spec.brokers, barnabas_settings)
    if spec.product == "barnabas-proxy":
        return ProxiedCluster(base, spec.brokers, barnabas_settings)
    if spec.product == "kafka":
        assert kafka_lib is not None
        return KafkaCluster(base, spec.brokers, kafka_lib, _replication_settings(spec.brokers))
    if spec.product == "tansu":
        return TansuBroker(base)
    raise BenchError(f"unknown system {spec.product!r}")
