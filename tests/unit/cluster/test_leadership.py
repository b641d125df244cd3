"""The controller's on-request leader moves: elections, reassignments, leader rebalancing."""

from __future__ import annotations

import uuid

from barnabas.cluster import BrokerInfo, PartitionState, Reassignment, Topic
from barnabas.cluster.leadership import (
    ElectionError,
    cancel_reassignment,
    completed_reassignment,
    imbalanced_partitions,
    initial_state,
    preferred_election,
    reassign,
    recovered_election,
    unclean_election,
)
from barnabas.protocol import ErrorCode

#: The broker epoch every live broker of these tests is registered in.
EPOCH = 7


def live(*broker_ids: int, epoch: int = EPOCH) -> dict[int, BrokerInfo]:
    """Live brokers, each registered in ``epoch``."""
    return {b: BrokerInfo(b, "127.0.0.1", 9092 + b, epoch=epoch) for b in broker_ids}


def ps(leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int = 0) -> PartitionState:
    """A partition state whose ISR members are in sync in ``EPOCH``."""
    return PartitionState(leader, leader_epoch, isr, controller_epoch, {r: EPOCH for r in isr})


def topic(*assignment: tuple[int, ...], reassigning: dict[int, Reassignment] | None = None) -> Topic:
    return Topic("t", uuid.UUID(int=7), dict(enumerate(assignment)), reassigning=reassigning or {})


def test_preferred_election_moves_leadership_to_the_first_replica_at_a_new_epoch() -> None:
    state = ps(leader=2, leader_epoch=4, isr=(2, 1, 3), controller_epoch=1)
    assert preferred_election(state, (1, 2, 3), live(1, 2, 3)) == ps(1, 5, (2, 1, 3), 1)


def test_preferred_election_is_refused_when_not_needed_or_not_possible() -> None:
    led = ps(1, 4, (1, 2))
    assert isinstance(error := preferred_election(led, (1, 2), live(1, 2)), ElectionError)
    assert error.code == ErrorCode.election_not_needed
    out_of_sync = ps(2, 4, (2,))
    assert isinstance(error := preferred_election(out_of_sync, (1, 2), live(1, 2)), ElectionError)
    assert error.code == ErrorCode.preferred_leader_not_available
    dead = ps(2, 4, (2, 1))
    assert isinstance(error := preferred_election(dead, (1, 2), live(2)), ElectionError)
    assert error.code == ErrorCode.preferred_leader_not_available


def test_unclean_election_prefers_in_sync_then_takes_any_live_replica() -> None:
    live_leader = ps(1, 3, (1, 2))
    assert isinstance(error := unclean_election(live_leader, (1, 2, 3), live(1, 2, 3)), ElectionError)
    assert error.code == ErrorCode.election_not_needed
    assert unclean_election(ps(-1, 3, (1, 2)), (1, 2, 3), live(2, 3)) == ps(2, 4, (2,))
    assert unclean_election(ps(-1, 3, (1,)), (1, 2, 3), live(3)) == ps(3, 4, (3,))
    assert isinstance(error := unclean_election(ps(-1, 3, (1,)), (1, 2), live()), ElectionError)
    assert error.code == ErrorCode.eligible_leaders_not_available


def test_reassign_puts_target_first_and_names_what_is_added_and_removed() -> None:
    moved = reassign(topic((1, 2, 3)), 0, (4, 2, 5))
    assert moved.assignment[0] == (4, 2, 5, 1, 3)
    assert moved.reassigning == {0: Reassignment(adding=(4, 5), removing=(1, 3))}
    assert moved.target_replicas(0) == (4, 2, 5)
    assert moved.original_replicas(0) == (2, 1, 3), "as in Kafka, the original order is not kept"


def test_reassigning_again_starts_from_the_original_replicas() -> None:
    moving = reassign(topic((1, 2, 3)), 0, (4, 5, 6))
    again = reassign(moving, 0, (1, 2, 4))
    assert again.assignment[0] == (1, 2, 4, 3)
    assert again.reassigning == {0: Reassignment(adding=(4,), removing=(3,))}
    back = reassign(moving, 0, (1, 2, 3))
    assert back.assignment[0] == (1, 2, 3) and back.reassigning == {}


def test_reassignment_survives_the_stored_document() -> None:
    moving = reassign(topic((1, 2, 3), (2, 3, 1)), 1, (3, 4))
    assert Topic.from_json("t", moving.to_json()) == moving


def test_reassignment_completes_only_when_every_target_replica_is_in_sync() -> None:
    moving = reassign(topic((1, 2, 3)), 0, (2, 3, 4))
    assert completed_reassignment(moving, 0, ps(1, 5, (1, 2, 3)), live(1, 2, 3, 4)) is None
    done = completed_reassignment(moving, 0, ps(1, 5, (1, 2, 3, 4)), live(1, 2, 3, 4))
    assert done is not None
    finished, state = done
    assert finished.assignment[0] == (2, 3, 4) and finished.reassigning == {}
    assert state == ps(2, 6, (2, 3, 4)), "the removed leader hands over to an in-sync target replica"


def test_completion_keeps_a_leader_that_stays() -> None:
    moving = reassign(topic((1, 2, 3)), 0, (1, 2))
    done = completed_reassignment(moving, 0, ps(2, 5, (1, 2, 3)), live(1, 2, 3))
    assert done is not None
    assert done[1] == ps(2, 6, (1, 2))


def test_cancel_reverts_to_the_original_replicas_or_refuses() -> None:
    moving = reassign(topic((1, 2)), 0, (3, 4))
    reverted = cancel_reassignment(moving, 0, ps(1, 5, (1, 2, 3)), live(1, 2, 3))
    assert not isinstance(reverted, ElectionError)
    assert reverted[0].assignment[0] == (1, 2) and reverted[0].reassigning == {}
    assert reverted[1] == ps(1, 6, (1, 2))
    stranded = cancel_reassignment(moving, 0, ps(3, 5, (3, 4)), live(1, 2, 3, 4))
    assert isinstance(stranded, ElectionError) and stranded.code == ErrorCode.invalid_replica_assignment
    idle = cancel_reassignment(topic((1, 2)), 0, ps(1, 5, (1, 2)), live(1, 2))
    assert isinstance(idle, ElectionError) and idle.code == ErrorCode.no_reassignment_in_progress


def test_rebalance_moves_partitions_of_brokers_above_the_imbalance_threshold() -> None:
    many = Topic("many", uuid.UUID(int=1), {p: (1, 2) if p < 10 else (2, 1) for p in range(20)})
    states = {("many", p): ps(2, 1, (1, 2)) for p in range(20)}
    states[("many", 0)] = ps(1, 1, (1, 2))
    chosen = imbalanced_partitions({"many": many}, states, live(1, 2), threshold_percent=10)
    assert chosen == [("many", p) for p in range(1, 10)], "broker 1 prefers 10, leads 1: 90 % imbalance"
    states.update({("many", p): ps(1, 1, (1, 2)) for p in range(1, 10)})
    states[("many", 9)] = ps(2, 1, (1, 2))
    assert imbalanced_partitions({"many": many}, states, live(1, 2), threshold_percent=10) == [], "10 % is not above"
    assert imbalanced_partitions({"many": many}, states, live(1, 2), threshold_percent=5) == [("many", 9)]


def test_rebalance_skips_dead_out_of_sync_and_reassigning_preferred_leaders() -> None:
    two = Topic("two", uuid.UUID(int=2), {0: (1, 2), 1: (1, 2)})
    states = {("two", 0): ps(2, 1, (2,)), ("two", 1): ps(2, 1, (1, 2))}
    assert imbalanced_partitions({"two": two}, states, live(1, 2), 10) == [("two", 1)]
    assert imbalanced_partitions({"two": two}, states, live(2), 10) == []
    moving = reassign(two, 1, (3, 2))
    assert imbalanced_partitions({"two": moving}, states, live(1, 2, 3), 10) == []


def test_a_new_partition_is_led_by_its_first_live_replica_with_the_live_replicas_in_sync() -> None:
    brokers = {**live(1, 3), 2: BrokerInfo(2, "127.0.0.1", 9094, epoch=12)}
    assert initial_state((2, 1, 3), brokers) == PartitionState(2, 0, (2, 1, 3), 0, {1: EPOCH, 2: 12, 3: EPOCH})
    assert initial_state((4, 1), live(1)) == ps(1, 0, (1,)), "a replica that is not live joins once caught up"
    assert initial_state((4, 5), live(1)) == PartitionState(-1, 0, ()), "nothing live: the controller elects later"


def test_a_restarted_replica_is_not_in_sync_for_elections() -> None:
    restarted = {**live(1, 3), 2: BrokerInfo(2, "127.0.0.1", 9094, epoch=EPOCH + 1)}
    state = ps(1, 4, (1, 2, 3))
    assert isinstance(error := preferred_election(ps(3, 4, (1, 2, 3)), (2, 1, 3), restarted), ElectionError)
    assert error.code == ErrorCode.preferred_leader_not_available
    assert preferred_election(state, (3, 1, 2), restarted) == ps(3, 5, (1, 2, 3))
    moving = reassign(topic((1, 3)), 0, (1, 2))
    assert completed_reassignment(moving, 0, state, restarted) is None, "2 is in the ISR only as its old self"
    led_by_restarted = ps(2, 4, (2, 3))
    assert unclean_election(led_by_restarted, (2, 3), restarted) == ps(3, 5, (3,)), "a restarted leader is no leader"


def recovering(**ends: tuple[int, int]) -> PartitionState:
    """A restored partition's state with the log ends reported so far (``b1=(epoch, offset)``)."""
    return PartitionState(-1, 0, (), recovered={int(name[1:]): end for name, end in ends.items()})


def test_a_restored_partition_waits_until_every_replica_has_reported_its_log() -> None:
    state = recovering(b1=(4, 100), b2=(4, 90))
    assert recovered_election(state, (1, 2, 3), live(1, 2, 3)) is None


def test_the_replica_whose_log_ends_latest_leads_a_restored_partition_above_every_reported_epoch() -> None:
    """The highest leader epoch wins over a longer log of an older epoch (a deposed leader's unreplicated tail)."""
    state = recovering(b1=(4, 100), b2=(5, 90), b3=(5, 95))
    elected_state = recovered_election(state, (1, 2, 3), live(1, 2, 3))
    assert elected_state == PartitionState(3, 6, (3,), 0, {3: EPOCH}, None, None)


def test_a_tie_goes_to_assignment_order_and_an_empty_log_reports_epoch_minus_one() -> None:
    state = recovering(b1=(-1, 0), b2=(3, 50), b3=(3, 50))
    assert recovered_election(state, (3, 2, 1), live(1, 2, 3)) == PartitionState(3, 4, (3,), 0, {3: EPOCH})


def test_a_restored_partition_whose_best_replica_is_gone_again_waits() -> None:
    state = recovering(b1=(2, 10), b2=(2, 20))
    assert recovered_election(state, (1, 2), live(1)) is None


def test_an_unclean_election_gives_up_on_missing_reports_and_takes_the_latest_reported_log() -> None:
    state = recovering(b1=(2, 10), b2=(3, 5))
    assert unclean_election(state, (1, 2, 3), live(1, 2)) == PartitionState(2, 4, (2,), 0, {2: EPOCH})
    refused = unclean_election(recovering(), (1, 2), live(1, 2))
    assert isinstance(refused, ElectionError) and refused.code == ErrorCode.eligible_leaders_not_available


def test_the_recovery_ends_with_the_first_election() -> None:
    state = recovering(b1=(2, 10))
    after = recovered_election(state, (1,), live(1))
    assert after is not None and after.recovered is None
    assert PartitionState.from_json(after.to_json()) == after
