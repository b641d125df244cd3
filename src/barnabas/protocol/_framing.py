"""Split a byte stream into Kafka frames (int32 size prefix + payload), h11-style.

Rules this module keeps:

- ``receive_data`` only buffers; ``next_frame`` returns one whole frame or ``NEED_DATA``.
- A size prefix above the limit (``socket.request.max.bytes``) or below zero raises
  FrameTooLargeError as soon as the four prefix bytes arrive: the payload is never buffered.
- ``receive_data(b"")`` marks end of stream; a stream that ends inside a frame raises
  RemoteProtocolError from ``next_frame`` (a truncated frame).
- Frames come back as ``bytes`` because kio's native reader rejects writable buffers.
"""

from __future__ import annotations

import enum
import struct

from ._errors import FrameTooLargeError, RemoteProtocolError

__all__ = ["NEED_DATA", "FrameReader", "NeedData"]

_SIZE = struct.Struct(">i")
# Drop consumed bytes from the front of the buffer once this much has been consumed.
_COMPACT_AT = 1 << 20


class NeedData(enum.Enum):
    """Sentinel type: the buffer holds no complete frame yet."""

    NEED_DATA = enum.auto()


NEED_DATA = NeedData.NEED_DATA


class FrameReader:
    """Incremental frame splitter for one connection."""

    __slots__ = ("_buffer", "_ended", "_max_frame_size", "_start")

    def __init__(self, max_frame_size: int) -> None:
        self._max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._start = 0
        self._ended = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer) - self._start

    @property
    def ended(self) -> bool:
        """True once the peer closed its side (``receive_data(b"")``)."""
        return self._ended

    def receive_data(self, data: bytes) -> None:
        """Add bytes from the peer; ``b""`` means the peer closed its side."""
        if not data:
            self._ended = True
            return
        if self._start and self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | NeedData:
        """Return the next complete frame's payload (without the size prefix), or NEED_DATA.

        Raises:
            FrameTooLargeError: the size prefix exceeds the limit or is negative.
            RemoteProtocolError: the stream ended inside a frame.
        """
        buffer = self._buffer
        start = self._start
        available = len(buffer) - start
        if available < 4:
            return self._need_data(available)
        (size,) = _SIZE.unpack_from(buffer, start)
        if size < 0 or size > self._max_frame_size:
            raise FrameTooLargeError(size, self._max_frame_size)
        end = start + 4 + size
        if len(buffer) < end:
            return self._need_data(available)
        with memoryview(buffer) as view:  # one copy (a bytearray slice would copy twice)
            frame = bytes(view[start + 4 : end])
        if end >= _COMPACT_AT:
            del buffer[:end]
            self._start = 0
        else:
            self._start = end
        return frame

    def _need_data(self, available: int) -> NeedData:
        if self._ended and available:
            raise RemoteProtocolError(f"connection closed inside a frame ({available} bytes pending)")
        return NEED_DATA
