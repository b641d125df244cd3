"""A tiny blocking Kafka client over a plain socket, for tests that must send exact bytes.

Requests are kio entities framed by hand: request header v2 (with an empty tagged-field
section) for flexible versions, v1 otherwise; ``client_id`` is always a legacy nullable string.
Responses are decoded with kio: response header v1 for flexible versions, v0 otherwise, and v0
for ApiVersions in every version (Kafka's special case). Nothing here hides a failure: a closed
connection or a timeout raises. :meth:`RawKafkaClient.connect` takes an SSL context for a TLS listener.
"""

from __future__ import annotations

import errno
import io
import itertools
import select
import socket
import ssl
import struct
import time
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

__all__ = [
    "API_VERSIONS",
    "RawKafkaClient",
    "decode_response",
    "encode_body",
    "encode_request",
    "frame",
    "request_header",
]

API_VERSIONS = 18
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_correlation_ids = itertools.count(1)


def encode_body(entity: Any) -> bytes:
    """The kio entity's wire bytes (no header, no size prefix)."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, *, flexible: bool
) -> bytes:
    """Request header v2 when ``flexible`` (empty tagged fields), else v1."""
    if client_id is None:
        client = _INT16.pack(-1)
    else:
        encoded = client_id.encode()
        client = _INT16.pack(len(encoded)) + encoded
    return struct.pack(">hhi", api_key, api_version, correlation_id) + client + (b"\x00" if flexible else b"")


def frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _INT32.pack(len(payload)) + payload


def encode_request(
    api_key: int, api_version: int, body: Any, correlation_id: int, client_id: str | None = "raw-client"
) -> bytes:
    """A complete request frame (size prefix, header, body) for a kio request entity."""
    flexible = bool(type(body).__flexible__)
    header = request_header(api_key, api_version, correlation_id, client_id, flexible=flexible)
    return frame(header + encode_body(body))


def decode_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation_id, kio response entity) from a response frame without its size prefix."""
    schema = load_response_schema(api_key, api_version)
    (correlation_id,) = _INT32.unpack_from(payload, 0)
    offset = 4
    if schema.__flexible__ and api_key != API_VERSIONS:
        offset = _skip_tagged_fields(payload, offset)
    entity, _ = entity_reader(schema)(payload, offset)
    return correlation_id, entity


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    return pos


class RawKafkaClient:
    """One blocking connection. Use :meth:`connect`; close with :meth:`close` or ``with``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @classmethod
    def connect(
        cls, host: str, port: int, timeout: float = 10.0, *, tls: ssl.SSLContext | None = None
    ) -> RawKafkaClient:
        """Connect, through a TLS handshake with ``tls`` when given (the host is the server name checked)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        return cls(sock)

    def __enter__(self) -> RawKafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # --- raw bytes ---------------------------------------------------------------------------

    def send_frame(self, data: bytes) -> None:
        """Send ``data`` exactly as given: the caller chooses the size prefix (or none)."""
        self.sock.sendall(data)

    def recv_frame(self, timeout: float = 10.0) -> bytes:
        """One response frame's payload (after the size prefix).

        Raises:
            ConnectionError: the broker closed the connection first.
            TimeoutError: nothing complete arrived within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        (size,) = _INT32.unpack(self._recv_exactly(4, deadline))
        return self._recv_exactly(size, deadline)

    def _recv_exactly(self, count: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        remaining = count
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out waiting for {remaining} of {count} bytes")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(remaining, 1 << 20))
            except TimeoutError:
                continue
            if not chunk:
                raise ConnectionError(f"connection closed with {remaining} of {count} bytes unread")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def is_closed(self, timeout: float = 5.0) -> bool:
        """Whether the broker closes the connection within ``timeout`` seconds.

        True when a read returns end-of-stream or the connection is reset. False when the timeout
        passes, or when the broker sends data instead (the connection is evidently open).
        """
        deadline = time.monotonic() + timeout
        if isinstance(self.sock, ssl.SSLSocket):
            return self._tls_closed(deadline)
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.sock], [], [], left)
            if not readable:
                return False
            try:
                data = self.sock.recv(1, socket.MSG_PEEK)
            except ConnectionResetError:
                return True
            except OSError as exc:
                if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                    return True
                raise
            return not data
        return False

    def _tls_closed(self, deadline: float) -> bool:
        """is_closed over TLS, which cannot peek: a byte read means open; end of stream, a reset or an alert, closed.

        A read may take no application data (TLS 1.3 session tickets) and wait on: it is retried until the deadline.
        """
        assert isinstance(self.sock, ssl.SSLSocket)
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                return not self.sock.recv(1)
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                return True
        return False

    # --- kio requests ------------------------------------------------------------------------

    def send_request(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        *,
        correlation_id: int | None = None,
        client_id: str | None = "raw-client",
    ) -> int:
        """Send one request and return its correlation id, without waiting for an answer."""
        cid = next(_correlation_ids) if correlation_id is None else correlation_id
        self.send_frame(encode_request(api_key, api_version, body, cid, client_id))
        return cid

    def read_response(self, api_key: int, api_version: int, correlation_id: int, timeout: float = 10.0) -> Any:
        """Read the next response and decode it; its correlation id must be ``correlation_id``."""
        received, response = decode_response(api_key, api_version, self.recv_frame(timeout))
        if received != correlation_id:
            raise AssertionError(f"response correlation id {received}, expected {correlation_id}")
        return response

    def request(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        *,
        correlation_id: int | None = None,
        client_id: str | None = "raw-client",
        timeout: float = 10.0,
    ) -> Any:
        """Send a kio request entity and return the decoded kio response entity."""
        cid = self.send_request(api_key, api_version, body, correlation_id=correlation_id, client_id=client_id)
        return self.read_response(api_key, api_version, cid, timeout)
