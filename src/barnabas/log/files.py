"""File names in a log dir and the one durable-write recipe every writer uses.

Rules this module keeps (Kafka's LogFileUtils and CheckpointFile are the reference):

- A segment's files are named by its base offset as 20 zero-padded digits plus a suffix:
  ``00000000000000000000.log``, ``.index``, ``.timeindex``; producer snapshots likewise ``.snapshot``.
- A partition lives in ``<topic>-<partition>``; the topic may itself contain ``-``, so the partition
  is whatever follows the last one.
- Small metadata files are replaced atomically: write ``<name>.tmp``, fsync it, rename over the old
  file, fsync the directory. A crash leaves either the old or the new content, never a mix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TMP_SUFFIX",
    "TopicPartition",
    "fsync_dir",
    "offset_from_file_name",
    "offset_path",
    "parse_partition_dir_name",
    "partition_dir_name",
    "validate_topic_name",
    "write_atomically",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
#: Segment files renamed for deletion after ``file.delete.delay.ms``.
DELETED_SUFFIX = ".deleted"
#: A segment the cleaner is writing; a crash leaves it unfinished, so recovery deletes it.
CLEANED_SUFFIX = ".cleaned"
#: A finished cleaned segment being swapped in; recovery completes the swap.
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
#: A partition dir renamed for deletion: ``<topic>-<partition>.<uuid hex>-delete``.
DELETE_DIR_SUFFIX = "-delete"

_MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicPartition(NamedTuple):
    """A partition's identity, ordered by topic then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def offset_path(directory: Path, offset: int, suffix: str) -> Path:
    """The file for ``offset`` with ``suffix`` in ``directory`` (LogFileUtils.filenamePrefixFromOffset)."""
    return directory / f"{offset:020d}{suffix}"


def offset_from_file_name(name: str) -> int | None:
    """The offset a segment or snapshot file is named after, or None when the name is not one."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def validate_topic_name(topic: str) -> None:
    """Reject names Kafka rejects (Topic.validate), so a partition dir name is always parseable.

    Raises:
        ValueError: empty, ``.``/``..``, longer than 249 characters or with illegal characters.
    """
    if not topic or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if len(topic) > _MAX_TOPIC_LENGTH:
        raise ValueError(f"topic name {topic[:20]!r}... is longer than {_MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.match(topic):
        raise ValueError(f"topic name {topic!r} contains characters other than ASCII alphanumerics, '.', '_', '-'")


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory name Kafka gives a partition's log."""
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """Invert :func:`partition_dir_name`; None for anything else (``-delete``, ``-future``, stray files)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    try:
        validate_topic_name(topic)
    except ValueError:
        return None
    return TopicPartition(topic, int(partition))


def fsync_dir(directory: Path) -> None:
    """Make renames and new files in ``directory`` durable (a rename is a directory write)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content, whole.

    With ``sync`` False nothing is fsynced: the caller syncs the file and its directory later
    (until then a crash may leave the file empty or missing).
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
