"""Periodic: a duty's fixed-rate schedule, as Kafka's scheduler runs LogManager's tasks."""

from __future__ import annotations

from barnabas.log.periodic import Periodic


def test_first_due_after_the_initial_delay_then_every_interval() -> None:
    every = Periodic(100, first_ms=30)
    assert [now for now in range(0, 400, 10) if every.due(now)] == [30, 130, 230, 330]


def test_without_an_initial_delay_the_first_run_is_one_interval_on() -> None:
    every = Periodic(100)
    assert [now for now in range(0, 400, 10) if every.due(now)] == [100, 200, 300]


def test_a_late_tick_runs_once_and_the_schedule_goes_on_from_it() -> None:
    every = Periodic(100, first_ms=0)
    assert every.due(0)
    assert every.due(1_000)  # nine intervals missed: one run
    assert not every.due(1_050)
    assert every.due(1_100)


def test_an_interval_of_zero_is_due_at_every_tick() -> None:
    every = Periodic(0, first_ms=0)
    assert all(every.due(now) for now in (0, 0, 1, 5))


def test_a_huge_interval_is_due_only_once() -> None:
    every = Periodic(2**63 - 1, first_ms=10)
    assert [now for now in (0, 10, 20, 10**12) if every.due(now)] == [10]
