"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

Rules this module keeps (CheckpointFile, OffsetCheckpointFile, LeaderEpochCheckpointFile):

- The layout is byte-compatible with Kafka, so Kafka's tools read ours and we read theirs:
  ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (high watermarks) and ``cleaner-offset-checkpoint`` (the
  log cleaner's first dirty offsets; one each per log dir, entries ``topic partition offset``)
  and ``leader-epoch-checkpoint`` (one per partition, entries ``epoch start_offset``), all at
  version 0.
- Writes replace the file atomically (tmp, fsync, rename, fsync dir): a crash never leaves a
  half-written checkpoint.
- A missing file reads as no entries; a malformed one raises :class:`CorruptCheckpointError` and
  the caller chooses the safe fallback (recover from the start, rebuild the epoch cache).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptCheckpointError
from .files import TopicPartition, write_atomically

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointFile",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
#: High watermarks, written by Kafka's ReplicaManager (checkpointHighWatermarks).
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: Per log dir: where each compacted log's dirty section starts (Kafka's LogCleanerManager).
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

_VERSION = 0


class EpochEntry(NamedTuple):
    """The first offset written under a leader epoch (Kafka's EpochEntry)."""

    epoch: int
    start_offset: int


class CheckpointFile:
    """One checkpoint file: lines of whitespace-separated fields under a version and a count."""

    def __init__(self, path: Path, version: int = _VERSION) -> None:
        self.path = path
        self.version = version

    def write(self, entries: Iterable[Sequence[object]], *, sync: bool = True) -> None:
        """Replace the file with ``entries``, durably unless ``sync`` is False (see write_atomically)."""
        lines = [" ".join(str(field) for field in entry) for entry in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        write_atomically(self.path, text.encode("utf-8"), sync=sync)

    def read(self, fields: int) -> list[list[str]]:
        """The entries, each split into ``fields`` strings; [] when the file does not exist.

        Raises:
            CorruptCheckpointError: wrong version, wrong count, or a line with the wrong shape.
        """
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as exc:
            raise CorruptCheckpointError(f"checkpoint {self.path} is not text") from exc
        lines = text.splitlines()
        if len(lines) < 2:
            raise CorruptCheckpointError(f"checkpoint {self.path} has no version and count lines")
        if lines[0].strip() != str(self.version):
            raise CorruptCheckpointError(f"checkpoint {self.path} has unrecognised version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise CorruptCheckpointError(f"checkpoint {self.path} has a malformed count {lines[1]!r}") from None
        body = [line for line in lines[2:] if line.strip()]
        if count != len(body):
            raise CorruptCheckpointError(f"checkpoint {self.path} promises {count} entries but has {len(body)}")
        entries = [line.split() for line in body]
        for line, entry in zip(body, entries, strict=True):
            if len(entry) != fields:
                raise CorruptCheckpointError(f"malformed line {line!r} in checkpoint {self.path}")
        return entries


class OffsetCheckpointFile:
    """``topic partition offset`` per line: recovery points, log start offsets or high watermarks of a log dir."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path)
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file with ``offsets``, sorted for stable output."""
        self._file.write((tp.topic, tp.partition, offset) for tp, offset in sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        """The offsets by partition; {} when the file does not exist.

        Raises:
            CorruptCheckpointError: the file is malformed.
        """
        result: dict[TopicPartition, int] = {}
        for topic, partition, offset in self._file.read(3):
            try:
                result[TopicPartition(topic, int(partition))] = int(offset)
            except ValueError:
                raise CorruptCheckpointError(
                    f"malformed entry {topic} {partition} {offset} in checkpoint {self.path}"
                ) from None
        return result


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` per line: a partition's leader epoch history."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path)
        self.path = path

    def write(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> None:
        """Replace the file with ``entries``, durably unless ``sync`` is False."""
        self._file.write(entries, sync=sync)

    def read(self) -> list[EpochEntry]:
        """The entries in file order; [] when the file does not exist.

        Raises:
            CorruptCheckpointError: the file is malformed.
        """
        result: list[EpochEntry] = []
        for epoch, start_offset in self._file.read(2):
            try:
                result.append(EpochEntry(int(epoch), int(start_offset)))
            except ValueError:
                raise CorruptCheckpointError(
                    f"malformed entry {epoch} {start_offset} in checkpoint {self.path}"
                ) from None
        return result
