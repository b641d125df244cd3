"""The decommission plan: which broker takes each of the leaving broker's replica slots."""

from __future__ import annotations

import pytest

from barnabas.cli.decommission import Move, plan_moves, settled
from barnabas.cli.errors import CliError


def test_only_partitions_on_the_leaving_broker_move_and_its_slot_keeps_its_place() -> None:
    replicas = {("t", 0): (2, 0), ("t", 1): (0, 1), ("t", 2): (1, 2)}
    moves = plan_moves(replicas, 2, {0: None, 1: None, 2: None, 3: None})
    assert moves == [Move("t", 0, (2, 0), (3, 0)), Move("t", 2, (1, 2), (1, 3))]


def test_the_least_loaded_broker_takes_each_slot_as_the_plan_goes() -> None:
    # Broker 0 starts with two replicas, broker 1 with none: 1 takes two slots before 0 takes any.
    replicas = {("held", p): (0,) for p in range(2)} | {("c", p): (9,) for p in range(4)}
    moves = plan_moves(replicas, 9, {0: None, 1: None, 9: None})
    assert [m.after for m in moves] == [(1,), (1,), (0,), (1,)]


def test_a_broker_already_holding_the_partition_is_never_chosen() -> None:
    replicas = {("a", p): (0, 9) for p in range(3)}
    moves = plan_moves(replicas, 9, {0: None, 1: None, 9: None})
    assert [m.after for m in moves] == [(0, 1), (0, 1), (0, 1)]


def test_a_rack_the_partition_does_not_use_yet_comes_first() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "c"}
    replicas = {("t", 0): (0, 2)} | {("busy", p): (3,) for p in range(5)}  # 3 is the busiest broker
    (move,) = plan_moves(replicas, 2, racks)
    assert move.after == (0, 3), "rack b leaves with broker 2: rack c, not a second replica in rack a"


def test_a_dead_broker_is_planned_away_too() -> None:
    """The leaving broker need not be registered: its replicas still move to the live ones."""
    assert plan_moves({("t", 0): (5, 0)}, 5, {0: None, 1: None}) == [Move("t", 0, (5, 0), (1, 0))]


def test_a_replication_factor_as_large_as_the_brokers_left_is_refused_in_one_line() -> None:
    with pytest.raises(CliError) as refused:
        plan_moves({("full", 3): (0, 1, 2)}, 2, {0: None, 1: None, 2: None})
    message = str(refused.value)
    assert message.startswith("cannot decommission broker 2: full-3 has 3 replicas and only 2 other brokers")
    assert "\n" not in message


def test_nothing_to_move_is_an_empty_plan() -> None:
    assert plan_moves({("t", 0): (0, 1)}, 2, {0: None, 1: None, 2: None}) == []


def test_a_refusal_names_the_cordoned_brokers_it_left_out() -> None:
    """Cordoned brokers take no replica, so they are not among ``brokers``; the refusal says why they are missing."""
    with pytest.raises(CliError) as refused:
        plan_moves({("full", 0): (0, 1, 2)}, 2, {0: None, 1: None}, left_out=[3])
    assert str(refused.value) == (
        "cannot decommission broker 2: full-0 has 3 replicas and only 2 other brokers could hold them "
        "(cordoned, so left out: 3); add a broker or lower its replication factor first"
    )


def test_moves_are_settled_only_once_the_metadata_shows_their_new_brokers_alone() -> None:
    """A reassignment lists old and new brokers together until it completes, and a broker's view trails the
    controller's: planned again from such a view, RF 3 on 4 brokers seemed to have 4 replicas and nowhere to go."""
    moves = [Move("orders", 0, (0, 1, 3), (0, 1, 2)), Move("orders", 1, (3, 2, 1), (0, 2, 1))]
    moving = {("orders", 0): (0, 1, 3, 2), ("orders", 1): (0, 2, 1)}
    before = {("orders", 0): (0, 1, 3), ("orders", 1): (3, 2, 1)}
    done = {("orders", 0): (1, 0, 2), ("orders", 1): (0, 2, 1), ("other", 0): (3,)}

    assert not settled(moving, moves)
    assert not settled(before, moves)
    assert settled(done, moves)
    assert settled({("orders", 1): (0, 2, 1)}, moves), "a partition gone with its topic is done"
