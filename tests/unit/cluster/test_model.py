import uuid

import pytest

from barnabas.cluster import PartitionState, Topic, describe_partitions, topic_name_problem
from barnabas.cluster.stored_values import CorruptValueError


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


def test_a_partition_state_keeps_its_broker_epochs_and_topic_id_through_storage() -> None:
    state = PartitionState(1, 4, (1, 2), 3, {1: 7, 2: 9}, uuid.uuid4())
    assert PartitionState.from_json(state.to_json()) == state


def test_an_isr_member_is_in_sync_only_in_the_broker_epoch_recorded_for_it() -> None:
    state = PartitionState(1, 4, (1, 2), 0, {1: 7, 2: 9})
    assert state.in_sync(1, 7) and not state.in_sync(1, 8) and not state.in_sync(3, 7) and not state.in_sync(1, None)
    assert state.current_isr({1: 7, 2: 10}) == (1,)
    assert state.with_isr((2, 3), {3: 1}) == PartitionState(1, 4, (2, 3), 0, {2: 9, 3: 1})


def test_partitions_in_log_lines_are_ranges_per_leader_epoch() -> None:
    assert describe_partitions({p: 0 for p in range(50)}) == "partitions 0-49 at epoch 0"
    assert describe_partitions({3: 2}) == "partition 3 at epoch 2"
    assert (
        describe_partitions({0: 1, 1: 1, 3: 1, 5: 2, 6: 2}) == "partitions 0-1, 3 at epoch 1; partitions 5-6 at epoch 2"
    )


def test_a_restored_partition_keeps_its_reported_log_ends_and_an_empty_report_set_through_storage() -> None:
    reported = PartitionState(-1, 0, (), recovered={2: (5, 120), 0: (-1, 0)})
    assert PartitionState.from_json(reported.to_json()) == reported
    waiting = PartitionState(-1, 0, (), recovered={})
    assert PartitionState.from_json(waiting.to_json()).recovered == {}
    assert PartitionState.from_json(PartitionState(1, 2, (1,)).to_json()).recovered is None


def test_a_reported_log_end_that_is_not_an_epoch_and_offset_does_not_read() -> None:
    damaged = b'{"leader": -1, "leader_epoch": 0, "isr": [], "recovering": true, "recovered": {"1": [5]}}'
    with pytest.raises(CorruptValueError, match="recovered"):
        PartitionState.from_json(damaged)
