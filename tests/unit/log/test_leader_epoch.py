from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.log import UNDEFINED_EPOCH, LeaderEpochCache

UNDEFINED = (-1, -1)


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 10)
    cache.assign(3, 20)
    cache.assign(5, 35)
    return cache


def test_assign_only_records_a_new_epoch(cache: LeaderEpochCache) -> None:
    assert not cache.assign(5, 40)  # same epoch, later offset: nothing to record
    assert cache.assign(6, 40)
    assert cache.entries == [(1, 10), (3, 20), (5, 35), (6, 40)]
    assert cache.latest_epoch == 6


def test_assign_removes_entries_that_break_monotonicity(cache: LeaderEpochCache) -> None:
    assert cache.assign(4, 30)  # an older epoch from a new leader: later entries conflict
    assert cache.entries == [(1, 10), (3, 20), (4, 30)]
    assert cache.assign(4, 25)  # the same epoch starting earlier replaces it
    assert cache.entries == [(1, 10), (3, 20), (4, 25)]


def test_assign_rejects_negative_values(cache: LeaderEpochCache) -> None:
    with pytest.raises(ValueError, match="invalid"):
        cache.assign(-1, 0)


def test_end_offset_for_the_latest_epoch_is_the_log_end(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(5, log_end_offset=50) == (5, 50)


def test_end_offset_for_an_older_epoch_is_the_next_epochs_start(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(3, 50) == (3, 35)
    assert cache.end_offset_for(1, 50) == (1, 20)


def test_end_offset_for_an_unknown_epoch_between_known_ones(cache: LeaderEpochCache) -> None:
    # the largest known epoch below it, ending where the next known epoch starts
    assert cache.end_offset_for(2, 50) == (1, 20)
    assert cache.end_offset_for(4, 50) == (3, 35)


def test_end_offset_for_an_epoch_below_the_first(cache: LeaderEpochCache) -> None:
    # Kafka answers with the requested epoch and the first known start offset
    assert cache.end_offset_for(0, 50) == (0, 10)


def test_end_offset_for_undefined_or_future_epochs(cache: LeaderEpochCache, tmp_path: Path) -> None:
    assert cache.end_offset_for(UNDEFINED_EPOCH, 50) == UNDEFINED
    assert cache.end_offset_for(9, 50) == UNDEFINED
    assert LeaderEpochCache(tmp_path / "empty").end_offset_for(0, 50) == UNDEFINED


def test_truncate_from_end(cache: LeaderEpochCache) -> None:
    cache.truncate_from_end(36)
    assert cache.entries == [(1, 10), (3, 20), (5, 35)]
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 10)]


def test_truncate_from_start_is_exclusive(cache: LeaderEpochCache) -> None:
    cache.truncate_from_start(20)
    assert cache.entries == [(3, 20), (5, 35)]
    cache.truncate_from_start(25)
    assert cache.entries == [(3, 25), (5, 35)]
    cache.truncate_from_start(5)
    assert cache.entries == [(3, 25), (5, 35)]


def test_epoch_for_offset(cache: LeaderEpochCache) -> None:
    assert [cache.epoch_for_offset(o) for o in (5, 10, 19, 20, 100)] == [None, 1, 1, 3, 5]


def test_every_change_is_persisted(cache: LeaderEpochCache, tmp_path: Path) -> None:
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 10\n3 20\n5 35\n"
    cache.truncate_from_start(15)
    cache.truncate_from_end(35)
    assert LeaderEpochCache.load(tmp_path).entries == [(1, 15), (3, 20)]
