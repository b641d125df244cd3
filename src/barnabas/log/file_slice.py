"""A byte range of whole batches in a segment file, to be sent without reading it (Kafka's FileRecords.slice).

Fetch answers consumers and followers with these instead of bytes: the connection hands the
range to ``os.sendfile``, so the records go from the page cache to the socket without a copy
through Python.

Rules this module keeps:

- A slice is taken on the log's thread and holds a descriptor of the segment file of its own
  from then on: the segment may be closed, deleted or compacted away before or while the bytes
  are sent, and the slice still reads the same file (Kafka keeps a deleted segment readable
  until file.delete.delay.ms). :meth:`FileSlice.open` refuses only if the segment was cut back
  since (its truncation generation): those bytes are gone or rewritten.
- The descriptor is closed by :meth:`FileSlice.close` once the slice is sent, or when the slice
  is dropped unsent.
- ``len()`` is the byte count, so a slice can stand where record bytes stand.
"""

from __future__ import annotations

import os

from .errors import LogError
from .segment import LogSegment

__all__ = ["FileSlice"]


class FileSlice:
    __slots__ = ("_fd", "generation", "position", "segment", "size")

    def __init__(self, segment: LogSegment, position: int, size: int) -> None:
        """The range ``[position, position + size)`` of ``segment``'s file, as it is now."""
        self.segment = segment
        self.position = position
        self.size = size
        #: The segment's truncation generation when the slice was taken.
        self.generation = segment.generation
        self._fd: int | None = None
        self._fd = segment.dup_fd()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self.segment.path}, position={self.position}, size={self.size})"

    def __del__(self) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._fd is None

    def open(self) -> int:
        """A new descriptor of the segment file for sending the range; the caller closes it.

        Raises:
            LogError: the segment was cut back since the slice was taken, or the slice was closed.
        """
        segment = self.segment
        if self._fd is None or segment.generation != self.generation or segment.size < self.position + self.size:
            raise LogError(f"{segment.path} changed after bytes [{self.position}, +{self.size}) were read")
        return os.dup(self._fd)

    def close(self) -> None:
        """Release the slice's descriptor (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

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
