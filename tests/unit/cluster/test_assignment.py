"""Replica placement, ported from Kafka's AdminTest/AdminZkClientTest (testReplicaAssignment,
testGetBrokerMetadatas), AdminRackAwareTest with its RackAwareTest helper, and AddPartitionsTest's
placement cases; then properties checked over generated clusters."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barnabas.cluster.assignment import (
    AssignmentError,
    IncompleteRackInformationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_replicas,
    rack_alternated_broker_list,
    start_index_for_new_partitions,
)

Assignment = Mapping[int, tuple[int, ...]]


def no_racks(*broker_ids: int) -> dict[int, str | None]:
    return dict.fromkeys(broker_ids)


def check_replica_distribution(
    assignment: Assignment,
    racks: Mapping[int, str],
    num_brokers: int,
    num_partitions: int,
    replication_factor: int,
    *,
    verify_rack_aware: bool = True,
    verify_leader_distribution: bool = True,
    verify_replicas_distribution: bool = True,
) -> None:
    """Kafka's RackAwareTest.checkReplicaDistribution."""
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas), "more than one replica on the same broker"
    if verify_rack_aware:
        assert [len({racks[b] for b in replicas}) for replicas in assignment.values()] == [
            replication_factor
        ] * num_partitions, "more than one replica of a partition on the same rack"
    if verify_leader_distribution:
        leaders = Counter(replicas[0] for replicas in assignment.values())
        assert sorted(leaders.values()) == [num_partitions // num_brokers] * num_brokers, "uneven leaders"
    if verify_replicas_distribution:
        counts = Counter(b for replicas in assignment.values() for b in replicas)
        per_broker = num_partitions * replication_factor // num_brokers
        assert sorted(counts.values()) == [per_broker] * num_brokers, "uneven replicas"


def partition_racks(assignment: Assignment, racks: Mapping[int, str]) -> dict[int, set[str]]:
    return {partition: {racks[b] for b in replicas} for partition, replicas in assignment.items()}


# --- AdminTest / AdminZkClientTest.testReplicaAssignment ---------------------------------------


def test_rack_unaware_classic_table() -> None:
    brokers = no_racks(0, 1, 2, 3, 4)
    expected = {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }
    assert assign_replicas(brokers, 10, 3, start_index=0) == expected


def test_zero_replication_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor must be larger than 0\.$"):
        assign_replicas(no_racks(0, 1, 2, 3, 4), 10, 0)


def test_replication_factor_larger_than_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(no_racks(0, 1, 2, 3, 4), 10, 6)
    assert str(info.value) == "Replication factor: 6 larger than available brokers: 5."


@pytest.mark.parametrize("partitions", [0, -1])
def test_partitions_must_be_positive(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError, match=r"^Number of partitions must be larger than 0\.$"):
        assign_replicas(no_racks(0, 1), partitions, 1)


def test_no_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 0"):
        assign_replicas({}, 1, 1)


def test_errors_are_value_errors() -> None:
    assert issubclass(AssignmentError, ValueError)
    for error in (InvalidPartitionsError, InvalidReplicationFactorError, IncompleteRackInformationError):
        assert issubclass(error, AssignmentError)


def test_negative_positions_rejected() -> None:
    with pytest.raises(ValueError, match="first_partition must not be negative"):
        assign_replicas(no_racks(0, 1), 2, 1, first_partition=-1)
    with pytest.raises(ValueError, match="start_index must not be negative"):
        assign_replicas(no_racks(0, 1), 2, 1, start_index=-1)


def test_single_broker() -> None:
    assert assign_replicas(no_racks(7), 3, 1) == {0: (7,), 1: (7,), 2: (7,)}
    assert assign_replicas({7: "r"}, 2, 1) == {0: (7,), 1: (7,)}


def test_broker_order_of_the_mapping_does_not_matter() -> None:
    ascending = assign_replicas(no_racks(1, 5, 9, 12), 8, 3, start_index=1)
    shuffled = assign_replicas(no_racks(12, 1, 9, 5), 8, 3, start_index=1)
    assert ascending == shuffled
    assert ascending[0][0] == 5  # index 1 of the sorted ids leads partition 0


# --- AdminRackAwareTest ----------------------------------------------------------------------


def test_rack_alternated_broker_list_and_assignment() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    expected = {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }
    assert assign_replicas(racks, 7, 3, start_index=0, first_partition=0) == expected


def test_rack_alternated_list_of_the_docstring() -> None:
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


SIX_BROKERS_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def test_assignment_with_rack_aware() -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, start_index=2)
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 6, 3)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_rack_aware_with_random_start_index(seed: int) -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 6, 3)


def test_assignment_with_rack_aware_with_uneven_replicas() -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 13, 3, start_index=0, first_partition=0)
    check_replica_distribution(
        assignment, SIX_BROKERS_THREE_RACKS, 6, 13, 3, verify_leader_distribution=False,
        verify_replicas_distribution=False,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_rack_aware_with_uneven_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas(racks, 12, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 6, 12, 3, verify_replicas_distribution=False)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware(seed: int) -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 12, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 12, 2)


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_expansion(seed: int) -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas(racks, 12, 2, first_partition=12, rng=random.Random(seed))
    assert sorted(assignment) == list(range(12, 24))
    check_replica_distribution(assignment, racks, 6, 12, 2)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware_with_6_partitions(seed: int) -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 6, 2)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware_with_6_partitions_and_3_brokers(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 4: "rack3"}
    assignment = assign_replicas(racks, 3, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 3, 3, 2)


@pytest.mark.parametrize("seed", range(20))
def test_large_number_partitions_assignment(seed: int) -> None:
    racks = {
        0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
        6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3",
    }  # fmt: skip
    assignment = assign_replicas(racks, 96, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 12, 96, 3)


@pytest.mark.parametrize("seed", range(20))
def test_more_replicas_than_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 5, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [5] * 6
    assert all(len(found) == 3 for found in partition_racks(assignment, racks).values())


@pytest.mark.parametrize("seed", range(20))
def test_less_replicas_than_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 2, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [2] * 6
    assert all(len(found) == 2 for found in partition_racks(assignment, racks).values())


@pytest.mark.parametrize("seed", range(20))
def test_single_rack(seed: int) -> None:
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(racks, 6, 3, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [3] * 6
    assert all(len(found) == 1 for found in partition_racks(assignment, racks).values())
    assert Counter(replicas[0] for replicas in assignment.values()) == dict.fromkeys(range(6), 1)


def test_skip_broker_with_replica_already_assigned() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racks, 6, 4, start_index=2)
    check_replica_distribution(
        assignment, racks, 5, 6, 4, verify_rack_aware=False, verify_leader_distribution=False,
        verify_replicas_distribution=False,
    )  # fmt: skip


# --- testGetBrokerMetadatas: RackAwareMode ---------------------------------------------------

# Broker 4 has no rack.
PARTLY_RACKED = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack1", 4: None, 5: "rack3"}


def test_enforced_mode_needs_every_rack() -> None:
    with pytest.raises(IncompleteRackInformationError) as info:
        assign_replicas(PARTLY_RACKED, 6, 2)
    assert str(info.value) == "Not all brokers have rack information for replica rack aware assignment."


@pytest.mark.parametrize("mode", [RackAwareMode.DISABLED, RackAwareMode.SAFE])
def test_disabled_and_safe_modes_place_as_without_racks(mode: RackAwareMode) -> None:
    expected = assign_replicas(no_racks(*PARTLY_RACKED), 12, 3, start_index=1)
    assert assign_replicas(PARTLY_RACKED, 12, 3, start_index=1, rack_aware_mode=mode) == expected


def test_safe_mode_uses_racks_when_every_broker_has_one() -> None:
    racked = {b: r for b, r in PARTLY_RACKED.items() if r is not None}
    enforced = assign_replicas(racked, 10, 3, start_index=0)
    assert assign_replicas(racked, 10, 3, start_index=0, rack_aware_mode=RackAwareMode.SAFE) == enforced
    unaware = assign_replicas(racked, 10, 3, start_index=0, rack_aware_mode=RackAwareMode.DISABLED)
    assert unaware == assign_replicas(no_racks(*racked), 10, 3, start_index=0)
    assert unaware != enforced


# --- AddPartitionsTest: growing a topic ------------------------------------------------------


def test_replica_placement_all_servers() -> None:
    brokers = no_racks(0, 1, 2, 3)
    partition0 = (2, 3, 0, 1)
    start = start_index_for_new_partitions(brokers, partition0[0])
    added = assign_replicas(brokers, 6, len(partition0), start_index=start, first_partition=1)
    leaders = {p: replicas[0] for p, replicas in added.items()}
    assert leaders == {1: 3, 2: 0, 3: 1, 4: 2, 5: 3, 6: 0}
    assert all(set(replicas) == {0, 1, 2, 3} for replicas in added.values())


def test_replica_placement_partial_servers() -> None:
    brokers = no_racks(0, 1, 2, 3)
    partition0 = (1, 2)
    start = start_index_for_new_partitions(brokers, partition0[0])
    added = assign_replicas(brokers, 2, len(partition0), start_index=start, first_partition=1)
    assert {p: (r[0], set(r)) for p, r in added.items()} == {1: (2, {0, 2}), 2: (3, {1, 3})}


def test_start_index_for_new_partitions() -> None:
    assert start_index_for_new_partitions([10, 20, 30], 20) == 1
    assert start_index_for_new_partitions([30, 10, 20], 15) == 1  # first id at least as large
    assert start_index_for_new_partitions([10, 20, 30], 99) == 0  # none: start over


# --- randomness ------------------------------------------------------------------------------


class FixedDraws(random.Random):
    """A generator whose draws are given, to check which draws Kafka's placement makes."""

    def __init__(self, *draws: int) -> None:
        super().__init__(0)
        self.draws = list(draws)
        self.bounds: list[int] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        self.bounds.append(start if stop is None else stop)
        return self.draws.pop(0)


@pytest.mark.parametrize("racks", [no_racks(0, 1, 2, 3, 4), SIX_BROKERS_THREE_RACKS])
def test_random_start_index_and_shift_are_two_draws(racks: dict[int, str | None]) -> None:
    rng = FixedDraws(2, 2)
    assert assign_replicas(racks, 9, 3, rng=rng) == assign_replicas(racks, 9, 3, start_index=2)
    assert rng.bounds == [len(racks), len(racks)]  # start index, then the follower shift
    # Different start and shift: the leader of partition 0 comes from the first draw.
    racked = {b: r for b, r in racks.items() if r is not None}
    ordered = rack_alternated_broker_list(racked) if racked else sorted(racks)
    assert assign_replicas(racks, 9, 3, rng=FixedDraws(3, 0))[0][0] == ordered[3]


def test_same_seed_same_assignment() -> None:
    brokers = no_racks(*range(7))
    first = assign_replicas(brokers, 20, 3, rng=random.Random(42))
    assert assign_replicas(brokers, 20, 3, rng=random.Random(42)) == first
    results = {tuple(sorted(assign_replicas(brokers, 20, 3).items())) for _ in range(50)}
    assert len(results) > 1  # without rng and start_index, the placement is random


# --- properties ------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    racked = draw(st.booleans())
    rack_count = draw(st.integers(1, 5))
    brokers: dict[int, str | None] = {
        b: (f"rack{draw(st.integers(0, rack_count - 1))}" if racked else None) for b in ids
    }
    partitions = draw(st.integers(1, 60))
    replication_factor = draw(st.integers(1, len(ids)))
    first_partition = draw(st.integers(0, 30))
    seed = draw(st.integers(0, 2**32))
    return brokers, partitions, replication_factor, first_partition, seed


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_placement_properties(cluster: tuple[dict[int, str | None], int, int, int, int]) -> None:
    brokers, partitions, replication_factor, first_partition, seed = cluster
    assignment = assign_replicas(
        brokers, partitions, replication_factor, first_partition=first_partition, rng=random.Random(seed)
    )
    assert sorted(assignment) == list(range(first_partition, first_partition + partitions))
    for replicas in assignment.values():
        assert len(replicas) == replication_factor
        assert len(set(replicas)) == replication_factor
        assert set(replicas) <= set(brokers)
    # Leaders go round-robin: no broker leads two more partitions than another.
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
    racks = {b: r for b, r in brokers.items() if r is not None}
    if racks:
        # Each partition's replicas cover min(racks, RF) racks: every rack once RF reaches the rack count.
        wanted = min(len(set(racks.values())), replication_factor)
        assert all(len(found) == wanted for found in partition_racks(assignment, racks).values())


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.integers(1, 6), st.integers(1, 10), st.integers(0, 50))
def test_whole_rounds_spread_replicas_evenly(brokers: int, rounds: int, rf: int, start: int) -> None:
    rf = min(rf, brokers)
    assignment = assign_replicas(no_racks(*range(brokers)), brokers * rounds, rf, start_index=start)
    counts = Counter(b for replicas in assignment.values() for b in replicas)
    assert counts == dict.fromkeys(range(brokers), rounds * rf)
