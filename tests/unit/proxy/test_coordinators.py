"""Which broker each coordinator's request goes to: group requests to the group's coordinator, transaction
requests to the transactional id's, an idempotent producer's InitProducerId to any broker.

Requests are built as a client sends them and decoded as the proxy reads them. The cluster is
``wire``'s three brokers with ``__consumer_offsets`` and ``__transaction_state`` of four partitions
each, led by different brokers, so a wrong partition lands on a wrong broker.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from barnabas.protocol import ErrorCode, make, request_class, response_class
from barnabas.proxy.cluster_view import ClusterView
from barnabas.proxy.coordinators import (
    GROUP_KEY,
    TRANSACTION_KEY,
    coordinator_key,
    no_longer_coordinates,
    transaction_partition,
)
from barnabas.proxy.routes import ROUTES, UNDERSTOOD, Route
from tests.fuzz.kio_samples import sample_entity

from .wire import TOPICS, cluster_view, request_over_wire, response_over_wire

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
OFFSET_FETCH = 9
#: The internal topics' partitions and their leaders.
LEADERS = {0: 101, 1: 102, 2: 103, 3: 102}
INTERNAL = {
    name: (uuid.uuid4(), [(p, leader, [leader], [leader]) for p, leader in LEADERS.items()])
    for name in ("__consumer_offsets", "__transaction_state")
}
TXN_ID, GROUP_ID = "checkout-7", "billing"


def view() -> ClusterView:
    return cluster_view({**TOPICS, **INTERNAL})


def versions(api_key: int) -> range:
    low, high = UNDERSTOOD[api_key]
    return range(low, high + 1)


def request(api_key: int, version: int, **fields: Any) -> Any:
    """The request a client sends, every field set (``fields`` override), as the proxy decodes it."""
    topic = request_class(api_key, version, "AddPartitionsToTxnTopic") if api_key == ADD_PARTITIONS else None
    defaults: dict[str, Any] = {
        "transactional_id": TXN_ID, "v3_and_below_transactional_id": TXN_ID, "group_id": GROUP_ID,
        "producer_id": 4000, "v3_and_below_producer_id": 4000, "producer_epoch": 2, "v3_and_below_producer_epoch": 2,
        "transaction_timeout": datetime.timedelta(seconds=60), "committed": True, "generation_id": 3,
        "member_id": "m-1", "group_instance_id": None, "topics": (),
        "v3_and_below_topics": (make(topic, name="orders", partitions=(0, 2)),) if topic else (),
    }  # fmt: skip
    body = make(request_class(api_key, version), **{**defaults, **fields})
    return request_over_wire(api_key, version, body)


def destination(api_key: int, version: int, body: Any, cluster: ClusterView) -> int | None:
    """The broker id the proxy sends ``body`` to; None for any broker."""
    key = coordinator_key(api_key, body)
    if key is None:
        return None
    broker = cluster.coordinator(*key)
    assert broker is not None, f"{ROUTES[api_key][0]}: no coordinator known for {key}"
    return broker.broker_id


def test_transactional_ids_sit_where_kafka_puts_them() -> None:
    """Kafka's ``Utils.abs(id.hashCode()) % 50``, as Kafka 4.4's own Utils computed it for these ids:
    a negative hash is negated (txn-10's 0x7fffffff mask would give partition 10), Integer.MIN_VALUE is 0."""
    assert transaction_partition("txn-10", 50) == 38
    assert transaction_partition("txn-11", 50) == 37
    assert transaction_partition("orders-app", 50) == 5
    assert transaction_partition("tx-checkout", 50) == 47
    assert transaction_partition("polygenelubricants", 50) == 0  # hashCode() == Integer.MIN_VALUE


@pytest.mark.parametrize("api_key", [INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN])
def test_transaction_requests_go_to_the_transactional_ids_coordinator(api_key: int) -> None:
    assert ROUTES[api_key][1] is Route.TRANSACTION
    cluster = view()
    expected = LEADERS[transaction_partition(TXN_ID, len(LEADERS))]
    for version in versions(api_key):
        assert destination(api_key, version, request(api_key, version), cluster) == expected, version


def test_txn_offset_commit_goes_to_the_groups_coordinator() -> None:
    """The offsets are the group's: TxnOffsetCommit names the transaction too, but goes where the group is."""
    cluster = view()
    group_leader = cluster.group_coordinator(GROUP_ID)
    txn_leader = cluster.transaction_coordinator(TXN_ID)
    assert group_leader is not None and txn_leader is not None and group_leader != txn_leader
    for version in versions(TXN_OFFSET_COMMIT):
        body = request(TXN_OFFSET_COMMIT, version)
        assert coordinator_key(TXN_OFFSET_COMMIT, body) == (GROUP_KEY, GROUP_ID)
        assert destination(TXN_OFFSET_COMMIT, version, body, cluster) == group_leader.broker_id


def test_an_idempotent_producers_init_producer_id_goes_to_any_broker() -> None:
    for version in versions(INIT_PRODUCER_ID):
        assert destination(INIT_PRODUCER_ID, version, request(INIT_PRODUCER_ID, version, transactional_id=None),
                           view()) is None  # fmt: skip


def test_a_coordinator_a_broker_named_wins_over_the_computed_one() -> None:
    """FindCoordinator's answer (remembered by its rewrite) is what the brokers say; the rule is the fallback."""
    cluster = view()
    computed = cluster.transaction_coordinator(TXN_ID)
    assert computed is not None
    named = next(b for b in (101, 102, 103) if b != computed.broker_id)
    cluster.coordinators[(TRANSACTION_KEY, TXN_ID)] = named
    assert destination(END_TXN, 3, request(END_TXN, 3), cluster) == named
    cluster.forget_coordinator(TRANSACTION_KEY, TXN_ID)
    assert destination(END_TXN, 3, request(END_TXN, 3), cluster) == computed.broker_id


def test_no_transaction_topic_no_computed_coordinator() -> None:
    """Before ``__transaction_state`` exists the proxy asks a broker (FindCoordinator) instead."""
    cluster = cluster_view()
    assert cluster.transaction_partitions == 0
    assert cluster.coordinator(TRANSACTION_KEY, TXN_ID) is None
    assert cluster.coordinator(TRANSACTION_KEY + 1, TXN_ID) is None  # a share group's key: not known here


def test_every_coordinated_api_names_its_key() -> None:
    """Every version of every API routed to one coordinator (OffsetFetch up to v7 too) yields its key."""
    coordinated = [(k, v) for k, (_, route) in ROUTES.items() if route in (Route.GROUP, Route.TRANSACTION)
                   for v in versions(k)] + [(OFFSET_FETCH, v) for v in versions(OFFSET_FETCH) if v < 8]  # fmt: skip
    for api_key, version in coordinated:
        body = request_over_wire(api_key, version, sample_entity(request_class(api_key, version), 1))
        key_type = TRANSACTION_KEY if ROUTES[api_key][1] is Route.TRANSACTION else GROUP_KEY
        assert coordinator_key(api_key, body) == (key_type, "ab"), (ROUTES[api_key][0], version)


def add_partitions_answer(version: int, code: ErrorCode) -> Any:
    result = response_class(ADD_PARTITIONS, version, "AddPartitionsToTxnPartitionResult")
    topic = response_class(ADD_PARTITIONS, version, "AddPartitionsToTxnTopicResult")
    partitions = (make(result, partition_index=0, partition_error_code=ErrorCode.none),
                  make(result, partition_index=2, partition_error_code=code))  # fmt: skip
    return make(
        response_class(ADD_PARTITIONS, version),
        throttle_time=datetime.timedelta(0),
        results_by_topic_v3_and_below=(make(topic, name="orders", results_by_partition=partitions),),
    )


def end_txn_answer(version: int, code: ErrorCode) -> Any:
    return make(response_class(END_TXN, version), throttle_time=datetime.timedelta(0), error_code=code,
                producer_id=4000, producer_epoch=2)  # fmt: skip


@pytest.mark.parametrize("code", [ErrorCode.not_coordinator, ErrorCode.coordinator_not_available])
def test_an_answer_that_the_broker_does_not_coordinate_is_seen_wherever_it_is(code: ErrorCode) -> None:
    """Top-level (EndTxn) or per partition (AddPartitionsToTxn): the proxy forgets the coordinator."""
    for version in versions(ADD_PARTITIONS):
        assert no_longer_coordinates(response_over_wire(ADD_PARTITIONS, version, add_partitions_answer(version, code)))
    for version in versions(END_TXN):
        assert no_longer_coordinates(response_over_wire(END_TXN, version, end_txn_answer(version, code)))


def test_other_errors_keep_the_coordinator() -> None:
    for code in (ErrorCode.none, ErrorCode.producer_fenced, ErrorCode.coordinator_load_in_progress):
        assert not no_longer_coordinates(response_over_wire(END_TXN, 3, end_txn_answer(3, code)))
        assert not no_longer_coordinates(response_over_wire(ADD_PARTITIONS, 3, add_partitions_answer(3, code)))
