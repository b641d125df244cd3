"""Kafka's LogDirFailureChannel: a disk write that fails takes its log dir offline and tells the broker.

A log write that raises OSError (ENOSPC, EIO, a read-only remount) leaves the dir in a state no
later write should trust: the partition's append already answers KAFKA_STORAGE_ERROR, and the
dir is reported here once, whichever log or checkpoint found it. The broker listens and stops,
so that its partitions fail over to replicas on healthy disks instead of staying led by a broker
that cannot write (Kafka halts once every log dir has failed; a barnabas broker halts on the
first, as it does not yet move one dir's partitions elsewhere).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["LogDirFailures"]

logger = logging.getLogger(__name__)

Listener = Callable[[Path, BaseException], None]


class LogDirFailures:
    """The log dirs that failed, and who is told when one does (from any thread)."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self._log_dirs = log_dirs
        self._lock = threading.Lock()
        #: The dirs taken offline, with the error that did it.
        self.offline: dict[Path, str] = {}
        self._listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        """Call ``listener(dir, error)`` for each dir that fails from now on (on the failing thread)."""
        self._listeners.append(listener)

    def report(self, path: Path, error: BaseException) -> None:
        """A write under ``path`` (a log dir, or a file or dir in one) failed with ``error``."""
        log_dir = next(self._containing(path), path)
        with self._lock:
            if log_dir in self.offline:
                return
            self.offline[log_dir] = str(error)
        logger.error("log dir %s is offline: a write failed: %s", log_dir, error)
        for listener in list(self._listeners):
            try:
                listener(log_dir, error)
            except Exception:
                logger.exception("a log dir failure listener failed")

    def _containing(self, path: Path) -> Iterator[Path]:
        for log_dir in self._log_dirs:
            if path == log_dir or log_dir in path.parents:
                yield log_dir
