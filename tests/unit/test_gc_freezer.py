"""The GC freezer: survivors leave automatic collections; cyclic garbage among them goes at the next round."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from barnabas.gc_freezer import freeze_once


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
