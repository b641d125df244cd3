"""A proxy node's readiness and metric families, on a real (unstarted) Proxy whose view took a Metadata answer."""

from __future__ import annotations

import asyncio

from barnabas.config import load_proxy_config
from barnabas.proxy import Proxy
from barnabas.proxy.admin_endpoint import ProxyAdmin, proxy_readiness
from barnabas.proxy.router import Router

from .wire import cluster_view, proxy_nodes

CONFIG = {"bootstrap.servers": "broker-1.internal:9092", "admin.listeners": "http://127.0.0.1:0"}
MAX_AGE_S = 90.0


def serving_proxy() -> Proxy:
    """A proxy node as ``start`` leaves it, without its sockets: a view read now, nodes, a router."""
    proxy = Proxy(load_proxy_config(None, CONFIG))
    proxy.view = cluster_view()
    proxy.nodes = proxy_nodes()
    proxy.router = Router(proxy.view, proxy.links, proxy.nodes, None, 1.0)
    return proxy


def test_not_ready_until_it_serves() -> None:
    assert proxy_readiness(Proxy(load_proxy_config(None, CONFIG)), MAX_AGE_S) == ["not serving yet"]


def test_ready_with_a_fresh_cluster_view() -> None:
    assert proxy_readiness(serving_proxy(), MAX_AGE_S) == []


def test_not_ready_with_no_broker_or_a_stale_view_or_while_stopping() -> None:
    stale = serving_proxy()
    stale.view.refreshed_at -= 2 * MAX_AGE_S
    (reason,) = proxy_readiness(stale, MAX_AGE_S)
    assert reason.startswith("the cluster view was last read 180 s ago")
    empty = serving_proxy()
    empty.view.brokers = {}
    assert proxy_readiness(empty, MAX_AGE_S) == ["no broker of the cluster is known"]
    assert proxy_readiness(serving_proxy(), MAX_AGE_S, stopping=True) == ["shutting down"]


def test_families_count_requests_and_read_the_view() -> None:
    proxy = serving_proxy()
    admin = ProxyAdmin(proxy.config, proxy)
    admin.requests.record(0, 9, 0.002)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in admin.families()
        for sample in family.samples
    }
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 1
    assert samples[("barnabas_proxy_cluster_brokers", ())] == 3
    assert samples[("barnabas_proxy_nodes_up", ())] >= 1
    assert samples[("kafka_server_socket_server_metrics_connection_count", ())] == 0
    assert ("barnabas_proxy_group_member", ()) not in samples  # no coordination.url: no group
    asyncio.run(admin.stop())  # never started: nothing to stop
