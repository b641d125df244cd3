"""A thread that writes reserved batches into segment files, so the broker's event loop never waits on the kernel.

Filling page-cache pages is most of a produce's cost (bench/README.md); Kafka pays it on its
request handler threads. Here the log assigns offsets and reserves the bytes on its owner's
thread (:meth:`PartitionLog.begin_append_as_leader`), this thread does the ``os.write``, and the
owner completes the append (readable, indexed, acknowledged) once the future says it landed.

Rules this module keeps:

- One thread, one FIFO queue: writes land in submission order, so every segment's reservations
  are written in the order they were made.
- A failed write fails its future, and every later write of the same log fails too without
  touching the file (their offsets follow the failed batch) until the owner has cut the log
  back and calls :meth:`WriteState.clear`. A write whose future was cancelled before it ran is
  not made; the owner fails it (and cuts back what follows it) like a failed one.
- Nothing stops the thread but :meth:`AppendWriter.close`: an unexpected error is logged (and
  fails that write), and the next write is taken. Owners wait on these futures; a dead thread
  would block them forever.
- :meth:`AppendWriter.close` lets queued writes finish, then stops the thread.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from concurrent.futures import Future, InvalidStateError
from typing import NamedTuple

from .segment import LogSegment

__all__ = ["AppendWriter", "WriteState"]

logger = logging.getLogger(__name__)


class WriteState:
    """One log's write health, shared with the writer thread."""

    __slots__ = ("failure",)

    def __init__(self) -> None:
        #: The error of the first failed write since the owner last cleared it.
        self.failure: BaseException | None = None

    def clear(self) -> None:
        self.failure = None


class _Job(NamedTuple):
    segment: LogSegment
    batch: bytes | bytearray | memoryview
    position: int
    state: WriteState
    future: Future[None]


class AppendWriter:
    """The writer thread and its queue."""

    def __init__(self, name: str = "barnabas-append-writer") -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(
        self, segment: LogSegment, batch: bytes | bytearray | memoryview, position: int, state: WriteState
    ) -> Future[None]:
        """Queue a reserved batch's write; the future completes once it landed (or failed)."""
        if self._closed:
            raise RuntimeError("the append writer is closed")
        future: Future[None] = Future()
        self._queue.put(_Job(segment, batch, position, state, future))
        return future

    def close(self) -> None:
        """Finish the queued writes and stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self._write(job)
            except BaseException as exc:
                logger.exception("append writer: unexpected error writing to %s", job.segment.path)
                if job.state.failure is None:
                    job.state.failure = exc
                if not job.future.done():
                    with contextlib.suppress(InvalidStateError):
                        job.future.set_exception(exc)

    @staticmethod
    def _write(job: _Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            # Cancelled before it ran: not written. The owner settles it as failed and cuts the
            # log back to before it, the writes after it included.
            return
        if job.state.failure is not None:
            job.future.set_exception(job.state.failure)
            return
        try:
            job.segment.write_reserved(job.batch, job.position)
        except BaseException as exc:
            job.state.failure = exc
            job.future.set_exception(exc)
        else:
            job.future.set_result(None)
