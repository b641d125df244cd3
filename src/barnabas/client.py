"""A Kafka client connection for barnabas's own traffic: an asyncio shell around the codec.

A follower talks to its leader through one of these (Fetch with replica_id, OffsetForLeaderEpoch,
Metadata, ApiVersions), and the proxy relays its clients' requests to brokers through them
(:meth:`KafkaClient.relay`: frames encoded elsewhere, responses returned undecoded). Like httpcore
around h11, the bytes are split by the sans-IO ``FrameReader`` and encoded and decoded by
``barnabas.protocol``; this module only moves them. A broker's SSL listener is reached with a TLS
context (``connect(tls=...)``, the broker-to-broker one from ``barnabas.security``), a SASL listener
with a mechanism's client side (``connect(sasl=...)``, from ``barnabas.security``'s mechanism modules).

Rules this module keeps (Kafka's NetworkClient/InFlightRequests semantics):

- Requests are pipelined: any number may be in flight on the one connection. A Kafka broker
  answers them in order, so each response must carry the correlation id of the oldest request
  still in flight; anything else is a protocol error.
- Every failure is a ``BrokerConnectionError``: the connection could not be made, was closed or
  reset by the peer or by ``close()``, a request timed out, or the peer sent bytes that do not
  decode. Any of them breaks the whole connection, like Kafka's request timeout: every request
  in flight fails with its own BrokerConnectionError (the cause in ``__cause__``), and every
  later request fails at once. Callers reconnect; nothing here retries.
- Our own misuse (a body of the wrong class, a value that does not fit) raises
  LocalProtocolError before anything is sent and leaves the connection as it was.
- A request whose caller is cancelled stays in the in-flight queue so later responses still
  match; its response is dropped undecoded when it arrives.
- Responses are decoded in the requesting task, not in the protocol callback, so a cancelled
  request costs no decoding and a large Fetch response is decoded by the task that wants it.
- No busy loops and no sleeps: the reader is driven by ``data_received``, waiters by futures,
  timeouts by one timer per connection set for the earliest deadline in flight (a timer per
  request cost a proxy relaying thousands a second ~8 % of its CPU). A request keeps its deadline
  once its caller has started waiting, even if the caller is cancelled: responses come in order,
  so one that never comes holds up every later one.
- On a SASL listener ``connect`` authenticates before it returns (SaslHandshake v1, then
  SaslAuthenticate until the mechanism is done, KIP-152); a refused mechanism, a failed
  authentication or a server the mechanism does not trust closes the connection and raises
  BrokerConnectionError. The client does not re-authenticate (KIP-368): it records when the
  broker's session ends (``session_ends_at``), so callers can open a new connection before; a
  request sent after it gets the connection closed, and callers reconnect.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import ssl
import struct
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol, cast

from barnabas.protocol import (
    NEED_DATA,
    BufferPool,
    ErrorCode,
    FrameReader,
    RemoteProtocolError,
    decode_response,
    encode_request,
    request_class,
    response_correlation_id,
)
from barnabas.slim_event import SlimEvent

__all__ = ["DEFAULT_MAX_RESPONSE_SIZE", "BrokerConnectionError", "KafkaClient", "RequestFrame", "SaslClientMechanism"]

log = logging.getLogger(__name__)

#: Largest response frame accepted; a bigger size prefix breaks the connection before the
#: payload is buffered (Kafka's replica.fetch.response.max.bytes defaults to 10 MiB).
DEFAULT_MAX_RESPONSE_SIZE: Final = 256 << 20

_API_VERSIONS = 18
_API_VERSIONS_VERSION = 3  # the newest with a distinct layout; v4 only adds error semantics
_SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSION = 17, 1
_SASL_AUTHENTICATE, _SASL_AUTHENTICATE_VERSION = 36, 2
_CORRELATION_LIMIT = 1 << 31  # correlation ids are int32 and wrap to 0
_INT32 = struct.Struct(">i")
_REQUEST_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id

#: A request frame without its size prefix: one buffer, or buffers to write in order (records as views).
RequestFrame = bytes | memoryview | Sequence[bytes | memoryview]


class BrokerConnectionError(ConnectionError):
    """The connection to a broker failed, closed or timed out, or the broker broke the protocol.

    Every request in flight when it happens fails with one of these; the connection is unusable
    afterwards. ``__cause__`` holds the underlying error when there is one.
    """


class SaslClientMechanism(Protocol):
    """The client side of one SASL exchange (``barnabas.security``'s PlainClient and ScramClient)."""

    @property
    def mechanism(self) -> str:
        """The mechanism's SASL name (``PLAIN``, ``SCRAM-SHA-256``)."""
        ...

    def initial_response(self) -> bytes:
        """The first token to send."""
        ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The server's answer: the next token to send, or None once the exchange is done.

        Raises:
            ValueError: the server's message is malformed or proves it does not know the credential.
        """
        ...


class Phase(enum.Enum):
    OPEN = enum.auto()
    CLOSED = enum.auto()


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    response: asyncio.Future[bytes | memoryview]
    #: The caller takes a large response as the reader's own view (a relay passes it on uncopied);
    #: any other caller gets bytes, which kio decodes.
    raw: bool = False
    #: When (the event loop's clock) the connection fails if no response came, and the timeout that set it.
    deadline: float = math.inf
    timeout_s: float = math.inf


class _ClientProtocol(asyncio.BufferedProtocol):
    """Transport callbacks: read into the frame reader, hand each frame to the oldest request in flight."""

    def __init__(self, client: KafkaClient) -> None:
        self._client = client

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._client._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._client._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._client._frames.buffer_updated(nbytes)
        self._client._frames_ready()

    def eof_received(self) -> bool:
        self._client._data_received(b"")
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._client._connection_lost(exc)

    def pause_writing(self) -> None:
        self._client._can_write.clear()

    def resume_writing(self) -> None:
        self._client._can_write.set()


class KafkaClient:
    """One client connection to a Kafka broker. Make it with :meth:`connect`.

    Use as ``async with await KafkaClient.connect(...) as client:`` or call :meth:`close`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None,
        request_timeout_s: float,
        max_response_size: int,
        buffers: BufferPool | None = None,
    ) -> None:
        """Use :meth:`connect`; this makes an unconnected client."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self._frames = FrameReader(max_response_size, buffers)
        self._transport: asyncio.Transport | None = None
        self._phase = Phase.OPEN
        # A list and SlimEvents, not a deque and asyncio.Events: a proxy keeps one client per client connection.
        self._in_flight: list[_InFlight] = []
        self._next_correlation_id = 0
        self._can_write = SlimEvent(True)
        self._closed = SlimEvent()
        #: One timer for the earliest deadline in flight, not one per request (a proxy relays thousands a second).
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._failure: tuple[str, BaseException | None] | None = None
        #: The broker's SASL session (KIP-368): its length in seconds and when it ends (the event loop's
        #: clock); None when it does not end (or the connection is not SASL).
        self.session_lifetime_s: float | None = None
        self.session_ends_at: float | None = None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = "barnabas",
        timeout_s: float = 30.0,
        request_timeout_s: float | None = None,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        tls: ssl.SSLContext | None = None,
        sasl: SaslClientMechanism | None = None,
        buffers: BufferPool | None = None,
    ) -> KafkaClient:
        """Open a TCP connection to a broker, with TLS when ``tls`` is given, authenticated when ``sasl`` is.

        Args:
            host: the broker's host.
            port: the broker's port.
            client_id: sent in every request header (None sends a null string).
            timeout_s: how long the TCP connect may take (Kafka's socket.connection.setup.timeout.ms).
            request_timeout_s: default time a request may wait for its response; None means
                ``timeout_s``. A long-poll Fetch needs more than its max_wait.
            max_response_size: the largest response frame accepted.
            tls: the TLS context of an SSL listener (its ``check_hostname`` checks ``host``); None for PLAINTEXT.
            sasl: a fresh client side of the mechanism to authenticate with on a SASL listener.
            buffers: where large response frames' buffers come from (recycled ones first), shared
                with whoever hands relayed frames back; None: this client's own.

        Raises:
            BrokerConnectionError: the connection could not be made in time, the TLS handshake
                failed, or SASL authentication failed (the connection is closed then).
        """
        client = cls(
            host,
            port,
            client_id=client_id,
            request_timeout_s=timeout_s if request_timeout_s is None else request_timeout_s,
            max_response_size=max_response_size,
            buffers=buffers,
        )
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                await loop.create_connection(
                    lambda: _ClientProtocol(client), host, port, ssl=tls, server_hostname=host if tls else None
                )
        except TimeoutError as exc:
            raise BrokerConnectionError(f"connecting to {host}:{port} timed out after {timeout_s}s") from exc
        except OSError as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        if sasl is not None:
            try:
                await client._authenticate(sasl)
            except BaseException:
                client.close()
                raise
        return client

    async def _authenticate(self, sasl: SaslClientMechanism) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done (KIP-152)."""
        handshake = request_class(_SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSION)(mechanism=sasl.mechanism)
        response = await self.request(_SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSION, handshake)
        if response.error_code != ErrorCode.none:
            enabled = ", ".join(response.mechanisms) or "none"
            raise BrokerConnectionError(
                f"{self._where()}: SASL mechanism {sasl.mechanism} refused ({response.error_code.name}; "
                f"enabled: {enabled})"
            )
        authenticate = request_class(_SASL_AUTHENTICATE, _SASL_AUTHENTICATE_VERSION)
        token: bytes | None = sasl.initial_response()
        while token is not None:
            answer = await self.request(_SASL_AUTHENTICATE, _SASL_AUTHENTICATE_VERSION, authenticate(auth_bytes=token))
            if answer.error_code != ErrorCode.none:
                raise BrokerConnectionError(
                    f"{self._where()}: SASL {sasl.mechanism} authentication failed: {answer.error_message}"
                )
            try:
                token = sasl.evaluate_challenge(answer.auth_bytes)
            except ValueError as exc:
                raise BrokerConnectionError(f"{self._where()}: SASL {sasl.mechanism}: {exc}") from exc
            lifetime_s = answer.session_lifetime.total_seconds()
            if lifetime_s > 0:  # told with the exchange's last answer (SaslAuthenticate v1+)
                self.session_lifetime_s = lifetime_s
                self.session_ends_at = asyncio.get_running_loop().time() + lifetime_s

    # -- public API --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection failed or was closed; every request then raises."""
        return self._phase is Phase.CLOSED

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not arrived yet (cancelled ones included)."""
        return len(self._in_flight)

    async def request(self, api_key: int, api_version: int, body: Any, *, timeout_s: float | None = None) -> Any:
        """Send one request and return the decoded response body (a kio response entity).

        Several calls may run concurrently on one client; they are pipelined on the connection.

        Args:
            api_key: the request's API key.
            api_version: the version to send; ``body`` must be that version's kio request class
                (``barnabas.protocol.request_class(api_key, api_version)``).
            body: the kio request entity.
            timeout_s: how long to wait for the response, including waiting for the transport
                to accept the bytes; None means the client's ``request_timeout_s``.

        Returns:
            The kio response entity. Kafka error codes inside it are data, not exceptions.

        Raises:
            BrokerConnectionError: the connection is closed or failed, the response did not
                arrive in time, or it did not decode; the connection is closed afterwards.
            LocalProtocolError: ``body`` cannot be encoded as (api_key, api_version); nothing
                was sent and the connection is unaffected.
        """
        return await self.request_nowait(api_key, api_version, body, timeout_s=timeout_s)

    def request_nowait(
        self, api_key: int, api_version: int, body: Any, *, timeout_s: float | None = None
    ) -> Awaitable[Any]:
        """Write the request now; await the result for the decoded response (as :meth:`request`).

        The bytes are on the transport when this returns, so requests written one after another
        this way reach the broker in that order, whatever their callers await in between.
        """
        self._raise_if_closed()
        correlation_id = self._next_correlation_id
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        entry = self._send(api_key, api_version, correlation_id, (frame,))
        return self._decoded(entry, timeout_s)

    async def _decoded(self, entry: _InFlight, timeout_s: float | None) -> Any:
        payload = await self._response(entry, timeout_s)
        try:
            _, response = decode_response(entry.api_key, entry.api_version, payload)
        except RemoteProtocolError as exc:
            message = f"{self._describe(entry)}: {exc}"
            self._fail(message, exc)
            raise BrokerConnectionError(f"{self._where()}: {message}") from exc
        return response

    async def relay(
        self, frame: RequestFrame, *, expect_response: bool = True, timeout_s: float | None = None
    ) -> bytes | memoryview | None:
        """Send a request encoded elsewhere under this connection's next correlation id; its response undecoded.

        Args:
            frame: a whole request frame without its size prefix (header and body, as a
                ``FrameReader`` returns it), or buffers whose concatenation is one, the first
                holding at least the api key, version and correlation id; its correlation id is
                replaced, nothing is copied.
            expect_response: False for a request the broker does not answer (Produce with acks=0).
            timeout_s: as for :meth:`request`.

        Returns:
            The response frame without its size prefix (it starts with this connection's
            correlation id; a large one is the frame reader's own view, uncopied), or None when no
            response is expected.

        Raises:
            BrokerConnectionError: as for :meth:`request`.
        """
        return await self.relay_nowait(frame, expect_response=expect_response, timeout_s=timeout_s)

    def relay_nowait(
        self, frame: RequestFrame, *, expect_response: bool = True, timeout_s: float | None = None
    ) -> Awaitable[bytes | memoryview | None]:
        """Write the frame now (as :meth:`request_nowait`); await the result for :meth:`relay`'s."""
        self._raise_if_closed()
        chunks = (frame,) if isinstance(frame, bytes | bytearray | memoryview) else tuple(frame)
        view = memoryview(chunks[0])
        api_key, api_version, _ = _REQUEST_START.unpack_from(view, 0)
        correlation_id = self._next_correlation_id
        size = sum(len(chunk) for chunk in chunks)
        parts = (_INT32.pack(size), view[:4], _INT32.pack(correlation_id), view[8:], *chunks[1:])
        entry = self._send(api_key, api_version, correlation_id, parts, expect_response=expect_response, raw=True)
        if not expect_response:
            return _nothing()
        return self._response(entry, timeout_s)

    def _send(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        parts: tuple[bytes | memoryview, ...],
        *,
        expect_response: bool = True,
        raw: bool = False,
    ) -> _InFlight:
        self._next_correlation_id = (correlation_id + 1) % _CORRELATION_LIMIT
        entry = _InFlight(correlation_id, api_key, api_version, asyncio.get_running_loop().create_future(), raw)
        if expect_response:
            self._in_flight.append(entry)
        assert self._transport is not None
        self._transport.writelines(parts)
        return entry

    async def _response(self, entry: _InFlight, timeout_s: float | None) -> bytes | memoryview:
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        entry.timeout_s = timeout
        entry.deadline = asyncio.get_running_loop().time() + timeout
        self._watch_deadline(entry.deadline)
        try:
            if not self._can_write.is_set():
                await self._can_write.wait()
            return await entry.response
        finally:
            if not entry.response.done():
                entry.response.cancel()  # the caller left: drop the response when it comes
            elif not entry.response.cancelled():
                entry.response.exception()  # retrieved, even if the caller left before awaiting it

    async def api_versions(self, *, timeout_s: float | None = None) -> dict[int, tuple[int, int]]:
        """Ask the broker which versions it serves: api_key -> (min_version, max_version).

        Sends ApiVersions v3; a broker that does not know v3 answers UNSUPPORTED_VERSION with
        its own ApiVersions range, and the request is repeated in the highest version both
        speak (KIP-511's negotiation, as Kafka's NetworkClient does it).

        Raises:
            BrokerConnectionError: as for :meth:`request`, or the broker answered with an error.
        """
        version = _API_VERSIONS_VERSION
        while True:
            response = await self.request(_API_VERSIONS, version, _api_versions_request(version), timeout_s=timeout_s)
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
            if response.error_code == ErrorCode.none:
                return ranges
            low, high = ranges.get(_API_VERSIONS, (0, -1))
            if response.error_code != ErrorCode.unsupported_version or not low <= high < version:
                raise BrokerConnectionError(f"{self._where()}: ApiVersions v{version} failed: {response.error_code!r}")
            version = high

    def close(self) -> None:
        """Close the connection; requests in flight fail with BrokerConnectionError. Idempotent."""
        self._fail("closed by the client", None, graceful=True)

    async def wait_closed(self) -> None:
        """Wait until the transport has closed (after :meth:`close` or a failure)."""
        await self._closed.wait()

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        await self.wait_closed()

    # -- callbacks from _ClientProtocol -----------------------------------------------------

    def _data_received(self, data: bytes) -> None:
        self._frames.receive_data(data)
        self._frames_ready()

    def _frames_ready(self) -> None:
        frames = self._frames
        while self._phase is Phase.OPEN:
            try:
                frame = frames.next_frame()
                if frame is NEED_DATA:
                    if frames.ended:
                        self._fail("connection closed by the broker", None)
                    return
                self._deliver(frame)
            except RemoteProtocolError as exc:
                self._fail(str(exc), exc)

    def _deliver(self, frame: bytes | memoryview) -> None:
        correlation_id = response_correlation_id(frame)
        if not self._in_flight:
            raise RemoteProtocolError(f"response with correlation id {correlation_id} but no request in flight")
        entry = self._in_flight[0]
        if correlation_id != entry.correlation_id:
            raise RemoteProtocolError(
                f"response with correlation id {correlation_id}, expected {entry.correlation_id} "
                f"for {self._describe(entry)}"
            )
        del self._in_flight[0]
        if entry.raw or isinstance(frame, bytes):
            if not entry.response.done():  # done: its caller was cancelled
                entry.response.set_result(frame)
            return
        # kio reads only bytes: a large response (a buffer of the reader's own) is copied unless relayed, and
        # its buffer takes the next one (a fresh map costs a page fault per 4 KiB as the bytes land).
        if not entry.response.done():
            entry.response.set_result(bytes(frame))
        self._frames.recycle(frame)

    def _watch_deadline(self, deadline: float) -> None:
        """Have the deadline timer fire by ``deadline``."""
        timer = self._deadline_timer
        if timer is not None:
            if timer.when() <= deadline:
                return
            timer.cancel()
        self._deadline_timer = asyncio.get_running_loop().call_at(deadline, self._check_deadlines)

    def _check_deadlines(self) -> None:
        """Fail the connection if a request in flight is past its deadline, else wait for the next one."""
        self._deadline_timer = None
        if self._phase is not Phase.OPEN or not self._in_flight:
            return
        now = asyncio.get_running_loop().time()
        late = next((entry for entry in self._in_flight if entry.deadline <= now), None)
        if late is not None:
            self._fail(f"{self._describe(late)} got no response within {late.timeout_s}s", None)
            return
        earliest = min(entry.deadline for entry in self._in_flight)
        if earliest < math.inf:  # requests whose callers have not started waiting have none yet
            self._watch_deadline(earliest)

    def _connection_lost(self, exc: Exception | None) -> None:
        self._fail("connection lost" if exc is None else f"connection lost: {exc}", exc)
        self._closed.set()

    # -- failure ----------------------------------------------------------------------------

    def _fail(self, reason: str, cause: BaseException | None, *, graceful: bool = False) -> None:
        """Break the connection once: close the transport and fail every request in flight.

        ``graceful`` (our own close) lets the transport flush what it has buffered; any other
        failure aborts it, dropping unsent bytes.
        """
        if self._phase is Phase.CLOSED:
            return
        self._phase = Phase.CLOSED
        self._failure = (reason, cause)
        if self._in_flight:
            log.debug("%s: %s; failing %d requests in flight", self._where(), reason, len(self._in_flight))
        while self._in_flight:
            entry = self._in_flight.pop(0)
            if not entry.response.done():
                error = BrokerConnectionError(f"{self._where()}: {self._describe(entry)} failed: {reason}")
                error.__cause__ = cause
                entry.response.set_exception(error)
        self._can_write.set()  # wake writers; they find their futures failed
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        if self._transport is not None:
            if graceful:
                self._transport.close()
            else:
                self._transport.abort()
        else:
            self._closed.set()

    def _raise_if_closed(self) -> None:
        if self._phase is Phase.OPEN:
            return
        reason, cause = self._failure or ("closed", None)
        raise BrokerConnectionError(f"{self._where()}: connection is closed ({reason})") from cause

    def _where(self) -> str:
        return f"broker {self.host}:{self.port}"

    @staticmethod
    def _describe(entry: _InFlight) -> str:
        return f"api_key={entry.api_key} v{entry.api_version} (correlation id {entry.correlation_id})"


async def _nothing() -> None:
    return None


def _api_versions_request(version: int) -> Any:
    cls = request_class(_API_VERSIONS, version)
    if version >= 3:
        return cls(client_software_name="barnabas", client_software_version="0")
    return cls()
