"""A byte range of whole batches in a segment file, to be sent without reading it (Kafka's FileRecords.slice).

Fetch answers consumers and followers with these instead of bytes: the connection hands the
range to ``os.sendfile``, so the records go from the page cache to the socket without a copy
through Python.

Rules this module keeps:

- A slice holds no descriptor while it waits to be sent (a Fetch answer for thousands of
  partitions holds thousands of slices, and segment files share a descriptor budget): the sender
  opens one (:meth:`FileSlice.open`) for each range as it sends it.
- The segment may be closed, deleted or compacted away before the bytes are sent: a deleted or
  replaced segment's file is renamed ``.deleted`` and kept for ``file.delete.delay.ms`` (as in
  Kafka), and the slice opens it under that name. :meth:`FileSlice.open` refuses if the segment
  was cut back since (its truncation generation: those bytes are gone or rewritten), or its file
  is gone (the partition was deleted).
- :meth:`FileSlice.close` marks the slice sent, or dropped unsent; it cannot be opened again.
- ``len()`` is the byte count, so a slice can stand where record bytes stand.
"""

from __future__ import annotations

import os

from .errors import LogError
from .segment import LogSegment

__all__ = ["FileSlice"]


class FileSlice:
    __slots__ = ("_closed", "generation", "position", "segment", "size")

    def __init__(self, segment: LogSegment, position: int, size: int) -> None:
        """The range ``[position, position + size)`` of ``segment``'s file, as it is now."""
        self.segment = segment
        self.position = position
        self.size = size
        #: The segment's truncation generation when the slice was taken.
        self.generation = segment.generation
        self._closed = False

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self.segment.path}, position={self.position}, size={self.size})"

    @property
    def closed(self) -> bool:
        return self._closed

    def open(self) -> int:
        """A new descriptor of the segment file for sending the range; the caller closes it.

        Raises:
            LogError: the segment was cut back since the slice was taken, its file is gone, or
                the slice was closed.
        """
        segment = self.segment
        if self._closed or segment.generation != self.generation or segment.size < self.position + self.size:
            raise LogError(f"{segment.path} changed after bytes [{self.position}, +{self.size}) were read")
        try:
            return segment.reading_fd()
        except OSError as exc:
            raise LogError(
                f"{segment.path} is gone after bytes [{self.position}, +{self.size}) were read: {exc}"
            ) from None

    def close(self) -> None:
        """The slice was sent, or will not be (idempotent)."""
        self._closed = True

    def read(self) -> bytes:
        """The bytes themselves (for tests and callers that need them in memory)."""
        fd = self.open()
        try:
            data = b""
            while len(data) < self.size and (more := os.pread(fd, self.size - len(data), self.position + len(data))):
                data += more
            return data
        finally:
            os.close(fd)
