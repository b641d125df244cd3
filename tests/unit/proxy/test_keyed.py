"""Requests naming several coordinator keys split by coordinator and merged back, through the codec.

DescribeTransactions (and DeleteGroups, the same code on groups): the client's request decoded as
the proxy reads it, split by each key's coordinator, each part encoded and decoded as its broker
reads it; the brokers' answers (in their own order) decoded as the proxy reads them, merged, and the
merge decoded as the client reads it. Broker 103 does not answer.
"""

from __future__ import annotations

import datetime
from typing import Any

from barnabas.protocol import ErrorCode, make, request_class, response_class
from barnabas.proxy.coordinators import GROUP_KEY, TRANSACTION_KEY
from barnabas.proxy.keyed import BATCHED, keys_of, merge_keyed, split_keys

from .wire import request_over_wire, response_over_wire

DESCRIBE_TRANSACTIONS, DELETE_GROUPS = 65, 42
#: The ids the client names, in its order (one twice), and each one's coordinator.
ASKED = ["pay-2", "ship-1", "pay-1", "audit", "pay-2"]
WHERE = {"pay-1": 101, "pay-2": 102, "ship-1": 101, "audit": 103}
DOWN = 103
START = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC)


def state(version: int, transactional_id: str, broker: int) -> Any:
    topic = response_class(DESCRIBE_TRANSACTIONS, version, "TopicData")
    return make(
        response_class(DESCRIBE_TRANSACTIONS, version, "TransactionState"),
        error_code=ErrorCode.none, transactional_id=transactional_id, transaction_state="Ongoing",
        transaction_timeout=datetime.timedelta(seconds=60), transaction_start_time=START,
        producer_id=broker * 1000 + len(transactional_id), producer_epoch=3,
        topics=(make(topic, topic="orders", partitions=(0, broker % 7)),),
    )  # fmt: skip


def answered(version: int, broker: int, ids: list[str]) -> Any:
    """``broker``'s answer to the ids it was asked for, in reverse order, as the proxy reads it."""
    response = make(
        response_class(DESCRIBE_TRANSACTIONS, version),
        throttle_time=datetime.timedelta(milliseconds=5),
        transaction_states=tuple(state(version, t, broker) for t in reversed(dict.fromkeys(ids))),
    )
    return response_over_wire(DESCRIBE_TRANSACTIONS, version, response)


def test_describe_transactions_asks_each_coordinator_for_its_ids_and_answers_in_order() -> None:
    version = 0
    spec = BATCHED[DESCRIBE_TRANSACTIONS]
    assert spec.key_type == TRANSACTION_KEY
    body = request_over_wire(
        DESCRIBE_TRANSACTIONS, version, request_class(DESCRIBE_TRANSACTIONS, version)(transactional_ids=tuple(ASKED))
    )
    keys = keys_of(spec, body)
    assert keys == ASKED
    subs = split_keys(spec, body, WHERE)
    asked_of = {broker: list(request_over_wire(DESCRIBE_TRANSACTIONS, version, sub).transactional_ids)
                for broker, sub in subs.items()}  # fmt: skip
    assert asked_of == {102: ["pay-2", "pay-2"], 101: ["ship-1", "pay-1"], 103: ["audit"]}
    answers = [answered(version, broker, ids) for broker, ids in asked_of.items() if broker != DOWN]
    merged = response_over_wire(DESCRIBE_TRANSACTIONS, version, merge_keyed(spec, 65, version, keys, answers))
    states = merged.transaction_states
    assert [s.transactional_id for s in states] == ASKED
    for s in states:
        if WHERE[s.transactional_id] == DOWN:
            assert s.error_code == ErrorCode.coordinator_not_available  # Kafka's admin looks it up again
            assert (s.transaction_state, s.producer_id, s.topics) == ("", 0, ())
        else:
            assert s == state(version, s.transactional_id, WHERE[s.transactional_id])


def test_delete_groups_splits_by_the_groups_coordinator() -> None:
    spec = BATCHED[DELETE_GROUPS]
    assert spec.key_type == GROUP_KEY
    for version in (0, 2):
        body = request_over_wire(DELETE_GROUPS, version, request_class(DELETE_GROUPS, version)(groups_names=("b", "a")))
        subs = split_keys(spec, body, {"a": 1, "b": 2})
        assert {w: list(s.groups_names) for w, s in subs.items()} == {2: ["b"], 1: ["a"]}
        result = response_class(DELETE_GROUPS, version, "DeletableGroupResult")
        answer = make(response_class(DELETE_GROUPS, version), throttle_time=datetime.timedelta(0),
                      results=(make(result, group_id="a", error_code=ErrorCode.group_id_not_found),))  # fmt: skip
        merged = response_over_wire(
            DELETE_GROUPS, version, merge_keyed(spec, DELETE_GROUPS, version, keys_of(spec, body), [answer])
        )
        assert [(r.group_id, r.error_code) for r in merged.results] == [
            ("b", ErrorCode.coordinator_not_available),
            ("a", ErrorCode.group_id_not_found),
        ]
