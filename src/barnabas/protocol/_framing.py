"""Split a byte stream into Kafka frames (int32 size prefix + payload), h11-style.

Rules this module keeps:

- Bytes come in either by ``receive_data`` (a copy) or straight from the socket: the caller asks
  :meth:`FrameReader.get_buffer` where the next bytes go, reads into it and reports the count
  with :meth:`FrameReader.buffer_updated` (asyncio's BufferedProtocol). Nothing else is done
  with them until ``next_frame`` returns one whole frame or ``NEED_DATA``.
- Small frames share a fixed scratch buffer and come back as ``bytes`` (one copy). A frame over
  ``LARGE_FRAME`` bytes gets a buffer of its own as soon as its prefix is in, the bytes already
  received are moved there, and every later read goes straight into it: it comes back as a
  writable ``memoryview`` of exactly its size, uncopied, and is the caller's to patch.
- Those buffers are recycled: once the caller is done with a large frame (its records written,
  its answer sent) it may hand it back with :meth:`FrameReader.recycle`, and the next large frame
  that fits reuses it, so a stream of produce requests does not pay for zeroing fresh memory
  (fresh memory is zero-filled page by page as it is touched). Buffers are sized in
  ``_GRANULE`` steps and kept in a :class:`BufferPool`, none over ``_POOL_MAX_BUFFER``: each
  reader's own by default, or one a server shares among its connections, so a client that
  pipelines many produce requests at once (librdkafka allows a million in flight) reuses what
  any connection handed back, within the pool's byte budget.
- A size prefix above the limit (``socket.request.max.bytes``) or below zero raises
  FrameTooLargeError from ``next_frame`` once the frames before it are returned: the payload is
  never buffered.
- ``receive_data(b"")`` marks end of stream; a stream that ends inside a frame raises
  RemoteProtocolError from ``next_frame`` (a truncated frame).
- The scratch buffer is never resized while a view of it may be held (a read in progress):
  when it is full of unread frames a larger one replaces it.
- Fresh buffers (the scratch buffer and large frames' own) are anonymous memory maps, which the
  kernel hands out zeroed page by page as bytes land in them: a connection costs the pages its
  bytes touched, not the buffer's size, and a frame whose size prefix arrived but whose bytes
  never do (a slowloris client) costs nothing for its declared size. A ``bytearray`` would be
  zero-filled, all of it resident, at once. The exception is a reader's first scratch buffer, a
  ``_FIRST_SCRATCH`` bytearray used while no more than half of it waits unread and no read filled
  it to its end (a client pipelining small requests moves on at once), and let go
  whenever everything in it was returned (the next read takes a new one): most connections only
  ever send small requests and are idle most of the time, and a resident page each would be most
  of what they cost.
- :attr:`FrameReader.frames_waiting` counts whole frames received but not yet returned, for a
  reader that bounds how many requests it reads ahead (``queued.max.requests``).
"""

from __future__ import annotations

import enum
import mmap
import struct
from typing import TypeAlias

from ._errors import FrameTooLargeError, RemoteProtocolError

__all__ = ["LARGE_FRAME", "NEED_DATA", "BufferPool", "FrameReader", "NeedData"]

_SIZE = struct.Struct(">i")
#: Frames larger than this are read into a buffer of their own.
LARGE_FRAME = 64 * 1024
#: How many bytes one read into the scratch buffer may bring.
_READ_SIZE = 64 * 1024
_SCRATCH_SIZE = 4 * _READ_SIZE
#: The scratch buffer a reader starts with, until a frame needs more than half of it.
_FIRST_SCRATCH = 1024
#: The scratch buffer of a reader holding no bytes (its first scratch let go).
_NO_SCRATCH = bytearray()
#: Large-frame buffers are allocated in multiples of this, so one fits frames of nearby sizes.
_GRANULE = 256 * 1024
#: Bytes of recycled large-frame buffers a reader's own pool keeps at most.
_OWN_POOL_BYTES = 8 * 1024 * 1024
#: Larger buffers are never kept: a rare huge request must not pin its memory to the connection.
_POOL_MAX_BUFFER = 16 * 1024 * 1024

#: A writable buffer frames are read into.
Buffer: TypeAlias = bytearray | mmap.mmap


def _zeroed(size: int) -> mmap.mmap:
    """``size`` zero bytes that take memory only as they are written (an anonymous private map)."""
    return mmap.mmap(-1, size)


class NeedData(enum.Enum):
    """Sentinel type: the buffer holds no complete frame yet."""

    NEED_DATA = enum.auto()


NEED_DATA = NeedData.NEED_DATA


class BufferPool:
    """Large-frame buffers handed back, for the next large frame that fits, within a byte budget."""

    __slots__ = ("_buffers", "_bytes", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffers: list[Buffer] = []
        self._bytes = 0

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def take(self, size: int) -> Buffer | None:
        """The smallest kept buffer of at least ``size`` bytes (removed from the pool), or None."""
        best: Buffer | None = None
        for buffer in self._buffers:
            if len(buffer) >= size and (best is None or len(buffer) < len(best)):
                best = buffer
        if best is not None:
            self._buffers.remove(best)
            self._bytes -= len(best)
        return best

    def give(self, buffer: Buffer) -> None:
        """Keep ``buffer`` for later, dropping the smallest kept ones if the budget needs room."""
        if len(buffer) > min(_POOL_MAX_BUFFER, self.max_bytes) or any(kept is buffer for kept in self._buffers):
            return
        self._buffers.append(buffer)
        self._bytes += len(buffer)
        while self._bytes > self.max_bytes:
            smallest = min(self._buffers, key=len)
            self._buffers.remove(smallest)
            self._bytes -= len(smallest)


class FrameReader:
    """Incremental frame splitter for one connection."""

    __slots__ = (
        "_buffer",
        "_complete",
        "_end",
        "_ended",
        "_filled",
        "_filling",
        "_into_large",
        "_large_bytes",
        "_larges",
        "_max_frame_size",
        "_outgrown",
        "_pool",
        "_scan",
        "_start",
    )

    def __init__(self, max_frame_size: int, pool: BufferPool | None = None) -> None:
        self._max_frame_size = max_frame_size
        self._buffer: Buffer = _NO_SCRATCH
        #: Scratch layout: [_start, _scan) whole frames, [_scan, _end) the start of the next one.
        self._start = self._scan = self._end = 0
        #: Large frames not yet returned, each with the scratch position it comes before.
        self._larges: list[tuple[int, memoryview]] = []
        #: Recycled large-frame buffers (shared with other connections, or this reader's own, made when first needed).
        self._pool = pool
        #: The large frame still being filled (the last of ``_larges``), and its bytes so far.
        self._filling: memoryview | None = None
        self._filled = 0
        #: Bytes in ``_larges`` (the one being filled counts what it has).
        self._large_bytes = 0
        #: Whether the last :meth:`get_buffer` handed out the large frame being filled.
        self._into_large = False
        self._ended = False
        #: Whole frames received and not yet returned.
        self._complete = 0
        #: A read filled the first scratch buffer to its end: more bytes are coming than it holds.
        self._outgrown = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._end - self._start + self._large_bytes

    @property
    def waiting(self) -> int:
        """Bytes received but not yet returned as frames, less those of the large frame being filled.

        What a reader pausing the socket should count: the frame being filled is always read whole.
        """
        return self.buffered - (self._filled if self._filling is not None else 0)

    @property
    def frames_waiting(self) -> int:
        """Whole frames received but not yet returned by :meth:`next_frame`."""
        return self._complete

    @property
    def filling_large_frame(self) -> bool:
        """True while the next frame is a large one still being filled: ``next_frame`` would say NEED_DATA."""
        larges = self._larges
        return bool(larges) and larges[0][1] is self._filling and larges[0][0] == self._start

    @property
    def ended(self) -> bool:
        """True once the peer closed its side (``receive_data(b"")``)."""
        return self._ended

    @property
    def max_frame_size(self) -> int:
        """The largest size prefix accepted; lowered on a SASL connection until it has authenticated."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, size: int) -> None:
        self._max_frame_size = size

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the peer go (never empty); report them with :meth:`buffer_updated`."""
        if self._filling is not None:
            self._into_large = True
            return memoryview(self._filling)[self._filled :]
        self._into_large = False
        if len(self._buffer) - self._end < _READ_SIZE:
            self._make_room()
        return memoryview(self._buffer)[self._end : self._end + _READ_SIZE]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` bytes were written at the start of the last :meth:`get_buffer` view."""
        if self._into_large:
            assert self._filling is not None
            self._filled += nbytes
            self._large_bytes += nbytes
            if self._filled == len(self._filling):
                self._filling = None
                self._filled = 0
                self._complete += 1
            return
        self._end += nbytes
        if self._end == _FIRST_SCRATCH and len(self._buffer) == _FIRST_SCRATCH:
            self._outgrown = True
        self._scan_frames()

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes from the peer (copied); ``b""`` means the peer closed its side."""
        if not data:
            self._ended = True
            return
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            count = min(len(target), len(view))
            target[:count] = view[:count]
            self.buffer_updated(count)
            view = view[count:]

    def recycle(self, frame: bytes | memoryview) -> None:
        """Hand back a large frame ``next_frame`` returned, once nothing reads or writes it any more."""
        if isinstance(frame, memoryview) and isinstance(frame.obj, bytearray | mmap.mmap):
            self._buffer_pool().give(frame.obj)

    def next_frame(self) -> bytes | memoryview | NeedData:
        """Return the next complete frame's payload (without the size prefix), or NEED_DATA.

        Raises:
            FrameTooLargeError: the size prefix exceeds the limit or is negative.
            RemoteProtocolError: the stream ended inside a frame.
        """
        buffer = self._buffer
        start = self._start
        larges = self._larges
        if larges and larges[0][0] == start:
            large = larges[0][1]
            if large is self._filling:
                return self._need_data(4 + self._filled)
            del larges[0]
            self._large_bytes -= len(large)
            self._complete -= 1
            self._reset_if_empty()
            return large
        if start < self._scan:
            (size,) = _SIZE.unpack_from(buffer, start)
            end = start + 4 + size
            with memoryview(buffer) as view:
                frame = bytes(view[start + 4 : end])
            self._start = end
            self._complete -= 1
            self._reset_if_empty()
            return frame
        available = self._end - start
        if available >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0 or size > self._max_frame_size:
                raise FrameTooLargeError(size, self._max_frame_size)
        return self._need_data(available)

    def _scan_frames(self) -> None:
        """Move ``_scan`` past whole frames; hand a large incomplete one its own buffer."""
        buffer = self._buffer
        while self._end - self._scan >= 4:
            (size,) = _SIZE.unpack_from(buffer, self._scan)
            if size < 0 or size > self._max_frame_size:
                return  # next_frame raises once it gets here
            frame_end = self._scan + 4 + size
            if frame_end <= self._end:
                self._scan = frame_end
                self._complete += 1
                continue
            if size > LARGE_FRAME:
                large = self._frame_buffer(size)
                have = self._end - self._scan - 4
                with memoryview(buffer) as view:
                    large[:have] = view[self._scan + 4 : self._end]
                self._end = self._scan
                self._larges.append((self._scan, large))
                self._filling = large
                self._filled = have
                self._large_bytes += have
                self._reset_if_empty()
            return

    def _frame_buffer(self, size: int) -> memoryview:
        """A writable view of exactly ``size`` bytes: the smallest recycled buffer that fits, or a new one."""
        buffer = self._buffer_pool().take(size)
        if buffer is None:
            buffer = _zeroed(-(-size // _GRANULE) * _GRANULE)
        return memoryview(buffer)[:size]

    def _buffer_pool(self) -> BufferPool:
        if self._pool is None:
            self._pool = BufferPool(_OWN_POOL_BYTES)
        return self._pool

    def _reset_if_empty(self) -> None:
        """Start the scratch buffer over once everything in it was returned; let the first one go."""
        if self._start == self._end and self._start:
            self._shift(self._start)
            if len(self._buffer) == _FIRST_SCRATCH and not self._outgrown:
                self._buffer = _NO_SCRATCH

    def _make_room(self) -> None:
        """Move unread bytes to the front; when they fill the buffer, into a larger new one."""
        pending = self._end - self._start
        if self._buffer is _NO_SCRATCH:
            self._buffer = bytearray(_FIRST_SCRATCH)
            return
        first = len(self._buffer) == _FIRST_SCRATCH and pending <= _FIRST_SCRATCH // 2 and not self._outgrown
        if first or pending + _READ_SIZE <= len(self._buffer):
            if not self._start:
                return
            # Same-length slice assignment: the buffer is never resized, so views of it stay valid.
            self._buffer[:pending] = self._buffer[self._start : self._end]
        else:
            fresh = _zeroed(pending + _SCRATCH_SIZE)
            fresh[:pending] = self._buffer[self._start : self._end]
            self._buffer = fresh
            self._outgrown = False
        self._shift(self._start)

    def _shift(self, delta: int) -> None:
        self._start -= delta
        self._scan -= delta
        self._end -= delta
        if self._larges:
            self._larges = [(at - delta, large) for at, large in self._larges]

    def _need_data(self, available: int) -> NeedData:
        if self._ended and available:
            raise RemoteProtocolError(f"connection closed inside a frame ({available} bytes pending)")
        return NEED_DATA
