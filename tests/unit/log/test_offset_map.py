from __future__ import annotations

import pytest

from barnabas.log.offset_map import OffsetMap


def test_the_last_offset_put_for_a_key_wins_and_unknown_keys_are_minus_one() -> None:
    offsets = OffsetMap(10)
    assert (offsets.latest_offset, offsets.get(b"a")) == (-1, -1)
    offsets.put(b"a", 3)
    offsets.put(b"b", 4)
    offsets.put(b"a", 7)
    assert (offsets.get(b"a"), offsets.get(b"b"), offsets.size, offsets.latest_offset) == (7, 4, 2, 7)
    offsets.update_latest_offset(20)
    offsets.update_latest_offset(9)  # never goes back
    assert offsets.latest_offset == 20
    offsets.clear()
    assert (offsets.size, offsets.latest_offset, offsets.get(b"a")) == (0, -1, -1)


def test_long_keys_are_kept_apart_by_their_digest() -> None:
    offsets = OffsetMap(10)
    long_a, long_b = b"x" * 100 + b"a", b"x" * 100 + b"b"
    offsets.put(long_a, 1)
    offsets.put(long_b, 2)
    offsets.put(b"", 3)
    assert (offsets.get(long_a), offsets.get(long_b), offsets.get(b""), offsets.get(b"x" * 101)) == (1, 2, 3, -1)


def test_the_map_says_when_it_is_full() -> None:
    offsets = OffsetMap(2)
    offsets.put(b"a", 0)
    assert not offsets.full
    offsets.put(b"b", 1)
    assert offsets.full and offsets.utilization == 1.0
    with pytest.raises(ValueError, match="at least one key"):
        OffsetMap(0)
