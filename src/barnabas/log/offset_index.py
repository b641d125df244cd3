"""The sparse offset index of a segment: ``<base offset>.index`` (Kafka's OffsetIndex).

Rules this module keeps:

- An entry is 8 bytes, big-endian: offset relative to the segment's base offset (int32) and the
  byte position of a batch in the ``.log`` file (int32). The file is Kafka's format.
- As in Kafka's LogSegment.append, the entry's offset is the *last* offset of the batch that starts
  at the position. So the largest entry <= a target offset points at or before the batch holding
  the target, and a scan forward from there finds it.
- Entries are strictly increasing in offset and non-decreasing in position; an append that breaks
  this is a bug and raises ValueError. A file that breaks it is corrupt (:class:`CorruptIndexError`)
  and the segment is rebuilt.
- ``segment.index.bytes // 8`` entries make the index full, and a full index rolls the segment.
- Lookups use ``bisect`` over an in-memory ``array('i')``; no mmap.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptIndexError
from .index_file import IndexFile

__all__ = ["OffsetIndex", "OffsetPosition"]

_ENTRY = struct.Struct(">ii")
_INT32_MAX = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    """An absolute offset and the byte position in the segment where its batch starts."""

    offset: int
    position: int


class OffsetIndex:
    """Offset -> file position, one entry per ``index.interval.bytes`` of log."""

    ENTRY_SIZE = _ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // self.ENTRY_SIZE
        self._file = IndexFile(path, self.ENTRY_SIZE)
        self._relative = array("i")
        self._positions = array("i")

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> OffsetIndex:
        """A new empty index file (replacing any existing one)."""
        index = cls(path, base_offset, max_index_bytes)
        index._file.create()
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int, segment_size: int) -> OffsetIndex:
        """Read and sanity-check an existing index.

        Raises:
            FileNotFoundError: the index does not exist.
            CorruptIndexError: the file fails :meth:`sanity_check`.
        """
        index = cls(path, base_offset, max_index_bytes)
        data = index._file.read_all()
        if len(data) % cls.ENTRY_SIZE:
            raise CorruptIndexError(f"index file {path} has size {len(data)}, not a multiple of {cls.ENTRY_SIZE}")
        for relative, position in _ENTRY.iter_unpack(data):
            index._relative.append(relative)
            index._positions.append(position)
        index.sanity_check(segment_size)
        return index

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        return self.base_offset + self._relative[-1] if self._relative else self.base_offset

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry."""
        return OffsetPosition(self.base_offset + self._relative[n], self._positions[n])

    def sanity_check(self, segment_size: int) -> None:
        """Check the invariants a correct index keeps against its segment's size.

        Raises:
            CorruptIndexError: offsets not strictly increasing or below the base offset, positions
                decreasing, or a position at or past the end of the segment.
        """
        previous_offset = -1
        previous_position = 0
        for relative, position in zip(self._relative, self._positions, strict=True):
            if relative <= previous_offset:
                raise CorruptIndexError(
                    f"index {self.path}: offset {self.base_offset + relative} does not increase "
                    f"(previous entry is {self.base_offset + previous_offset})"
                )
            if position < previous_position:
                raise CorruptIndexError(f"index {self.path}: position {position} is below {previous_position}")
            if position >= segment_size:
                raise CorruptIndexError(
                    f"index {self.path}: position {position} is past the segment's {segment_size} bytes"
                )
            previous_offset, previous_position = relative, position

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch ending at ``offset`` that starts at ``position``.

        Raises:
            ValueError: the index is full, or the entry does not increase the offset.
        """
        if self.is_full:
            raise ValueError(f"attempt to append to the full index {self.path}")
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit index {self.path} with base {self.base_offset}")
        if self._relative and (relative <= self._relative[-1] or position < self._positions[-1]):
            raise ValueError(
                f"index {self.path}: entry ({offset}, {position}) does not follow "
                f"({self.last_offset}, {self._positions[-1]})"
            )
        self._file.append(_ENTRY.pack(relative, position))
        self._relative.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The largest entry whose offset is <= ``offset``, or (base offset, 0) if there is none."""
        relative = offset - self.base_offset
        if relative < 0 or not self._relative:
            return OffsetPosition(self.base_offset, 0)
        slot = bisect_right(self._relative, min(relative, _INT32_MAX)) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def lookup_position(self, position: int) -> OffsetPosition | None:
        """The last entry whose position is <= ``position``, or None (entries' positions are batch starts)."""
        slot = bisect_right(self._positions, position) - 1
        return self.entry(slot) if slot >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's OffsetIndex.truncateTo)."""
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_right(self._relative, min(relative - 1, _INT32_MAX))
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
        del self._relative[keep:]
        del self._positions[keep:]
        self._file.truncate_entries(keep)
