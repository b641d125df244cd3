"""Send a response whose record chunks are segment file ranges: bytes with writev, ranges with sendfile.

On a TLS connection the bytes must be encrypted in this process, so sendfile cannot be used:
:func:`write_with_files` reads the ranges in ``TLS_READ_SIZE`` pieces (``os.pread``) and writes
them through the transport, which encrypts them.

Fetch responses carry :class:`FileSlice` chunks (Kafka's FileRecords, sent with transferTo): the
records go from the page cache to the socket without being read into Python. uvloop has no
``loop.sendfile``, so this drives the socket itself.

Rules this module keeps:

- The caller has drained the transport's own write buffer first and writes nothing else on the
  connection until this returns: the frame's bytes go out in order, after every earlier answer.
- Each file range is sent from a descriptor of its own (:meth:`FileSlice.open`, closed once the
  range is sent: a response for thousands of partitions holds one at a time), and the socket from a
  duplicate of the transport's descriptor, so neither a segment being closed nor the transport
  closing can make a send land in another file or connection. Both are closed here, and so is
  every slice in ``chunks`` (sent or not): a response is sent once.
- Writes are non-blocking; when the socket is full this waits on the event loop for it to be
  writable (the duplicate descriptor may be watched; the transport's own may not).
- A file range that ends early (the segment was cut back meanwhile) raises OSError: the frame is
  broken and the caller must close the connection, as Kafka does.
- Through a TLS transport, every piece is a new bytes object: the transport may keep what it is
  given until it has encrypted it, so a buffer is never reused under it. Pieces stay below
  glibc's mmap threshold (128 KiB): larger fresh buffers cost a page fault per page (measured: 1 MiB
  pieces take 60-70% more CPU per byte than 64 KiB ones, which cost what a reused buffer does).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any

from barnabas.log import FileSlice
from barnabas.slim_event import SlimEvent

__all__ = ["TLS_READ_SIZE", "send_with_files", "write_with_files"]

#: Bytes chunks gathered into one writev call at most (IOV_MAX is 1024 on Linux).
_MAX_IOV = 64
#: Bytes of a file range read (and handed to a TLS transport) at once.
TLS_READ_SIZE = 64 << 10


async def send_with_files(socket_fd: int, chunks: Sequence[Any]) -> None:
    """Send ``chunks`` (byte buffers and FileSlices, in order) on the socket ``socket_fd``.

    Raises:
        LogError: a segment changed after its slice was taken.
        OSError: the socket failed, or a file range ended early.
    """
    loop = asyncio.get_running_loop()
    out = os.dup(socket_fd)
    try:
        pending: list[memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                if pending:
                    await _write_all(loop, out, pending)
                    pending = []
                in_fd = chunk.open()
                try:
                    await _send_file(loop, out, in_fd, chunk.position, chunk.size)
                finally:
                    os.close(in_fd)  # one range's descriptor at a time
            elif len(chunk):
                pending.append(memoryview(chunk).cast("B"))
        if pending:
            await _write_all(loop, out, pending)
    finally:
        os.close(out)
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                chunk.close()


async def write_with_files(
    transport: asyncio.WriteTransport, chunks: Sequence[Any], can_write: SlimEvent, is_open: Callable[[], bool]
) -> None:
    """Write ``chunks`` (byte buffers and FileSlices, in order) through ``transport`` (a TLS one).

    Args:
        transport: the connection's transport; nothing else is written to it meanwhile.
        chunks: the response's pieces.
        can_write: set while the transport takes more (cleared by the protocol's pause_writing).
        is_open: whether the connection is still open; once it is not, the rest is dropped.

    Raises:
        LogError: a segment changed after its slice was taken.
        OSError: a file range ended early.
        ConnectionResetError: the connection closed before the response was written whole.
    """
    try:
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                await _write_file(transport, chunk, can_write, is_open)
            elif len(chunk):
                transport.write(chunk)
    finally:
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                chunk.close()


async def _write_file(
    transport: asyncio.WriteTransport, chunk: FileSlice, can_write: SlimEvent, is_open: Callable[[], bool]
) -> None:
    fd = chunk.open()
    try:
        position, left = chunk.position, chunk.size
        while left:
            if not can_write.is_set():
                await can_write.wait()
            if not is_open():
                raise ConnectionResetError("the connection closed during a response with segment data")
            piece = os.pread(fd, min(left, TLS_READ_SIZE), position)
            if not piece:
                raise OSError(f"segment file ended {left} bytes early (cut back while being sent)")
            transport.write(piece)
            position += len(piece)
            left -= len(piece)
    finally:
        os.close(fd)


async def _write_all(loop: asyncio.AbstractEventLoop, fd: int, views: list[memoryview]) -> None:
    while views:
        try:
            sent = os.writev(fd, views[:_MAX_IOV])
        except BlockingIOError:
            await _writable(loop, fd)
            continue
        while sent and views:
            if sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


async def _send_file(loop: asyncio.AbstractEventLoop, fd: int, in_fd: int, position: int, size: int) -> None:
    while size:
        try:
            sent = os.sendfile(fd, in_fd, position, size)
        except BlockingIOError:
            await _writable(loop, fd)
            continue
        if sent == 0:
            raise OSError(f"segment file ended {size} bytes early (cut back while being sent)")
        position += sent
        size -= sent


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_writer(fd)


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
