"""A follower's side of an incremental fetch session (Kafka's FetchSessionHandler rules)."""

from __future__ import annotations

from barnabas.broker.replication.session_handler import FetchSessionHandler
from barnabas.protocol import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def test_after_a_full_fetch_only_changes_are_sent() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    full = handler.build({A: 10, B: 20})
    assert (full.session_id, full.epoch, full.send, full.forget) == (0, 0, {A: 10, B: 20}, ())
    assert handler.answered(full, ErrorCode.none, 77)
    moved = handler.build({A: 11, B: 20, C: 5})
    assert (moved.session_id, moved.epoch, moved.send, moved.forget) == (77, 1, {A: 11, C: 5}, ())
    assert handler.answered(moved, ErrorCode.none, 77)
    dropped = handler.build({A: 11, C: 5})
    assert (dropped.epoch, dropped.send, dropped.forget) == (2, {}, (B,))


def test_a_partition_swapped_for_another_is_sent_and_the_other_forgotten() -> None:
    """As many partitions as the session holds, equal values in new tuples, one of them another partition."""
    handler: FetchSessionHandler[tuple[int, int]] = FetchSessionHandler()
    assert handler.answered(handler.build({A: (1, 0), B: (2, 0)}), ErrorCode.none, 5)
    same = handler.build({A: (1, int("0")), B: (2, 0)})
    assert (same.send, same.forget) == ({}, ())
    assert handler.answered(same, ErrorCode.none, 5)
    swapped = handler.build({A: (1, 0), C: (7, 0)})
    assert (swapped.send, swapped.forget) == ({C: (7, 0)}, (B,))


def test_a_leader_without_room_leaves_every_fetch_full() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    assert handler.answered(handler.build({A: 1}), ErrorCode.none, 0)
    again = handler.build({A: 2})
    assert (again.session_id, again.epoch, again.send) == (0, 0, {A: 2})


def test_errors_and_lost_answers_start_over_with_a_full_fetch() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    handler.answered(handler.build({A: 1}), ErrorCode.none, 9)
    incremental = handler.build({A: 2})
    assert not handler.answered(incremental, ErrorCode.invalid_fetch_session_epoch, 0)
    # The same id at epoch 0: the leader closes the old session and opens a new one.
    closing = handler.build({A: 2})
    assert (closing.session_id, closing.epoch, closing.send) == (9, 0, {A: 2})
    handler.answered(closing, ErrorCode.none, 12)
    handler.build({A: 3})
    handler.failed()
    assert (handler.build({A: 3}).session_id, handler.build({A: 3}).epoch) == (12, 0)
    assert not handler.answered(handler.build({A: 3}), ErrorCode.fetch_session_id_not_found, 0)
    assert (handler.build({A: 3}).session_id, handler.build({A: 3}).epoch) == (0, 0)


def test_an_incremental_fetch_compares_only_the_partitions_named_changed() -> None:
    """The fetcher names what it looked at since the last fetch; the rest is taken as held."""
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    wanted = {A: 1, B: 2, C: 3}
    assert handler.answered(handler.build(wanted), ErrorCode.none, 5)
    wanted[A] = 10  # the full fetch kept its own copy: the session holds A at 1
    wanted[B] = 20
    del wanted[C]
    only_a = handler.build(wanted, changed={A, C})
    assert (only_a.send, only_a.forget) == ({A: 10}, (C,))
    assert handler.answered(only_a, ErrorCode.none, 5)
    assert handler.build(wanted, changed=()).send == {}
    everything = handler.build(wanted)
    assert (everything.send, everything.forget) == ({B: 20}, ())
