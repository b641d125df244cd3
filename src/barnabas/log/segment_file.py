"""A segment's ``.log`` file, whose descriptor is held open within a budget for the whole process.

Kafka keeps every segment's file open: 100,000 partitions on a broker need 100,000 descriptors,
past the limit many hosts grant (this one's is 20,000, hard). Most partitions sit idle, so here an
idle one gives its descriptor back and opens the file again when it is next read or written.

Rules this module keeps:

- At most :func:`max_open` segment files hold a descriptor at once: RLIMIT_NOFILE's soft limit
  less a quarter for sockets and the like, less the index files' budget (``index_file``). Opening
  one more closes the least recently used one that nothing is using; when every open one is in
  use, the budget is exceeded for a moment rather than waited for.
- Every use of a descriptor is inside ``with file.use() as fd:``. The use is counted under the
  lock, and a descriptor in use is never closed, so a write on the append writer's thread or a
  read on the cleaner's never meets a closed descriptor or one whose number was reused.
- A file reopens with the flags it was opened with (read-write, append), at its current path: a
  rename goes through :meth:`SegmentFile.rename`, under the same lock as the reopening. What is
  opened by path must be the same file: a segment deleted by truncation can have a successor of
  the same base offset, hence the same name (and, its inode freed, the same inode number), and a
  slice of the old one must never read the new one. A file removed through :meth:`unlink` is
  never opened again; one opened by path must have the device and inode noted when the object was
  made.
- Closing a descriptor loses nothing unsynced: fsync syncs the file, whichever descriptor asks.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from .index_file import index_files_budget
from .open_files import open_files_limit

__all__ = ["SegmentFile", "max_open", "open_segment_files", "set_max_open"]

_FLAGS = os.O_RDWR | os.O_APPEND
#: Descriptors left to sockets, checkpoints and the like: a quarter of the limit, at least this many.
_MIN_HEADROOM = 512
_MIN_BUDGET = 64

_lock = threading.Lock()
#: The files holding a descriptor, least recently used first.
_open: OrderedDict[SegmentFile, None] = OrderedDict()
_max_open: int | None = None


def max_open() -> int:
    """How many segment files may hold a descriptor at once in this process."""
    global _max_open  # noqa: PLW0603 - one budget per process, sized once from its limit
    if _max_open is None:
        limit = open_files_limit()
        headroom = max(_MIN_HEADROOM, limit // 4) + index_files_budget()
        _max_open = max(_MIN_BUDGET, limit - headroom)
    return _max_open


def set_max_open(budget: int | None) -> None:
    """Set the budget (None: size it from the limit again on next use); open files over it close as they idle."""
    global _max_open  # noqa: PLW0603
    with _lock:
        _max_open = budget


def open_segment_files() -> int:
    """How many segment files hold a descriptor now."""
    with _lock:
        return len(_open)


class SegmentFile:
    """The ``.log`` file of one segment; its descriptor comes and goes, the file stays."""

    __slots__ = ("_closed", "_fd", "_identity", "_unlinked", "_users", "path")

    def __init__(self, path: Path, fd: int) -> None:
        """Take over ``fd``, an open read-write, append descriptor of ``path``."""
        self.path = path
        self._fd: int | None = fd
        self._users = 0
        self._closed = False
        self._unlinked = False
        stat = os.fstat(fd)
        #: The file's device and inode: whatever is opened again by path must be this file.
        self._identity = (stat.st_dev, stat.st_ino)
        with _lock:
            _open[self] = None
            _make_room_locked(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def use(self) -> SegmentFile:
        """``with file.use() as fd``: the descriptor, open until the block ends.

        Raises (on entering):
            ValueError: the file was closed (:meth:`close`).
            OSError: it could not be opened again.
        """
        return self

    def __enter__(self) -> int:
        with _lock:
            fd = self._open_locked()
            self._users += 1
        return fd

    def __exit__(self, *_: object) -> None:
        with _lock:
            self._users -= 1

    def reading_fd(self) -> int:
        """A new descriptor of the file for the caller (who closes it): a duplicate of the open one,
        else the file opened read-only at its current path, also after :meth:`close`.

        Raises:
            OSError: the file is gone.
        """
        with _lock:
            if self._fd is not None:
                _open.move_to_end(self)
                return os.dup(self._fd)
            return self._open_same_file(os.O_RDONLY)

    def rename(self, target: Path) -> None:
        """``os.replace`` the file to ``target``; it reopens there from now on."""
        with _lock:
            os.replace(self.path, target)
            self.path = target

    def unlink(self) -> None:
        """Close for good and remove the file; nothing opens its name for this object again."""
        self.close()
        with _lock:
            self._unlinked = True
            self.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the descriptor for good; further uses raise (idempotent)."""
        with _lock:
            self._closed = True
            _open.pop(self, None)
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    # --- the budget (callers hold _lock) ----------------------------------------------------------

    def _open_same_file(self, flags: int) -> int:
        """Open :attr:`path`; raise FileNotFoundError when the file was removed or another took its name."""
        if self._unlinked:
            raise FileNotFoundError(f"{self.path} was deleted")
        fd = os.open(self.path, flags)
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != self._identity:
            os.close(fd)
            raise FileNotFoundError(f"{self.path} is another file now: this segment's was deleted")
        return fd

    def _open_locked(self) -> int:
        if self._closed:
            raise ValueError(f"segment {self.path} is closed")
        if self._fd is None:
            self._fd = self._open_same_file(_FLAGS)
            _open[self] = None
            _make_room_locked(self)
        else:
            _open.move_to_end(self)
        return self._fd


def _make_room_locked(keep: SegmentFile) -> None:
    """Close the least recently used idle descriptors (never ``keep``'s) while more than the budget are open."""
    excess = len(_open) - max_open()
    if excess <= 0:
        return
    victims = []
    for file in _open:  # oldest first; usually the first one or two will do
        if file is not keep and not file._users:  # one in use on some thread is never closed under it
            victims.append(file)
            if len(victims) == excess:
                break
    for file in victims:
        del _open[file]
        fd, file._fd = file._fd, None
        if fd is not None:
            os.close(fd)
