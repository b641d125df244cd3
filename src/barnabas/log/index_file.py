"""The file under an index: fixed-size big-endian entries, appended, truncated, never rewritten.

Rules this module keeps (the file half of Kafka's AbstractIndex, without mmap):

- Entries live in memory (the index classes keep them in arrays); the file is their durable copy.
  Each new entry is one ``os.write`` at the end of the file; nothing is preallocated, so the file
  size is always ``entries * entry_size`` and needs no trimming at close.
- The file is opened lazily on the first write, so opening a log with many old segments holds no
  index descriptors.
- At most ``index_files_budget()`` index files are open in the process (an eighth of the limit of
  open files, at most ``MAX_OPEN_INDEX_FILES``): an entry is written every
  ``index.interval.bytes`` of log, so most partitions' indexes sit idle, and two descriptors each
  for 10,000 partitions would exhaust a 20,000 limit (Kafka closes its index files once mapped).
  The least recently written is closed to open another; a file written since its last fsync is
  reopened to be synced (fsync syncs the file, whichever descriptor asks).
- One lock covers opening, writing and closing, so a descriptor is never closed under a write on
  another thread (the append writer and the scheduler write indexes too); fsync runs outside it
  on a duplicate descriptor.
- Truncation shrinks the file to a whole number of entries with ``ftruncate``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from .open_files import open_files_limit

__all__ = ["MAX_OPEN_INDEX_FILES", "IndexFile", "index_files_budget", "open_index_files"]

#: Index files held open at once in this process; more are opened and closed as they are written.
MAX_OPEN_INDEX_FILES = 1024

_lock = threading.Lock()
#: The open ones, least recently written first.
_open: OrderedDict[IndexFile, None] = OrderedDict()


def index_files_budget() -> int:
    """How many index files may hold a descriptor at once in this process."""
    return min(MAX_OPEN_INDEX_FILES, max(8, open_files_limit() // 8))


def open_index_files() -> int:
    """How many index files hold a descriptor now."""
    with _lock:
        return len(_open)


class IndexFile:
    """Append-only storage for one index's fixed-size entries."""

    def __init__(self, path: Path, entry_size: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self._fd: int | None = None
        #: Written since the last fsync (so a flush must sync it even if its descriptor was closed).
        self._unsynced = False

    def read_all(self) -> bytes:
        """The whole file; raises FileNotFoundError when it does not exist."""
        return self.path.read_bytes()

    def create(self) -> None:
        """Create the file empty (truncating any previous content)."""
        with _lock:
            self._close_locked()
            self._open_locked(os.O_TRUNC)
            self._unsynced = True

    def append(self, entry: bytes) -> None:
        """Write one entry at the end of the file."""
        with _lock:
            written = os.write(self._open_locked(), entry)
            self._unsynced = True
        if written != len(entry):  # a short write of a few bytes means the disk is full
            raise OSError(f"short write to index {self.path}: {written} of {len(entry)} bytes")

    def truncate_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries of the file."""
        with _lock:
            os.ftruncate(self._open_locked(), entries * self.entry_size)
            self._unsynced = True

    def flush(self) -> None:
        """fsync the file if it was written through this object since its last fsync."""
        with _lock:
            if not self._unsynced:
                return
            duplicate = os.dup(self._open_locked())
            self._unsynced = False
        try:
            os.fsync(duplicate)
        except BaseException:
            self._unsynced = True
            raise
        finally:
            os.close(duplicate)

    def close(self) -> None:
        """Release the descriptor; the object may be reused (it reopens on demand)."""
        with _lock:
            self._close_locked()

    def rename(self, path: Path) -> None:
        """Move the file to ``path`` (used to mark a segment ``.deleted``)."""
        with _lock:
            if self.path.exists():
                os.replace(self.path, path)
            self.path = path

    def delete(self) -> None:
        """Close and remove the file if it exists."""
        with _lock:
            self._close_locked()
            self._unsynced = False
            self.path.unlink(missing_ok=True)

    # --- the descriptor cache (callers hold _lock) ---------------------------------------------

    def _open_locked(self, extra_flags: int = 0) -> int:
        if self._fd is None:
            budget = index_files_budget()
            while len(_open) >= budget:
                oldest, _ = _open.popitem(last=False)
                oldest._close_locked()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | extra_flags, 0o644)
        self._track_locked()
        return self._fd

    def _track_locked(self) -> None:
        _open[self] = None
        _open.move_to_end(self)

    def _close_locked(self) -> None:
        _open.pop(self, None)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
