"""Segment files share a descriptor budget: idle ones give theirs back, and lose nothing by it."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.log import FileSlice, LogConfig, LogError, PartitionLog, index_file
from barnabas.log.segment_file import SegmentFile, open_segment_files, set_max_open

from .batches import T0, make_batch, offsets
from .test_index_file import open_descriptors
from .test_segment import append, create, fill

BUDGET = 8


@pytest.fixture
def budget() -> Iterator[int]:
    set_max_open(BUDGET)
    yield BUDGET
    set_max_open(None)


def test_many_segments_written_in_turn_hold_at_most_the_budget_and_keep_every_batch(
    tmp_path: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_file, "MAX_OPEN_INDEX_FILES", 1)  # index files have a budget of their own
    before = open_descriptors()
    segments = [create(tmp_path, base=1000 * i) for i in range(40)]
    assert open_segment_files() <= budget
    for round_ in range(3):
        for segment in segments:
            append(segment, segment.base_offset + 2 * round_, 2)
            assert open_segment_files() <= budget
        assert open_descriptors() - before <= budget + 1
    for segment in segments:
        segment.flush()  # a descriptor given back is opened again to sync what was written
        assert offsets(segment.read(0, segment.size)) == list(range(segment.base_offset, segment.base_offset + 6))
        assert segment.path.stat().st_size == segment.size
    for segment in segments:
        segment.close()
    assert open_segment_files() == 0


def test_a_descriptor_in_use_on_another_thread_is_never_closed_under_it(tmp_path: Path, budget: int) -> None:
    held = SegmentFile(tmp_path / "held.log", os.open(tmp_path / "held.log", os.O_RDWR | os.O_CREAT | os.O_APPEND))
    in_use, opened_others = threading.Event(), threading.Event()
    seen: list[tuple[int, int]] = []

    def writer() -> None:
        with held.use() as fd:
            in_use.set()
            assert opened_others.wait(10)
            os.write(fd, b"still mine")
            seen.append((os.fstat(fd).st_ino, fd))

    thread = threading.Thread(target=writer)
    thread.start()
    assert in_use.wait(10)
    others = []
    for i in range(3 * budget):  # each open makes room by closing the least recently used idle one
        path = tmp_path / f"{i}.log"
        others.append(SegmentFile(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)))
    opened_others.set()
    thread.join(10)
    assert seen == [(os.stat(tmp_path / "held.log").st_ino, seen[0][1])]
    assert (tmp_path / "held.log").read_bytes() == b"still mine"
    assert open_segment_files() <= budget
    for file in [held, *others]:
        file.close()


def test_a_renamed_segment_reopens_at_its_new_name(tmp_path: Path, budget: int) -> None:
    segment = create(tmp_path)
    fill(segment, 2)
    segment.change_file_suffixes("", ".swap")
    others = [create(tmp_path, base=1000 * (i + 1)) for i in range(budget)]  # its descriptor is given back
    assert open_segment_files() <= budget
    append(segment, 6, 3)
    assert segment.path.name.endswith(".log.swap")
    assert offsets(segment.read(0, segment.size)) == list(range(9))
    for s in [segment, *others]:
        s.close()


def test_a_closed_segment_refuses_reads_and_writes(tmp_path: Path, budget: int) -> None:
    segment = create(tmp_path)
    fill(segment, 1)
    segment.close()
    with pytest.raises(ValueError, match="closed"):
        segment.read(0, 10)
    with pytest.raises(ValueError, match="closed"):
        segment.flush()
    assert open_segment_files() == 0


def test_partitions_past_the_budget_append_roll_truncate_and_recover(tmp_path: Path, budget: int) -> None:
    config = LogConfig(segment_bytes=2048)
    logs = [PartitionLog.open(tmp_path / f"t-{p}", config, T0) for p in range(3 * budget)]
    for round_ in range(6):
        for log in logs:
            log.append_as_leader(make_batch(2, value_size=300, tag=f"{round_}"), leader_epoch=0, now_ms=T0)
    for log in logs:
        assert len(log.segments) > 1  # rolled: every new segment opened a file within the budget
        log.truncate_to(10, T0)
        log.close()
    assert open_segment_files() == 0
    reopened = [PartitionLog.open(tmp_path / f"t-{p}", config, T0) for p in range(3 * budget)]
    assert open_segment_files() <= budget
    for log in reopened:
        assert log.log_end_offset == 10
        read, offset = [], 0
        while offset < log.log_end_offset:
            found = offsets(log.read(offset, 1 << 20, max_offset=log.log_end_offset).records)
            read += found
            offset = found[-1] + 1
        assert read == list(range(10))
        log.close()


def test_a_slice_never_reads_the_successor_that_took_its_deleted_segments_name(tmp_path: Path) -> None:
    """A segment deleted by a truncation can be followed by a new one of the same base offset (same name)."""
    old = create(tmp_path, base=100)
    fill(old, 3)
    sliced = FileSlice(old, 0, old.size)
    assert offsets(sliced.read()) == list(range(100, 109))
    old.delete()  # a truncation below its base offset
    successor = create(tmp_path, base=100)
    fill(successor, 5)  # other records at the same name and positions
    with pytest.raises(LogError, match="was deleted"):
        sliced.open()
    successor.close()


def test_a_descriptor_given_back_never_reopens_another_file_at_its_name(tmp_path: Path, budget: int) -> None:
    segment = create(tmp_path)
    fill(segment, 1)
    others = [create(tmp_path, base=1000 * (i + 1)) for i in range(budget)]  # its descriptor is given back
    impostor = tmp_path / "impostor"
    impostor.write_bytes(b"x" * segment.size)
    os.replace(impostor, segment.path)  # (nothing in the broker does this; a reopen must notice)
    with pytest.raises(FileNotFoundError, match="another file"):
        segment.read(0, segment.size)
    for s in [segment, *others]:
        s.close()
