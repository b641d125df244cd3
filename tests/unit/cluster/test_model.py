import uuid

import pytest

from barnabas.cluster import PartitionState, Topic, topic_name_problem


@pytest.mark.parametrize("name", ["orders", "a.b_c-D9", "x" * 249])
def test_legal_topic_names(name: str) -> None:
    assert topic_name_problem(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "has space", "slash/y", "ü"])
def test_illegal_topic_names(name: str) -> None:
    assert topic_name_problem(name) is not None


def test_documents_round_trip() -> None:
    topic = Topic("t", uuid.uuid4(), {0: (1, 2), 1: (2, 1)}, {"retention.ms": "5"})
    assert Topic.from_json("t", topic.to_json()) == topic
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=3)
    assert PartitionState.from_json(state.to_json()) == state
