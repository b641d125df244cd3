"""FrameReader against a model: every frame it returns is the next one the byte stream holds.

The input is a small program (one op byte, then its arguments) that feeds a stream to one
FrameReader, by ``receive_data`` or by ``get_buffer``/``buffer_updated`` as the broker's protocol
does, in chunks of varying size, pulls frames, hands large frames back for reuse and closes the
stream. A model parses the same stream at once: each frame returned must be the model's next one;
a size prefix over the limit must surface as FrameTooLargeError, a stream closed inside a frame as
RemoteProtocolError (both documented, and both end the connection); and a large frame the caller
still holds must never change under it.
"""

from __future__ import annotations

import struct

from barnabas.protocol import NEED_DATA, FrameReader, FrameTooLargeError, RemoteProtocolError
from tests.fuzz.harness import Target

_LIMITS = (64, 4096, 100_000, 300_000)
_INT32 = struct.Struct(">i")
#: The largest frame an op may ask for (larger than LARGE_FRAME, so large frames get their own buffers).
_MAX_GENERATED = 200_000
#: Generated payload bytes one input may ask for in all (a few large frames, not hundreds).
_GENERATED_BUDGET = 600_000
#: Payload bytes for generated frames: a frame of ``size`` bytes starts at ``size % 251``, so frames differ.
_PATTERN = bytes(range(256)) * (_MAX_GENERATED // 256 + 2)


class _RefusedError(Exception):
    """The reader raised a documented error: the connection would close here."""


class _Model:
    """The stream as fed so far, and the frames it holds in order."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stream = bytearray()
        self.taken = 0  # bytes of the frames already returned, prefixes included

    def next_frame(self) -> bytes | str | None:
        """The next whole frame, "too large" for a prefix over the limit, or None when it needs more."""
        left = len(self.stream) - self.taken
        if left < 4:
            return None
        (size,) = _INT32.unpack_from(self.stream, self.taken)
        if size < 0 or size > self.limit:
            return "too large"
        if left < 4 + size:
            return None
        return bytes(self.stream[self.taken + 4 : self.taken + 4 + size])


class _Program:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 1
        limit = _LIMITS[data[0] % len(_LIMITS)] if data else 4096
        self.reader = FrameReader(limit)
        self.model = _Model(limit)
        self.chunk = 7
        self.by_buffer = False
        self.ended = False
        self.held: list[tuple[memoryview, bytes]] = []  # large frames returned and not handed back
        self.budget = _GENERATED_BUDGET

    def take(self, count: int) -> bytes:
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def feed(self, data: bytes) -> None:
        if self.ended:
            return
        self.model.stream += data
        step = max(self.chunk, len(data) // 16)  # small chunks, but not thousands of them per op
        for start in range(0, len(data), step):
            piece = data[start : start + step]
            if self.by_buffer:
                while piece:
                    with self.reader.get_buffer() as target:
                        count = min(len(target), len(piece))
                        target[:count] = piece[:count]
                    self.reader.buffer_updated(count)
                    piece = piece[count:]
            else:
                self.reader.receive_data(piece)

    def pull(self) -> None:
        while True:
            expected = self.model.next_frame()
            try:
                frame = self.reader.next_frame()
            except FrameTooLargeError:
                assert expected == "too large", f"FrameTooLargeError where the model holds {expected!r}"
                raise _RefusedError from None
            except RemoteProtocolError:
                assert self.ended and expected is None, "a truncated frame reported before the stream ended"
                raise _RefusedError from None
            if frame is NEED_DATA:
                assert expected is None or (expected == "too large" and self.reader.buffered < 4), (
                    f"NEED_DATA while the model holds {expected!r:.60}"
                )
                return
            assert isinstance(expected, bytes) and bytes(frame) == expected, "a frame other than the model's next"
            self.model.taken += 4 + len(frame)
            if isinstance(frame, memoryview):
                self.held.append((frame, expected))

    def step(self) -> None:
        op = self.data[self.pos] % 8
        self.pos += 1
        if op == 0:
            self.feed(self.take(self.take(1)[0] if self.pos < len(self.data) else 0))
        elif op == 1:
            self.feed(self.take(4).ljust(4, b"\x00"))
        elif op == 2:
            size = min(int.from_bytes(self.take(3), "big"), _MAX_GENERATED, self.budget)
            self.budget -= size
            self.feed(_INT32.pack(size) + _PATTERN[size % 251 : size % 251 + size])
        elif op == 3:
            self.pull()
        elif op == 4 and self.held:
            frame, _ = self.held.pop(0)
            self.reader.recycle(frame)
        elif op == 5:
            self.ended = True
            self.reader.receive_data(b"")
        elif op == 6:
            self.by_buffer = not self.by_buffer
        elif op == 7:
            self.chunk = (self.take(1) or b"\x07")[0] * 97 + 1

    def run(self) -> None:
        try:
            while self.pos < len(self.data):
                self.step()
            self.pull()
        except _RefusedError:
            return
        for frame, expected in self.held:
            assert bytes(frame) == expected, "a large frame the caller holds changed under it"
        assert 0 <= self.reader.waiting <= self.reader.buffered


def run(data: bytes) -> None:
    _Program(data).run()


TARGET = Target("frames", run, __doc__ or "", max_len=2048)
