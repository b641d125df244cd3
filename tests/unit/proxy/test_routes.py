"""The routing table is complete: every API a barnabas broker serves is routed, answered or refused.

An API in no table is never advertised, so a client calling it through the proxy fails although
the brokers serve it (``kafka-acls.sh`` did, before ACLs were routed). Each routed API's
understood versions must be ones the codec reads, and the advertised range (the proxy's ∩ the
brokers') must not be empty for a barnabas cluster.
"""

from __future__ import annotations

import pytest

from barnabas.broker.handlers import build_registry
from barnabas.protocol import request_class, response_class
from barnabas.proxy.router import Router
from barnabas.proxy.routes import INTERNAL, ROUTES, UNDERSTOOD, Route
from barnabas.proxy.sasl_gate import SASL_VERSIONS

from .wire import cluster_view, proxy_nodes

SERVED = {key: (low, high) for key, low, high in build_registry().versions()}


def test_every_api_a_broker_serves_is_routed_answered_or_refused() -> None:
    unplaced = {key for key in SERVED if key not in ROUTES and key not in INTERNAL and key not in SASL_VERSIONS}
    assert not unplaced, f"served by the brokers, unknown to the proxy: {sorted(unplaced)}"
    assert not set(ROUTES) & set(INTERNAL)
    assert set(ROUTES) == set(UNDERSTOOD)


@pytest.mark.parametrize("api_key", sorted(ROUTES), ids=lambda key: ROUTES[key][0])
def test_every_understood_version_decodes(api_key: int) -> None:
    low, high = UNDERSTOOD[api_key]
    for version in range(low, high + 1):
        assert request_class(api_key, version) and response_class(api_key, version)


def test_a_barnabas_cluster_gets_every_api_it_serves_advertised() -> None:
    router = Router(cluster_view(), cluster_view().links, proxy_nodes(), None, 1.0)
    router.learn_versions([SERVED, SERVED])
    for api_key, (name, route) in ROUTES.items():
        if route is Route.PROXY or api_key not in SERVED:
            continue
        assert api_key in router.advertised, f"{name} is served but not advertised"
