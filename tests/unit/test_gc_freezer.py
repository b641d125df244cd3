"""The GC freezer: survivors leave automatic collections; cyclic garbage among them goes at the next round."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from barnabas.gc_freezer import freeze_once, freeze_survivors


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_survivors_are_frozen_out_of_automatic_collections() -> None:
    kept = Node()
    freeze_once()
    assert gc.get_freeze_count() > 0
    assert kept not in gc.get_objects(generation=2), "a frozen object is in no generation a collection walks"


def test_a_cycle_that_became_garbage_while_frozen_is_collected_at_the_next_round() -> None:
    first, second = Node(), Node()
    first.other, second.other = second, first
    watched = weakref.ref(first)
    freeze_once()
    del first, second  # a cycle: refcounting cannot free it, and the automatic collections skip it
    gc.collect()
    assert watched() is not None, "frozen: still there after an ordinary full collection"
    freeze_once()
    assert watched() is None


@pytest.fixture
def quick_collections() -> Iterator[None]:
    """Collection thresholds low enough that a few thousand new objects bring an automatic full collection."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 1, 1)
    yield
    gc.set_threshold(*thresholds)


def full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def made_until_a_full_collection() -> list[Node]:
    """New objects that survive, until an automatic full collection has run over them."""
    before = full_collections()
    made: list[Node] = []
    while full_collections() == before:
        made.extend(Node() for _ in range(1000))
        assert len(made) < 10_000_000, "no automatic full collection came"
    return made


@pytest.mark.usefixtures("quick_collections")
def test_what_survives_an_automatic_full_collection_is_frozen_at_once() -> None:
    async def while_the_freezer_runs() -> None:
        freezer = asyncio.ensure_future(freeze_survivors(interval_s=3600))
        try:
            await asyncio.sleep(0)  # its first round
            made = made_until_a_full_collection()
            frozen = {id(o) for o in gc.get_objects(generation=2)}
            assert id(made[0]) not in frozen, "frozen after the full collection, long before the next round"
        finally:
            freezer.cancel()
            await asyncio.gather(freezer, return_exceptions=True)

    asyncio.run(while_the_freezer_runs())
    made = made_until_a_full_collection()
    assert id(made[0]) in {id(o) for o in gc.get_objects(generation=2)}, "the stopped freezer froze it"


@pytest.fixture
def no_automatic_collections() -> Iterator[None]:
    gc.disable()
    yield
    gc.enable()


@pytest.mark.usefixtures("no_automatic_collections")
def test_a_first_round_without_collection_freezes_everything_and_collects_nothing() -> None:
    """The broker collected and froze once its logs were loaded: the freezer's first round after its
    start only freezes what the start made since, without walking everything again."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    watched = weakref.ref(first)
    kept = Node()
    del first, second  # cyclic garbage

    async def first_round() -> None:
        freezer = asyncio.ensure_future(freeze_survivors(interval_s=3600, collect_first=False))
        try:
            await asyncio.sleep(0)
        finally:
            freezer.cancel()
            await asyncio.gather(freezer, return_exceptions=True)

    asyncio.run(first_round())
    assert all(kept not in gc.get_objects(generation=g) for g in range(3)), "frozen by the first round"
    assert watched() is not None, "no collection ran: the cycle waits for the next round"
