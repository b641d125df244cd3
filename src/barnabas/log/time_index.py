"""The sparse time index of a segment: ``<base offset>.timeindex`` (Kafka's TimeIndex).

Rules this module keeps:

- An entry is 12 bytes, big-endian: a timestamp (int64) and an offset relative to the segment's
  base offset (int32). The file is Kafka's format.
- An entry says "the largest batch maxTimestamp seen up to here is T, first reached by the batch
  ending at offset O". Entries are only added when T grows, so timestamps are strictly increasing
  and offsets non-decreasing; a file that breaks this is corrupt and the segment is rebuilt.
- :meth:`TimeIndex.lookup` returns the last entry with timestamp <= target. Every batch before its
  offset has maxTimestamp <= that entry's timestamp, so the first batch with maxTimestamp >= target
  is at or after the entry's offset: a segment scans forward from there
  (LogSegment.findOffsetByTimestamp).
- ``segment.index.bytes // 12`` entries make the index full and roll the segment; the final entry a
  segment gets when it stops being active may exceed that (Kafka's skipFullCheck).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptIndexError
from .index_file import IndexFile

__all__ = ["NO_TIMESTAMP", "TimeIndex", "TimestampOffset"]

_ENTRY = struct.Struct(">qi")
_INT32_MAX = (1 << 31) - 1

#: Kafka's RecordBatch.NO_TIMESTAMP.
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A timestamp and the absolute offset of the batch that first reached it."""

    timestamp: int
    offset: int


class TimeIndex:
    """Timestamp -> offset, so ListOffsets by time skips most of a segment."""

    ENTRY_SIZE = _ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // self.ENTRY_SIZE
        self._file = IndexFile(path, self.ENTRY_SIZE)
        self._timestamps = array("q")
        self._relative = array("i")

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        """A new empty index file (replacing any existing one)."""
        index = cls(path, base_offset, max_index_bytes)
        index._file.create()
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        """Read and sanity-check an existing time index.

        Raises:
            FileNotFoundError: the index does not exist.
            CorruptIndexError: the file fails :meth:`sanity_check`.
        """
        index = cls(path, base_offset, max_index_bytes)
        data = index._file.read_all()
        if len(data) % cls.ENTRY_SIZE:
            raise CorruptIndexError(f"time index file {path} has size {len(data)}, not a multiple of {cls.ENTRY_SIZE}")
        for timestamp, relative in _ENTRY.iter_unpack(data):
            index._timestamps.append(timestamp)
            index._relative.append(relative)
        index.sanity_check()
        return index

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def last_entry(self) -> TimestampOffset:
        """The newest entry, or (NO_TIMESTAMP, base offset) when there is none (Kafka's lastEntry)."""
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._relative[-1])

    def sanity_check(self) -> None:
        """Check that timestamps strictly increase and offsets never go backwards.

        Raises:
            CorruptIndexError: the entries break the ordering rules.
        """
        previous_timestamp: int | None = None
        previous_offset = 0
        for timestamp, relative in zip(self._timestamps, self._relative, strict=True):
            if relative < previous_offset:
                raise CorruptIndexError(f"time index {self.path}: offset {self.base_offset + relative} goes back")
            if previous_timestamp is not None and timestamp <= previous_timestamp:
                raise CorruptIndexError(f"time index {self.path}: timestamp {timestamp} does not increase")
            previous_timestamp, previous_offset = timestamp, relative

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if ``timestamp`` is newer than the last entry; return whether it was.

        Raises:
            ValueError: the index is full (unless ``skip_full_check``), or the entry goes backwards.
        """
        if not skip_full_check and self.is_full:
            raise ValueError(f"attempt to append to the full time index {self.path}")
        last = self.last_entry
        if self._timestamps and offset < last.offset:
            raise ValueError(f"time index {self.path}: offset {offset} is below the last entry's {last.offset}")
        if self._timestamps and timestamp < last.timestamp:
            raise ValueError(f"time index {self.path}: timestamp {timestamp} is below {last.timestamp}")
        if timestamp <= last.timestamp:
            return False
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit time index {self.path} with base {self.base_offset}")
        self._file.append(_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._relative.append(relative)
        return True

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= ``timestamp``, or (NO_TIMESTAMP, base offset) if none."""
        slot = bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._relative[slot])

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's TimeIndex.truncateTo)."""
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_left(self._relative, min(relative, _INT32_MAX))
        self._truncate_entries(keep)

    def reset(self) -> None:
        """Remove every entry."""
        self._truncate_entries(0)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def rename(self, path: Path) -> None:
        self._file.rename(path)

    def delete(self) -> None:
        self._file.delete()

    def _truncate_entries(self, keep: int) -> None:
        del self._timestamps[keep:]
        del self._relative[keep:]
        self._file.truncate_entries(keep)
