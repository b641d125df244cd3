"""The decoders of stored coordination values: the shapes barnabas writes, and CorruptValueError for any other."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from barnabas.cluster.brokers import BrokerEndpoint, BrokerInfo
from barnabas.cluster.claims import BrokerClaim
from barnabas.cluster.credentials import _from_json as credential_from_json
from barnabas.cluster.model import PartitionState, Reassignment, Topic
from barnabas.cluster.stored_values import CorruptValueError, decimal_value, text_value

TOPIC_ID = uuid.UUID("0b8f5a4e-6c1d-4d0e-9a51-2f3c4d5e6f70")
STATE = {"leader": 1, "leader_epoch": 3, "isr": [1, 2], "controller_epoch": 4, "broker_epochs": {"1": 10}}


def encoded(document: object) -> bytes:
    return json.dumps(document).encode()


def test_what_barnabas_writes_reads_back() -> None:
    topic = Topic("orders", TOPIC_ID, {0: (3, 1, 2), 1: (2,)}, {"cleanup.policy": "compact"}, True,
                  {0: Reassignment((3,), (1,))})  # fmt: skip
    state = PartitionState(1, 3, (1, 2), 4, {1: 10, 2: 11}, TOPIC_ID)
    broker = BrokerInfo(7, "h", 9092, "r1", 3, True, (BrokerEndpoint("SSL", "h", 9093, "SSL"),))
    claim = BrokerClaim(7, "cluster-x", frozenset({"dir-a"}))
    assert Topic.from_json("orders", topic.to_json()) == topic
    assert PartitionState.from_json(state.to_json()) == state
    assert BrokerInfo.from_json(7, broker.to_json()) == broker
    assert BrokerClaim.from_bytes(claim.to_bytes()) == claim


def test_values_written_by_earlier_versions_take_their_defaults() -> None:
    assert PartitionState.from_json(b'{"leader": 1, "leader_epoch": 0, "isr": [1]}') == PartitionState(1, 0, (1,))
    assert BrokerInfo.from_json(3, b'{"host": "h", "port": 1, "rack": null}') == BrokerInfo(3, "h", 1, None, -1, False)
    assert Topic.from_json("t", encoded({"id": str(TOPIC_ID), "partitions": {"0": [1]}})).config == {}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"isr": "12"}, "field 'isr' is '12', not a list of integers"),
        ({"isr": [1, True]}, "not a list of integers"),
        ({"leader": True}, "field 'leader' is True, not an integer"),
        ({"leader": "1"}, "not an integer"),
        ({"leader_epoch": 3.0}, "not an integer"),
        ({"leader": None}, "field 'leader' is None"),
        ({"broker_epochs": {"one": 10}}, "has the key 'one', not a number"),
        ({"broker_epochs": {"01": 10}}, "has the key '01', not a number"),
        ({"broker_epochs": {"1": "10"}}, "not an integer"),
        ({"topic_id": "not-a-uuid"}, "is not a UUID"),
        ({"topic_id": "{" + str(TOPIC_ID) + "}"}, "not a UUID in canonical form"),
    ],
)
def test_a_partition_state_of_another_shape_is_refused(changes: dict[str, object], problem: str) -> None:
    with pytest.raises(CorruptValueError, match=f"the partition state is unreadable: .*{problem}"):
        PartitionState.from_json(encoded({**STATE, **changes}), "the partition state")


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xfe", b"[1, 2]", b"null", b"{", b"[" * 100_000, b"NaN"],
    ids=["empty", "not-utf8", "a-list", "null", "cut", "deep", "nan"],
)
def test_what_is_not_a_json_object_is_refused(data: bytes) -> None:
    with pytest.raises(CorruptValueError):
        PartitionState.from_json(data)


def test_a_missing_field_is_named() -> None:
    with pytest.raises(CorruptValueError, match="field 'leader_epoch' is missing"):
        PartitionState.from_json(b'{"leader": 1, "isr": []}')


@pytest.mark.parametrize(
    "document",
    [
        {"id": str(TOPIC_ID), "partitions": {"0": "12"}},
        {"id": str(TOPIC_ID), "partitions": {"0": [1]}, "config": {"retention.ms": 1}},
        {"id": str(TOPIC_ID), "partitions": {"0": [1]}, "internal": 1},
        {"id": str(TOPIC_ID), "partitions": {"0": [1]}, "adding_replicas": {"0": 3}},
        {"id": str(TOPIC_ID), "partitions": [[1]]},
        {"id": 5, "partitions": {"0": [1]}},
    ],
)
def test_a_topic_of_another_shape_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(CorruptValueError, match="topic 'orders' is unreadable"):
        Topic.from_json("orders", encoded(document))


@pytest.mark.parametrize(
    "document",
    [
        {"host": "h", "port": "9092"},
        {"host": "h", "port": 9092, "endpoints": [{"listener": "A"}]},
        {"host": "h", "port": 9092, "endpoints": "PLAINTEXT"},
        {"host": "h", "port": 9092, "clean": "yes"},
        {"host": 7, "port": 9092},
    ],
)
def test_a_broker_registration_of_another_shape_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(CorruptValueError, match="registration of broker 7"):
        BrokerInfo.from_json(7, encoded(document))


def test_a_claim_and_a_credential_of_another_shape_are_refused() -> None:
    with pytest.raises(CorruptValueError, match="field 'directories' is 'ab'"):
        BrokerClaim.from_bytes(encoded({"broker_id": 1, "cluster_id": "c", "directories": "ab"}))
    key = base64.b64encode(b"k").decode()
    with pytest.raises(CorruptValueError, match="field 'salt' is not base64"):
        credential_from_json(encoded({"salt": "!!", "stored_key": key, "server_key": key, "iterations": 4096}), "k")


def test_plain_values_are_text_and_decimal_numbers() -> None:
    assert (text_value(b"abc", "id"), decimal_value(b"42", "counter")) == ("abc", 42)
    for bad in (b"", b"-1", b" 4", b"4.0", "\u0664".encode()):
        with pytest.raises(CorruptValueError):
            decimal_value(bad, "counter")
    with pytest.raises(CorruptValueError, match="not UTF-8"):
        text_value(b"\xff", "id")
