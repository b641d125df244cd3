"""A byte range of whole batches in a segment file, to be sent without reading it (Kafka's FileRecords.slice).

Fetch answers consumers and followers with these instead of bytes: the connection hands the
range to ``os.sendfile``, so the records go from the page cache to the socket without a copy
through Python.

Rules this module keeps:

- A slice is taken on the log's thread and says nothing about the file until :meth:`FileSlice.open`,
  which checks that the segment is still open and was not cut back since (its truncation
  generation), then returns a descriptor of its own: the segment may be closed, deleted or
  compacted away while the bytes are sent, and the descriptor still reads the same file.
- ``len()`` is the byte count, so a slice can stand where record bytes stand.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LogError
from .segment import LogSegment

__all__ = ["FileSlice"]


@dataclass(frozen=True, slots=True)
class FileSlice:
    segment: LogSegment
    position: int
    size: int
    #: The segment's truncation generation when the slice was taken.
    generation: int

    def __len__(self) -> int:
        return self.size

    def open(self) -> int:
        """A new descriptor of the segment file for sending the range; the caller closes it.

        Raises:
            LogError: the segment was closed, or cut back, since the slice was taken.
        """
        segment = self.segment
        if segment.closed or segment.generation != self.generation or segment.size < self.position + self.size:
            raise LogError(f"{segment.path} changed after bytes [{self.position}, +{self.size}) were read")
        return segment.dup_fd()

    def read(self) -> bytes:
        """The bytes themselves (for tests and callers that need them in memory)."""
        return self.segment.read(self.position, self.size)
