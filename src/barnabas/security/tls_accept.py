"""A TLS listener's connections upgraded one by one, so that a failed handshake is logged and counted.

Served with ``create_server(ssl=...)``, asyncio and uvloop drop a failed server-side handshake (an
expired or untrusted client certificate, a plaintext client on the TLS port) without a word outside
debug mode, and the Kafka connection never hears of it. Kafka logs "Failed authentication with
/HOST (SSL handshake failed)" and counts a failed authentication. So a TLS listener serves plain
TCP, and each connection starts as a ``TlsHandshake``: it upgrades itself with ``loop.start_tls``;
a failure is logged, counted and the socket closed; a success hands the TLS transport to the
Kafka connection, with any bytes that arrived in between.

Rules this module keeps:

- The upgrade starts inside ``connection_made``, before the event loop can read the new socket, so
  the ClientHello goes to the TLS layer: ``start_tls`` is stepped once there (it takes the socket
  before it first waits) and a task awaits the rest. (A task of its own would start a loop
  iteration later, after a read; pausing reading until then leaves uvloop holding a plaintext
  client's bytes unread, so its request hangs instead of failing.)
- Application data decrypted after the handshake but before the handover is held and given to
  the connection, in order, after its ``connection_made``.
- A connection lost during the handshake is not handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar, cast

__all__ = ["HANDSHAKE_TIMEOUT_S", "TlsHandshake"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long a client may take over its handshake (asyncio's default; Kafka has no setting of its own).
HANDSHAKE_TIMEOUT_S = 60.0


class TlsHandshake(asyncio.Protocol):
    """One accepted TCP connection of a TLS listener until its handshake is over; ``failed(listener)``
    counts a failed handshake (a broker's failed-authentication metric)."""

    def __init__(
        self,
        context: ssl.SSLContext,
        listener: str,
        make_connection: Callable[[], asyncio.BufferedProtocol],
        failed: Callable[[str], None] = lambda _: None,
        timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self._context = context
        self._listener = listener
        self._make_connection = make_connection
        self._failed = failed
        self._timeout_s = timeout_s
        self._tcp: asyncio.Transport | None = None
        self._early: list[bytes] = []
        #: start_tls owns the socket: what arrives here now is decrypted application data.
        self._upgrading = False
        self._lost = False
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tcp = cast(asyncio.Transport, transport)
        loop = asyncio.get_running_loop()
        self._upgrading = True
        upgrade = _Stepped(loop.start_tls(self._tcp, self, self._context, server_side=True,
                                          ssl_handshake_timeout=self._timeout_s))  # fmt: skip
        self._task = loop.create_task(self._upgrade(upgrade))

    def data_received(self, data: bytes) -> None:
        if not self._upgrading:  # handshake bytes the TLS layer will never see
            log.debug("closing a connection on listener %s: bytes arrived before its TLS upgrade", self._listener)
            if self._tcp is not None:
                self._tcp.abort()
            return
        self._early.append(data)  # decrypted, after the handshake and before the handover

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True

    async def _upgrade(self, upgrade: _Stepped[asyncio.Transport | None]) -> None:
        assert self._tcp is not None
        tcp = self._tcp
        peer = tcp.get_extra_info("peername")
        host = f"/{peer[0]}" if peer else "?"
        try:
            tls = await upgrade
        except (ssl.SSLError, OSError, TimeoutError, ConnectionError) as exc:
            log.warning("failed authentication from %s on listener %s (SSL handshake failed): %s", host,
                        self._listener, _reason(exc))  # fmt: skip
            self._failed(self._listener)
            tcp.abort()
            return
        if tls is None or self._lost:
            tcp.abort()
            return
        connection = self._make_connection()
        tls.set_protocol(connection)
        connection.connection_made(tls)
        for data in self._early:
            _feed(connection, data)
        self._early.clear()


class _Stepped(Generic[T]):
    """A coroutine run to its first wait now, awaitable (once) for the rest from a task."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._done = False
        self._result: T | None = None
        self._error: BaseException | None = None
        try:
            self._first: Any = coroutine.send(None)
        except StopIteration as stop:
            self._done, self._result = True, stop.value
        except BaseException as exc:  # raised before its first wait: the awaiting task gets it
            self._done, self._error = True, exc

    def __await__(self) -> Generator[Any, Any, T]:
        if self._error is not None:
            raise self._error
        if self._done:
            return cast(T, self._result)
        yielded = self._first
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # cancellation and the like go to the coroutine
                try:
                    yielded = self._coroutine.throw(exc)
                except StopIteration as stop:
                    return cast(T, stop.value)
                continue
            try:
                yielded = self._coroutine.send(sent)
            except StopIteration as stop:
                return cast(T, stop.value)


def _feed(connection: asyncio.BufferedProtocol, data: bytes) -> None:
    """Give ``data`` to a buffered protocol as its transport would, in as many pieces as its buffers take."""
    view = memoryview(data)
    while view:
        buffer = connection.get_buffer(len(view))
        size = min(memoryview(buffer).nbytes, len(view))
        memoryview(buffer)[:size] = view[:size]
        connection.buffer_updated(size)
        view = view[size:]


def _reason(exc: BaseException) -> str:
    with contextlib.suppress(AttributeError):
        reason = cast(ssl.SSLError, exc).reason
        if reason:
            return str(reason)
    return str(exc) or type(exc).__name__
