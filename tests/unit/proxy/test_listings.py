"""Cluster-wide listings through the proxy: which brokers each proxy node asks, and the merged answer.

ListTransactions: the proxy nodes share the brokers out (each broker to exactly one up node, in its
rack when one is there), so a client asking every proxy node, as Kafka's admin client asks every
broker, hears from each broker once; the answers are merged and read back through the codec.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from barnabas.protocol import ErrorCode, make, request_class, response_class
from barnabas.proxy.listings import merge_listings, nothing_listed, own_brokers
from barnabas.proxy.routes import ROUTES, Route

from .wire import (
    BROKERS,
    PROXY_PEERS,
    R1_NODES,
    R2_NODES,
    cluster_view,
    proxy_nodes,
    request_over_wire,
    response_over_wire,
)

LIST_TRANSACTIONS = 66
VERSIONS = [0, 1, 2]


def shares(up: set[str]) -> dict[int, list[int]]:
    """Proxy node id -> the broker ids it asks, for each of the up proxy nodes (hosts in ``up``)."""
    view = cluster_view()
    result = {}
    for host, _, _ in PROXY_PEERS:
        if host in up:
            nodes = proxy_nodes(host)
            nodes.set_up(n.node_id for n in nodes.nodes if n.host in up)
            result[nodes.me.node_id] = [b.broker_id for b in own_brokers(view, nodes)]
    return result


@pytest.mark.parametrize(
    "up", [{"proxy-a", "proxy-b", "proxy-c", "proxy-d"}, {"proxy-a", "proxy-c"}, {"proxy-b"}], ids=len
)
def test_every_broker_is_asked_by_exactly_one_up_proxy_node(up: set[str]) -> None:
    assert ROUTES[LIST_TRANSACTIONS][1] is Route.OWN_BROKERS
    asked = shares(up)
    everyone = sorted(b for own in asked.values() for b in own)
    assert everyone == sorted(BROKERS), asked


def test_a_broker_is_asked_by_a_proxy_node_in_its_rack() -> None:
    asked = shares({"proxy-a", "proxy-b", "proxy-c", "proxy-d"})
    for node_id, own in asked.items():
        for broker_id in own:
            assert node_id in (R1_NODES if BROKERS[broker_id][2] == "r1" else R2_NODES)


def listing(version: int, states: list[tuple[str, int, str]], *, unknown: tuple[str, ...] = (),
            code: ErrorCode = ErrorCode.none) -> Any:  # fmt: skip
    state_cls = response_class(LIST_TRANSACTIONS, version, "TransactionState")
    response = make(
        response_class(LIST_TRANSACTIONS, version),
        throttle_time=datetime.timedelta(milliseconds=3),
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=tuple(
            make(state_cls, transactional_id=t, producer_id=p, transaction_state=s) for t, p, s in states
        ),
    )
    return response_over_wire(LIST_TRANSACTIONS, version, response)


@pytest.mark.parametrize("version", VERSIONS)
def test_list_transactions_answers_are_merged_once_each(version: int) -> None:
    """A transaction listed by two brokers (its coordinator moved between their answers) is listed once."""
    answers = [
        listing(version, [("a", 1, "Ongoing"), ("b", 2, "CompleteCommit")], unknown=("Bogus",)),
        listing(version, [("c", 3, "Empty"), ("a", 1, "PrepareCommit")], unknown=("Bogus",)),
    ]
    merged = response_over_wire(LIST_TRANSACTIONS, version, merge_listings(LIST_TRANSACTIONS, answers))
    assert [(t.transactional_id, t.transaction_state) for t in merged.transaction_states] == [
        ("a", "Ongoing"), ("b", "CompleteCommit"), ("c", "Empty"),
    ]  # fmt: skip
    assert merged.unknown_state_filters == ("Bogus",)
    assert merged.error_code == ErrorCode.none


def test_a_brokers_error_is_the_answers_error() -> None:
    """A coordinator still loading says so: Kafka's admin client retries the whole listing."""
    answers = [listing(0, [("a", 1, "Ongoing")]), listing(0, [], code=ErrorCode.coordinator_load_in_progress)]
    merged = merge_listings(LIST_TRANSACTIONS, answers)
    assert merged.error_code == ErrorCode.coordinator_load_in_progress


@pytest.mark.parametrize("version", VERSIONS)
def test_a_node_standing_for_no_broker_lists_nothing_and_names_unknown_filters(version: int) -> None:
    cls = request_class(LIST_TRANSACTIONS, version)
    body = request_over_wire(
        LIST_TRANSACTIONS,
        version,
        make(cls, state_filters=("Ongoing", "Nope", "Nope", "PrepareEpochFence"), producer_id_filters=(7,),
             duration_filter=-1, transactional_id_pattern=None),
    )  # fmt: skip
    answer = response_over_wire(LIST_TRANSACTIONS, version, nothing_listed(version, body))
    assert (answer.error_code, answer.transaction_states, answer.unknown_state_filters) == (
        ErrorCode.none, (), ("Nope",),
    )  # fmt: skip
