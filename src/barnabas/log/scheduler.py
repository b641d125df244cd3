"""The log's background thread: the disk work the broker's event loop must never wait for.

With gigabytes of page cache waiting for writeback, one ``fsync`` of even a small file can take
hundreds of milliseconds (ext4's ordered mode makes a journal commit write out data first), and
unlinking a 1 GiB segment takes over a hundred. Kafka runs such work on its scheduler threads
(``flush-log`` after a roll, the checkpoint tasks, ``kafka-delete-logs``); this is that thread
for barnabas: rolled segments, producer snapshots and log dirs are synced here, checkpoint files
written, and deleted segments and partition dirs removed. The owner learns of it through a future.

Rules this module keeps:

- One thread, one FIFO queue: jobs run in submission order, so two writes of the same
  checkpoint file land in the order they were asked for.
- A job holds what it works on (duplicated descriptors, paths), never the caller's objects: the
  owner may close or delete a segment while its sync waits. A file that is gone by the time its
  path is synced is skipped (it was truncated or deleted away; nothing of it needs to last).
- Files are removed only once nothing refers to them by name: segments already renamed
  ``.deleted``, partition dirs already renamed ``-delete`` (a restart removes leftovers of both).
- :meth:`LogScheduler.close` runs every queued job, then stops the thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .files import fsync_dir

__all__ = ["LogScheduler", "SegmentSync", "remove_files", "run_soon"]

_T = TypeVar("_T")


class SegmentSync:
    """What syncing one rolled segment takes: duplicated descriptors of its files, and extra paths."""

    __slots__ = ("_descriptors", "_directory", "_paths", "_with_parent")

    def __init__(
        self, descriptors: Sequence[int], paths: Sequence[Path], directory: Path, *, with_parent: bool = False
    ) -> None:
        self._descriptors = list(descriptors)
        self._paths = list(paths)
        self._directory = directory
        self._with_parent = with_parent

    def run(self) -> None:
        """fsync the descriptors (closing them), then the paths, then the directory (and its parent if asked)."""
        try:
            for fd in self._descriptors:
                os.fsync(fd)
        finally:
            for fd in self._descriptors:
                with contextlib.suppress(OSError):
                    os.close(fd)
        for path in self._paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # the partition was deleted meanwhile
            fsync_dir(self._directory)
        if self._with_parent:
            fsync_dir(self._directory.parent)


def remove_files(paths: Sequence[Path]) -> None:
    """Unlink files (those already gone are skipped)."""
    for path in paths:
        path.unlink(missing_ok=True)


class LogScheduler:
    """The background thread and its queue."""

    def __init__(self, name: str = "barnabas-log-scheduler") -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False

    def submit(self, job: Callable[[], _T]) -> Future[_T]:
        """Queue ``job``; the future holds its result or its error."""
        if self._closed:
            raise RuntimeError("the log scheduler is closed")
        return self._executor.submit(job)

    def wait(self) -> None:
        """Return once every job queued so far has run."""
        if not self._closed:
            self._executor.submit(lambda: None).result()

    def close(self) -> None:
        """Run the queued jobs and stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True)


def run_soon(scheduler: LogScheduler | None, job: Callable[[], _T]) -> Future[_T] | None:
    """Queue ``job`` on ``scheduler``, or run it here without one (or once it is closed).

    Returns the queued job's future; None when it ran here, where its errors were raised.
    """
    if scheduler is not None:
        with contextlib.suppress(RuntimeError):
            return scheduler.submit(job)
    job()
    return None
