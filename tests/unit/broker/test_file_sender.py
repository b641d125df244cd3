"""send_with_files over a real socket pair: bytes and segment file ranges arrive in order, byte for byte."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from barnabas.broker.file_sender import send_with_files
from barnabas.log import FileSlice, LogConfig, LogError, PartitionLog
from tests.unit.log.batches import T0, make_batch


def open_log(directory: Path) -> PartitionLog:
    log = PartitionLog.open(directory, LogConfig(), T0)
    for count in (3, 50, 7, 400):
        log.append_as_leader(make_batch(count, value_size=900), 0, T0)
    return log


async def send_and_receive(chunks: list[object], expected_size: int) -> bytes:
    """Send on one end of a socket pair (small buffers, so writes block) and read the other end."""
    sender, receiver = socket.socketpair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sender.setblocking(False)
    receiver.setblocking(False)
    loop = asyncio.get_running_loop()
    received = bytearray()

    async def read() -> None:
        while len(received) < expected_size:
            data = await loop.sock_recv(receiver, 1 << 16)
            if not data:
                return
            received.extend(data)

    try:
        await asyncio.gather(send_with_files(sender.fileno(), chunks), read())
    finally:
        sender.close()
        receiver.close()
    return bytes(received)


def test_bytes_and_file_ranges_arrive_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    whole = log.read_slice(0, 1 << 20).records
    part = log.read_slice(53, 1 << 20).records
    assert whole is not None and part is not None
    chunks: list[object] = [b"head", whole, memoryview(b"middle"), bytearray(b""), part, b"tail"]
    expected = b"head" + whole.read() + b"middle" + part.read() + b"tail"
    assert asyncio.run(send_and_receive(chunks, len(expected))) == expected
    log.close()


def test_a_range_cut_back_before_sending_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sliced = log.read_slice(0, 1 << 20).records
    assert isinstance(sliced, FileSlice)
    log.truncate_to(53, T0)
    with pytest.raises(LogError):
        asyncio.run(send_and_receive([b"head", sliced], len(sliced) + 4))
    log.close()


def test_a_range_whose_segment_was_deleted_before_sending_is_sent_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sliced = log.read_slice(0, 1 << 20).records
    assert isinstance(sliced, FileSlice)
    expected = b"head" + sliced.read() + b"tail"
    (segment,) = log.segments
    log.close()
    segment.delete()  # closed and gone from the directory, as after retention or a compaction swap
    assert asyncio.run(send_and_receive([b"head", sliced, b"tail"], len(expected))) == expected
    assert sliced.closed, "the slice's descriptor is closed once it was sent"
