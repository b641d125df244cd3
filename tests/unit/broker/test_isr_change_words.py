"""A leader logs an ISR change in Kafka's words, so operators and the fault suite tell shrinks from expansions."""

from __future__ import annotations

import pytest

from barnabas.broker.replication.manager import _isr_change


@pytest.mark.parametrize(
    ("before", "after", "words"),
    [
        ((1, 2, 3), (1, 2), "Shrinking ISR"),
        ((1, 2, 3), (1,), "Shrinking ISR"),
        ((1, 2), (1, 2, 3), "Expanding ISR"),
        ((1,), (3, 1), "Expanding ISR"),
        ((1, 2), (1, 3), "Changing ISR"),
    ],
)
def test_a_change_is_named_by_whether_members_left_joined_or_both(
    before: tuple[int, ...], after: tuple[int, ...], words: str
) -> None:
    assert _isr_change(before, after) == words
