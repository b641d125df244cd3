"""send_with_files over a socket pair, write_with_files over TLS: everything arrives in order, byte for byte."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from barnabas.broker.file_sender import TLS_READ_SIZE, send_with_files, write_with_files
from barnabas.log import FileSlice, LogConfig, LogError, PartitionLog
from barnabas.slim_event import SlimEvent
from tests.support.tls import Certificates, make_certificates
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
    segment.mark_deleted()  # closed and renamed away, as by retention or a compaction swap
    assert asyncio.run(send_and_receive([b"head", sliced, b"tail"], len(expected))) == expected
    assert sliced.closed, "the slice is closed once it was sent"


def test_a_range_whose_file_is_gone_fails_the_send(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sliced = log.read_slice(0, 1 << 20).records
    assert isinstance(sliced, FileSlice)
    (segment,) = log.segments
    log.close()
    segment.delete()  # gone from the disk (its partition was deleted): the connection must close
    with pytest.raises(LogError, match="is gone"):
        asyncio.run(send_and_receive([b"head", sliced], 4))
    assert sliced.closed


# -- through a TLS transport (sendfile would bypass the encryption) ------------------------------------


class _Sender(asyncio.Protocol):
    """The broker's end: flow control as KafkaConnection keeps it (pause_writing clears can_write)."""

    def __init__(self, chunks: list[object], done: asyncio.Future[None]) -> None:
        self.chunks = chunks
        self.done = done
        self.can_write = SlimEvent(True)
        self.open = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.set_write_buffer_limits(high=8192)  # pause early: the writer must wait for the reader
        task = asyncio.ensure_future(write_with_files(transport, self.chunks, self.can_write, lambda: self.open))

        def finished(task: asyncio.Task[None]) -> None:  # as the connection does: a failed response closes it
            if (exc := task.exception()) is not None:
                self.done.set_exception(exc)
            transport.close()

        task.add_done_callback(finished)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self.can_write.set()
        if not self.done.done():
            self.done.set_result(None)


async def send_over_tls(certs: Certificates, chunks: list[object]) -> bytes:
    """Serve ``chunks`` with write_with_files on a TLS listener; read them all as a TLS client."""
    loop = asyncio.get_running_loop()
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    certs.broker.configure_cert(server_tls)
    done: asyncio.Future[None] = loop.create_future()
    server = await loop.create_server(lambda: _Sender(chunks, done), "127.0.0.1", 0, ssl=server_tls)
    try:
        client_tls = ssl.create_default_context(cafile=str(certs.ca_file))
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1], ssl=client_tls, server_hostname="127.0.0.1"
        )
        async with asyncio.timeout(30):
            received = await reader.read()
            writer.close()
            await done
        return received
    finally:
        server.close()


def test_through_tls_bytes_and_file_ranges_arrive_in_order(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    log = open_log(tmp_path / "t-0")
    for _ in range(4):  # about 1.5 MB: many pieces of TLS_READ_SIZE, and the writer waits for the reader
        log.append_as_leader(make_batch(400, value_size=900), 0, T0)
    whole = log.read_slice(0, 16 << 20).records
    part = log.read_slice(53, 16 << 20).records
    assert whole is not None and part is not None and len(whole) > 4 * TLS_READ_SIZE
    chunks: list[object] = [b"head", whole, memoryview(b"middle"), bytearray(b""), part, b"tail"]
    expected = b"head" + whole.read() + b"middle" + part.read() + b"tail"
    assert asyncio.run(send_over_tls(certs, chunks)) == expected
    assert isinstance(whole, FileSlice) and whole.closed and isinstance(part, FileSlice) and part.closed
    log.close()


def test_through_tls_a_range_cut_back_before_sending_is_refused(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    log = open_log(tmp_path / "t-0")
    sliced = log.read_slice(0, 1 << 20).records
    assert isinstance(sliced, FileSlice)
    log.truncate_to(53, T0)
    with pytest.raises(LogError):
        asyncio.run(send_over_tls(certs, [b"head", sliced]))
    assert sliced.closed
    log.close()
