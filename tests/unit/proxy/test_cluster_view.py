"""The proxy's view of the cluster, taken from a Metadata answer (no broker is contacted)."""

from __future__ import annotations

import pytest

from barnabas.cluster import BrokerEndpoint, BrokerInfo
from barnabas.proxy.cluster_view import BrokerAddress, ClusterView, PartitionInfo
from barnabas.proxy.links import BrokerLinks

from .wire import METADATA, ORDERS_ID, cluster_view, metadata_response, response_over_wire


def empty_view() -> ClusterView:
    return ClusterView([], BrokerLinks(client_id="t", connect_timeout_s=1.0, request_timeout_s=1.0))


def test_apply_takes_brokers_controller_topic_ids_and_leaders() -> None:
    view = cluster_view()
    assert view.brokers == {
        101: BrokerAddress(101, "broker-1.internal", 9092, "r1"),
        102: BrokerAddress(102, "broker-2.internal", 9093, "r2"),
        103: BrokerAddress(103, "broker-3.internal", 9094, "r2"),
    }
    assert view.controller_id == 102
    assert view.cluster_id == "cluster-x"
    assert view.topic_ids["orders"] == ORDERS_ID
    assert view.topic_names[ORDERS_ID] == "orders"
    assert view.partitions[("orders", 1)] == PartitionInfo(leader_id=102, leader_epoch=7, replicas=3, isr=2)
    assert view.leader("orders", 1) == view.brokers[102]
    assert view.leader("orders", 3) is None  # no leader
    assert view.leader("orders", 9) is None  # no such partition
    assert (view.rack_of(103), view.rack_of(-1)) == ("r2", None)


def test_topics_hash_by_id_when_known_else_by_name() -> None:
    view = cluster_view()
    assert view.topic_key("orders") == ORDERS_ID.bytes
    assert view.topic_key("unknown") == b"unknown"


def test_any_broker_prefers_the_rack() -> None:
    view = cluster_view()
    assert view.any_broker("r2") == view.brokers[102]
    assert view.any_broker("r1") == view.brokers[101]
    assert view.any_broker("r9") == view.brokers[101]
    view.brokers = {}
    assert view.any_broker("r1") is None


@pytest.mark.parametrize("version", [0, 1, 9])
def test_apply_takes_answers_without_topic_ids_or_racks(version: int) -> None:
    view = empty_view()
    view.apply(response_over_wire(METADATA, version, metadata_response(version)))
    assert sorted(view.brokers) == [101, 102, 103]
    assert view.controller_id == (102 if version >= 1 else -1)
    assert view.topic_ids == {}
    assert view.topic_key("orders") == b"orders"
    assert view.leader("events", 0) == view.brokers[102]


@pytest.mark.parametrize("decoded", [True, False], ids=["decoded", "built"])
def test_a_zero_topic_id_is_no_topic_id(decoded: bool) -> None:
    """kio decodes a zero topic id as None; an entity built in memory keeps the zero UUID."""
    response = metadata_response(12, topic_ids=False)
    view = empty_view()
    view.apply(response_over_wire(METADATA, 12, response) if decoded else response)
    assert view.topic_ids == {}
    assert view.topic_key("orders") == b"orders"


def test_a_new_answer_replaces_the_view_but_not_the_coordinators() -> None:
    view = cluster_view()
    view.coordinators[(0, "g")] = 101
    view.apply(response_over_wire(METADATA, 1, metadata_response(1)))
    assert view.topic_ids == {}
    assert view.coordinators == {(0, "g"): 101}  # learnt from FindCoordinator answers, not from Metadata


def test_forgetting_a_coordinator_forgets_only_that_one() -> None:
    view = cluster_view()
    view.coordinators.update({(0, "g"): 101, (1, "g"): 102})
    view.forget_coordinator(0, "g")
    view.forget_coordinator(0, "never-known")
    assert view.coordinators == {(1, "g"): 102}


def _registered(broker_id: int, port: int, *, sasl: bool = True) -> BrokerInfo:
    """A broker as it registers in coordination: its inter-broker endpoint first, then every listener's."""
    endpoints = [BrokerEndpoint("PLAINTEXT", f"broker-{broker_id}.internal", port)]
    endpoints += [BrokerEndpoint("CLIENTS", f"broker-{broker_id}.example", port + 1, "SASL_SSL")] if sasl else []
    return BrokerInfo(broker_id, f"broker-{broker_id}.internal", port, "r1", endpoints=tuple(endpoints))


def test_the_store_view_keeps_to_the_listener_the_metadata_answered_with() -> None:
    """The proxy bootstraps from the brokers' SASL_SSL listener: the store's view must not fall back to PLAINTEXT."""
    view = empty_view()
    view.brokers = {1: BrokerAddress(1, "broker-1.example", 9093, "r1")}  # as the CLIENTS listener's Metadata said
    view.apply_store({}, {}, {1: _registered(1, 9092), 2: _registered(2, 9192), 3: _registered(3, 9292, sasl=False)},
                     controller_id=2)  # fmt: skip
    assert view.brokers == {
        1: BrokerAddress(1, "broker-1.example", 9093, "r1"),
        2: BrokerAddress(2, "broker-2.example", 9193, "r1"),
    }, "broker 3 has no CLIENTS listener: left out, as Kafka's Metadata leaves it out"
