"""A proxy node's admin endpoint (``admin.listeners``): what /readyz asks of it, what /metrics exposes.

/healthz is the endpoint's own (the event loop answers in time). A proxy node is *ready* when

- it serves (its listener is up and its router built) and is not shutting down;
- it has a cluster view: brokers known, read from the cluster within the last three
  ``metadata.max.age.ms`` (a view no broker has refreshed for longer routes on guesses);
- with ``coordination.url``, it is a member of the group ``proxies`` (joined, session connected),
  so the other nodes list it in their Metadata answers (after a hot restart, once the process it
  took over from has left the group and this one has joined under the same node id).

/metrics: the requests it answered per API and version with their total time, under the broker's
names (``kafka_network_requestmetrics_*``: a proxy node is the brokers its clients see, and its
time includes the brokers'), its client connections, and ``barnabas_proxy_*`` gauges of its
cluster view and peers; plus prometheus-client's process and platform collectors.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sized
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from barnabas.admin_http import AdminEndpoint, LoopCollector, RequestMetrics
from barnabas.config import ProxyConfig

from .routes import api_name

if TYPE_CHECKING:
    from .cluster_view import ClusterView
    from .membership import ProxyMembership
    from .nodes import ProxyNodes
    from .router import Router

__all__ = ["ProxyAdmin", "ProxyNodeParts", "proxy_readiness"]

#: A cluster view older than this many ``metadata.max.age.ms`` makes the node unready.
STALE_VIEW_AGES = 3


class ProxyNodeParts(Protocol):
    """What the admin endpoint reads of a proxy node (``barnabas.proxy.Proxy``); None until built."""

    @property
    def view(self) -> ClusterView: ...
    @property
    def sessions(self) -> Sized: ...
    @property
    def nodes(self) -> ProxyNodes | None: ...
    @property
    def membership(self) -> ProxyMembership | None: ...
    @property
    def router(self) -> Router | None: ...


def proxy_readiness(proxy: ProxyNodeParts, max_view_age_s: float, *, stopping: bool = False) -> list[str]:
    """The reasons the proxy node is not ready, empty when it is (see the module's rules)."""
    if stopping:
        return ["shutting down"]
    if proxy.router is None:
        return ["not serving yet"]
    reasons = []
    view = proxy.view
    age_s = time.monotonic() - view.refreshed_at
    if not view.brokers:
        reasons.append("no broker of the cluster is known")
    elif age_s > max_view_age_s:
        reasons.append(f"the cluster view was last read {age_s:.0f} s ago (no broker answers)")
    membership = proxy.membership
    if membership is not None and not membership.joined:
        why = (
            "the process it took over from has not left it yet"
            if membership.waiting_to_join
            else "its coordination session is not connected"
        )
        reasons.append(f"not a member of the group proxies ({why})")
    return reasons


class ProxyAdmin:
    """A proxy node's admin endpoint; ``requests`` is where its client sessions count what they answer."""

    def __init__(self, config: ProxyConfig, proxy: ProxyNodeParts, name: str = "proxy admin") -> None:
        listener = config.admin_listener
        if listener is None:
            raise ValueError("admin.listeners names no listener")
        self.proxy = proxy
        self.requests = RequestMetrics()
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._stopping = False
        self._max_view_age_s = STALE_VIEW_AGES * int(config["metadata.max.age.ms"]) / 1000
        self.endpoint = AdminEndpoint(
            listener.host,
            listener.port,
            registry=self.registry,
            readiness=self.readiness,
            probe_timeout_s=int(config["admin.probe.timeout.ms"]) / 1000,
            name=name,
        )

    def start(self, sock: socket.socket | None = None) -> int:
        """Bind (or serve on ``sock``, handed over by the process a hot restart replaces) and serve; the bound
        port. Call it on the proxy's event loop.

        Raises:
            OSError: the admin listener cannot be bound.
        """
        self.registry.register(LoopCollector(asyncio.get_running_loop(), self.families))
        return self.endpoint.start(sock)

    @property
    def port(self) -> int:
        return self.endpoint.port

    @property
    def listening_socket(self) -> socket.socket:
        return self.endpoint.listening_socket

    def shutting_down(self) -> None:
        """The node is stopping: /readyz fails from now on."""
        self._stopping = True

    async def stop(self) -> None:
        await self.endpoint.stop()

    def readiness(self) -> list[str]:
        """Why the node is not ready (empty: it is); runs on the event loop."""
        return proxy_readiness(self.proxy, self._max_view_age_s, stopping=self._stopping)

    def families(self) -> list[Metric]:
        """The node's metric families now; runs on the event loop."""
        proxy, view = self.proxy, self.proxy.view
        families: list[Metric] = [
            *self.requests.families(api_name),
            _gauge("kafka_server_socket_server_metrics_connection_count", "Open client connections.",
                   len(proxy.sessions)),
            _gauge("barnabas_proxy_cluster_brokers", "Brokers in the proxy's cluster view.", len(view.brokers)),
        ]  # fmt: skip
        if view.refreshed_at:
            age_s = time.monotonic() - view.refreshed_at
            families.append(_gauge("barnabas_proxy_cluster_view_age_seconds", "Seconds since it was read.", age_s))
        if proxy.nodes is not None:
            up = len(proxy.nodes.up())
            families.append(_gauge("barnabas_proxy_nodes_up", "Proxy nodes believed up, this one included.", up))
        if proxy.membership is not None:
            member = int(proxy.membership.joined)
            families.append(_gauge("barnabas_proxy_group_member", "1 while a member of the group proxies.", member))
        return families


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
