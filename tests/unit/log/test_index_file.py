"""IndexFile: at most MAX_OPEN_INDEX_FILES descriptors in the process, whatever number of indexes is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from barnabas.log import index_file
from barnabas.log.index_file import IndexFile, open_index_files


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_indexes_written_in_turn_hold_at_most_the_cap_and_keep_every_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_file, "MAX_OPEN_INDEX_FILES", 8)
    before = open_descriptors()
    files = [IndexFile(tmp_path / f"{i}.index", 4) for i in range(50)]
    for round_ in range(3):
        for i, file in enumerate(files):
            file.append(bytes([round_, i, 0, 0]))
        assert open_index_files() <= 8
        assert open_descriptors() - before <= 8
    for i, file in enumerate(files):
        file.flush()  # reopens a closed one to sync what it wrote
        assert file.read_all() == bytes([0, i, 0, 0, 1, i, 0, 0, 2, i, 0, 0])
    for file in files:
        file.close()
    assert open_index_files() == 0
    assert open_descriptors() <= before  # (indexes other tests left open were closed to make room)


def test_truncate_and_create_work_on_a_file_whose_descriptor_was_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_file, "MAX_OPEN_INDEX_FILES", 1)
    first, second = IndexFile(tmp_path / "a.index", 2), IndexFile(tmp_path / "b.index", 2)
    first.append(b"a1")
    first.append(b"a2")
    second.append(b"b1")  # closes first's descriptor
    first.truncate_entries(1)
    assert first.read_all() == b"a1"
    second.create()
    assert second.read_all() == b""
    first.delete()
    second.delete()
    assert open_index_files() == 0
    assert not (tmp_path / "a.index").exists()
