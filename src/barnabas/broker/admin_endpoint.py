"""The broker's admin endpoint (``admin.listeners``): what /readyz asks of it, what /metrics exposes.

/healthz is the endpoint's own (the event loop answers in time). The broker is *ready*, the
condition Kubernetes takes a pod out of its Service for and a rolling restart waits on, when

- it has joined the cluster (registered with a broker epoch, its services built) and is not
  shutting down;
- its coordination session is connected;
- no partition waits for a new leader election because of it: the stored state names it leader of
  a partition in an earlier incarnation (KIP-380: it restarted, and the controller must elect
  anew before anyone serves the partition);
- it is in the ISR, in this incarnation, of every partition it follows that has a leader: it has
  caught up, so it holds no partition below ``min.insync.replicas`` and restarting the next
  broker takes none offline.

/metrics is a per-broker registry (several brokers may share a process in tests): the process's
and the platform's collectors from prometheus-client, and the broker's own families
(``metrics_collector``), built on the event loop at scrape time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.metrics_core import Metric

from barnabas.admin_http import AdminEndpoint, LoopCollector
from barnabas.config import BrokerConfig
from barnabas.coordination import Session, SessionState

from .metrics_collector import broker_families
from .state import BrokerState

__all__ = ["BrokerAdmin", "broker_readiness"]

#: Partitions named in a readiness reason at most (the count says how many there are).
NAMED_PARTITIONS = 5


def broker_readiness(state: BrokerState | None, session: SessionState | None, stopping: bool) -> list[str]:
    """The reasons the broker is not ready, empty when it is (see the module's rules)."""
    if stopping:
        return ["shutting down"]
    if state is None:
        return ["not registered in the cluster yet"]
    reasons = []
    if session is not SessionState.CONNECTED:
        reasons.append(f"coordination session is {session.value if session is not None else 'not open'}")
    replicas, node = state.replicas, state.node
    stale = replicas.led_by_an_earlier_incarnation()
    if stale:
        reasons.append(f"{len(stale)} partitions it led before restarting wait for a new election: {_named(stale)}")
    me, epoch = node.broker_id, node.broker_epoch
    behind = []
    for tp in replicas.following:
        partition_state = node.partition_state(*tp)
        if partition_state is not None and partition_state.leader >= 0 and not partition_state.in_sync(me, epoch):
            behind.append(tp)
    if behind:
        reasons.append(f"not in the ISR of {len(behind)} partitions it follows: {_named(behind)}")
    return reasons


def _named(partitions: Iterable[tuple[str, int]]) -> str:
    ordered = sorted(partitions)
    names = ", ".join(f"{topic}-{partition}" for topic, partition in ordered[:NAMED_PARTITIONS])
    return names + (", …" if len(ordered) > NAMED_PARTITIONS else "")


class BrokerAdmin:
    """One broker's admin endpoint.

    Args:
        config: the broker's settings (``admin.listeners`` must name a listener).
        joined: the broker's complete state, None until it has joined the cluster.
        session: the broker's current coordination session, if any.
        name: names the serving thread.
    """

    def __init__(
        self,
        config: BrokerConfig,
        joined: Callable[[], BrokerState | None],
        session: Callable[[], Session | None],
        name: str = "broker admin",
    ) -> None:
        listener = config.admin_listener
        if listener is None:
            raise ValueError("admin.listeners names no listener")
        self._joined = joined
        self._session = session
        self._stopping = False
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._listener = listener
        self._probe_timeout_s = int(config["admin.probe.timeout.ms"]) / 1000
        self._name = name
        self.endpoint: AdminEndpoint | None = None

    def start(self) -> int:
        """Bind and serve; the bound port. Call it on the broker's event loop.

        Raises:
            OSError: the admin listener cannot be bound.
        """
        self.registry.register(LoopCollector(asyncio.get_running_loop(), self.families))
        self.endpoint = AdminEndpoint(
            self._listener.host,
            self._listener.port,
            registry=self.registry,
            readiness=self.readiness,
            probe_timeout_s=self._probe_timeout_s,
            name=self._name,
        )
        return self.endpoint.start()

    @property
    def port(self) -> int:
        if self.endpoint is None:
            raise RuntimeError("the admin endpoint is not serving")
        return self.endpoint.port

    def shutting_down(self) -> None:
        """The broker is stopping: /readyz fails from now on."""
        self._stopping = True

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()
            self.endpoint = None

    def session_state(self) -> SessionState | None:
        session = self._session()
        return session.state if session is not None else None

    def readiness(self) -> list[str]:
        """Why the broker is not ready (empty: it is); runs on the event loop."""
        return broker_readiness(self._joined(), self.session_state(), self._stopping)

    def families(self) -> list[Metric]:
        """The broker's metric families now (none before it has joined); runs on the event loop."""
        state = self._joined()
        return broker_families(state, self.session_state) if state is not None else []
