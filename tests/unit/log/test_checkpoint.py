from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.log.checkpoint import (
    CheckpointFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from barnabas.log.errors import CorruptCheckpointError
from barnabas.log.files import TopicPartition


def test_offset_checkpoint_writes_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({TopicPartition("orders", 1): 42, TopicPartition("my-topic", 0): 7})
    assert path.read_text() == "0\n2\nmy-topic 0 7\norders 1 42\n"


def test_offset_checkpoint_round_trips(tmp_path: Path) -> None:
    offsets = {TopicPartition("a", 0): 0, TopicPartition("a-b-c", 12): 1 << 40}
    file = OffsetCheckpointFile(tmp_path / "cp")
    file.write(offsets)
    assert file.read() == offsets


def test_missing_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "absent").read() == []


def test_write_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    OffsetCheckpointFile(tmp_path / "cp").write({TopicPartition("t", 0): 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_rewrite_replaces_the_previous_content(tmp_path: Path) -> None:
    file = OffsetCheckpointFile(tmp_path / "cp")
    file.write({TopicPartition("t", 0): 1, TopicPartition("t", 1): 2})
    file.write({TopicPartition("t", 0): 5})
    assert file.read() == {TopicPartition("t", 0): 5}


@pytest.mark.parametrize(
    "content",
    [
        "",  # no version line
        "1\n0\n",  # unknown version
        "0\n2\nt 0 1\n",  # fewer entries than promised
        "0\n1\nt 0 1\nt 1 2\n",  # more entries than promised
        "0\nx\n",  # count not a number
        "0\n1\nt 0\n",  # entry with too few fields
        "0\n1\nt zero 1\n",  # partition not a number
    ],
)
def test_malformed_offset_checkpoint_is_reported(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cp"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint_format_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    file = LeaderEpochCheckpointFile(path)
    file.write([EpochEntry(0, 0), EpochEntry(3, 150)])
    assert path.read_text() == "0\n2\n0 0\n3 150\n"
    assert file.read() == [EpochEntry(0, 0), EpochEntry(3, 150)]


def test_generic_checkpoint_checks_field_count(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    CheckpointFile(path).write([("a", 1, 2)])
    assert CheckpointFile(path).read(3) == [["a", "1", "2"]]
    with pytest.raises(CorruptCheckpointError):
        CheckpointFile(path).read(2)
