"""The file under an index: fixed-size big-endian entries, appended, truncated, never rewritten.

Rules this module keeps (the file half of Kafka's AbstractIndex, without mmap):

- Entries live in memory (the index classes keep them in arrays); the file is their durable copy.
  Each new entry is one ``os.write`` at the end of the file; nothing is preallocated, so the file
  size is always ``entries * entry_size`` and needs no trimming at close.
- The file is opened lazily on the first write, so opening a log with many old segments holds no
  index descriptors.
- Truncation shrinks the file to a whole number of entries with ``ftruncate``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["IndexFile"]


class IndexFile:
    """Append-only storage for one index's fixed-size entries."""

    def __init__(self, path: Path, entry_size: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self._fd: int | None = None

    def read_all(self) -> bytes:
        """The whole file; raises FileNotFoundError when it does not exist."""
        return self.path.read_bytes()

    def create(self) -> None:
        """Create the file empty (truncating any previous content)."""
        self.close()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def append(self, entry: bytes) -> None:
        """Write one entry at the end of the file."""
        fd = self._open()
        written = os.write(fd, entry)
        if written != len(entry):  # a short write of a few bytes means the disk is full
            raise OSError(f"short write to index {self.path}: {written} of {len(entry)} bytes")

    def truncate_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries of the file."""
        os.ftruncate(self._open(), entries * self.entry_size)

    def flush(self) -> None:
        """fsync the file if it was ever written through this object."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Release the descriptor; the object may be reused (it reopens on demand)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, path: Path) -> None:
        """Move the file to ``path`` (used to mark a segment ``.deleted``)."""
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        """Close and remove the file if it exists."""
        self.close()
        self.path.unlink(missing_ok=True)

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd
