"""One client connection: read bytes, split frames, dispatch, write responses in order.

Rules this module keeps (Kafka's SocketServer/RequestChannel semantics):

- Requests on one connection are answered in order; clients pipeline, the broker does not
  reorder. They are handled one at a time, except that a pipelined API (Produce) only has its
  synchronous part (offsets assigned, writes queued) done before the next request starts; its
  answer waits in a queue behind earlier ones. Any other request waits until every earlier
  answer is out, so it sees their effects as it would in Kafka (at most
  ``MAX_PIPELINED`` answers wait at once).
- A frame over ``socket.request.max.bytes``, an unknown API key, an unsupported version of
  anything but ApiVersions, a request that does not decode, or a stream that ends inside a
  frame closes the connection with one log line. Nothing a client sends raises past here.
- An unexpected error inside a handler is logged with its traceback and closes only this
  connection.
- A client that half-closes (ends its stream after whole frames) gets the answers to them all,
  pipelined and sendfile ones included; then the connection closes.
- Reading pauses while complete frames wait and the buffer is large; writing waits for the
  transport to drain. A single frame is always read whole, however large (up to the limit).
- A response with segment file ranges (Fetch) is sent by ``file_sender`` after the transport's
  buffer drained, with sendfile; later answers wait until it is out. If it cannot be sent whole
  the connection closes (the frame is broken). On a TLS connection the ranges are read and
  written through the transport instead (sendfile would bypass the encryption).
- A connection knows its listener and principal (Kafka's RequestContext): User:ANONYMOUS, or on
  TLS the mapped name of a verified client certificate. A certificate no
  ``ssl.principal.mapping.rules`` rule applies to closes the connection (authentication failed).
- On a SASL listener the connection has a ``SaslAuthenticator`` (``barnabas.security.sasl``, its
  states a table) that every request is checked against before it is decoded: before
  authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served, in that order,
  and frames are at most ``sasl.server.max.receive.size``; anything else closes the connection, as
  does a request after the session expired (``connections.max.reauth.ms``) that is not a
  re-authentication. A failed exchange is answered (after the failure delay, by its handler) and
  the connection then closed. Once authenticated, the principal is the SASL user.
- A task takes up requests only while there are some: it ends once no whole frame is left, and
  the next frame in starts another (which sets the listener, principal and SASL state it serves for).
  An idle connection holds no task, no coroutine and no read buffer, only its transport and state.
- Bytes are received BufferedProtocol-style into the frame reader's buffers: a large frame
  (a produce) is read from the socket straight into a buffer of its own exact size, which then
  carries the records to the log uncopied.
- Every request answered is counted per API and version with its total time, from its frame being
  taken up to its answer being ready (``BrokerMetrics.requests``, plain integers: the admin
  endpoint's /metrics reads them at scrape time).
- A new connection over ``max.connections`` (its listener's or the broker's) or
  ``max.connections.per.ip`` is closed at once with one INFO line (``connection_limits``).
- A connection with no request in progress and no byte in or out for ``connections.max.idle.ms``
  is closed (Kafka's Selector idle expiry); a negative value never closes one. One sweep over
  every connection, each tenth of that time (``close_idle_connections``), finds them: a timer per
  connection would cost more than the rest of an idle connection's state.
- While ``queued.max.requests`` whole requests wait unread-ahead over all connections, a connection
  with requests of its own waiting reads no more until it has taken them up.
- With a client quota configured, each request's share is measured (``client_quotas``); a
  throttled answer carries ``throttle_time_ms`` and the connection takes up no further request
  for that long (Kafka's channel muting, KIP-219).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from time import monotonic, perf_counter
from typing import Any, cast

from barnabas.log import FileSlice, LogError
from barnabas.protocol import (
    NEED_DATA,
    ErrorCode,
    FrameReader,
    RemoteProtocolError,
    decode_request,
    encode_api_versions_error,
    peek_header,
)
from barnabas.security import ANONYMOUS, ListenerSecurity, NoMatchingRuleError, SaslAuthenticator, SaslState
from barnabas.slim_event import SlimEvent

from .connection_limits import client_address
from .file_sender import send_with_files, write_with_files
from .registry import API_VERSIONS_KEY, CLOSE_CONNECTION, ApiRegistry
from .request_context import CLIENT_HOST, LISTENER_NAME, PRINCIPAL, SASL
from .state import BrokerState

__all__ = ["KafkaConnection", "close_idle_connections"]

log = logging.getLogger(__name__)

#: Pause reading when this many bytes of complete-but-unhandled input are buffered.
PAUSE_READING_AT = 8 << 20
#: Answers of pipelined requests that may wait at once before the connection stops reading requests.
MAX_PIPELINED = 16
#: The APIs that move a SASL connection's state.
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36


#: The idle sweep runs this many times per connections.max.idle.ms, and at most every 10 ms.
IDLE_SWEEPS_PER_PERIOD = 10
_IDLE_SWEEP_MIN_S = 0.01


async def close_idle_connections(connections: set[KafkaConnection], idle_ms: int) -> None:
    """Close, until cancelled, each connection idle for ``idle_ms`` (connections.max.idle.ms; negative: never)."""
    if idle_ms < 0:
        return
    idle_s = idle_ms / 1000
    period = max(idle_s / IDLE_SWEEPS_PER_PERIOD, _IDLE_SWEEP_MIN_S)
    while True:
        await asyncio.sleep(period)
        now = monotonic()
        for connection in list(connections):
            connection.close_if_idle(now, idle_s)


class Phase(enum.Enum):
    OPEN = enum.auto()
    CLOSING = enum.auto()
    CLOSED = enum.auto()


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, state: BrokerState, registry: ApiRegistry, listener: ListenerSecurity | None = None) -> None:
        self._state = state
        self._registry = registry
        self._listener = listener
        self._principal = ANONYMOUS
        #: The SASL state on a SASL listener; None on any other.
        self._sasl: SaslAuthenticator | None = None
        #: Whether the transport encrypts (TLS): segment ranges then go through it, not sendfile.
        self._tls = False
        self._requests = state.node.metrics.requests
        self._frames = FrameReader(state.node.config["socket.request.max.bytes"])
        self._transport: asyncio.Transport | None = None
        self._phase = Phase.OPEN
        # SlimEvents and a list, not asyncio.Events and a deque: a connection's memory was mostly these.
        self._can_write = SlimEvent(True)
        self._reading_paused = False
        #: The task taking up requests; None while none wait (``_serve`` ends when it runs out of frames).
        self._task: asyncio.Task[None] | None = None
        #: Answers not yet written, in request order (pipelined requests' tasks, and what follows them);
        #: at most MAX_PIPELINED.
        self._answers: list[tuple[str, asyncio.Future[Any]]] = []
        self._answers_done = SlimEvent(True)
        #: Set whenever an answer leaves ``_answers``: a full queue has room again.
        self._answer_taken = SlimEvent()
        #: The response being sent with sendfile; nothing else is written meanwhile.
        self._sending: asyncio.Task[None] | None = None
        #: (listener, client address) this connection is counted under in ``connection_limits``.
        self._counted: tuple[str, str] | None = None
        #: When bytes last went in or out (monotonic), for the idle sweep (``close_idle_connections``).
        self._last_active = monotonic()
        #: Whether a request is being handled (an idle check leaves the connection alone meanwhile).
        self._handling = False
        #: This connection's whole requests counted in the broker's ``queued_requests``.
        self._queued = 0
        #: Until when (monotonic) a throttled client's further requests wait.
        self._muted_until = 0.0

    # -- asyncio.Protocol callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = self._transport.get_extra_info("peername")
        ssl_object = self._transport.get_extra_info("ssl_object")
        self._tls = ssl_object is not None
        if not self._admit(peer[0] if peer else ""):
            return
        if self._listener is not None:
            try:
                self._principal = self._listener.principal(ssl_object)
            except NoMatchingRuleError as exc:
                log.warning("closing connection from %s on %s: authentication failed: %s", self._peer,
                            self._listener.name, exc)  # fmt: skip
                self._phase = Phase.CLOSING
                self._transport.abort()
                return
            if self._listener.sasl is not None:
                self._sasl = SaslAuthenticator(self._listener.sasl, self._state.node.credentials)
                self._frames.max_frame_size = self._listener.sasl.max_receive_size
        self._state.node.connections.add(self)

    @property
    def _peer(self) -> str:
        """The client's address for log lines (asked of the transport, which keeps it: not stored per connection)."""
        peer = self._transport.get_extra_info("peername") if self._transport is not None else None
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    def _set_request_context(self) -> None:
        """What handlers read of the connection (listener, principal, SASL state), in the serving task's context."""
        peer = self._transport.get_extra_info("peername") if self._transport is not None else None
        CLIENT_HOST.set(f"/{peer[0]}" if peer else "")
        LISTENER_NAME.set(self._listener.name if self._listener is not None else "")
        PRINCIPAL.set(self._principal)
        SASL.set(self._sasl)

    def _take_up_frames(self) -> None:
        """Start a task taking up requests, unless one is running (it takes up every frame there is)."""
        if self._task is None and self._phase is Phase.OPEN:
            self._task = asyncio.get_running_loop().create_task(self._serve())

    def _admit(self, host: str) -> bool:
        """Count this connection against the connection limits, or close it at once if over one."""
        listener = self._listener.name if self._listener is not None else ""
        address = client_address(host)
        refusal = self._state.node.connection_limits.admit(listener, address)
        if refusal is not None:
            log.info("Rejected connection from %s on listener %s: %s", address, listener or "-", refusal)
            self._phase = Phase.CLOSING
            assert self._transport is not None
            self._transport.abort()
            return False
        self._counted = (listener, address)
        return True

    def close_if_idle(self, now: float, idle_s: float) -> None:
        """Close the connection if it has been idle for ``idle_s`` (connections.max.idle.ms) at ``now``."""
        if self._phase is not Phase.OPEN:
            return
        if self._handling or self._answers or self._sending is not None or self._muted_until:
            self._last_active = now
        idle_for = now - self._last_active
        if idle_for >= idle_s:
            self.close(f"idle for {idle_for * 1000:.0f} ms (connections.max.idle.ms)", logging.DEBUG)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        frames = self._frames
        frames.buffer_updated(nbytes)
        self._last_active = monotonic()
        if not frames.filling_large_frame:  # no use taking up part of a frame
            self._take_up_frames()
        queued = self._state.node.queued_requests
        if frames.frames_waiting != self._queued:
            queued.count += frames.frames_waiting - self._queued
            self._queued = frames.frames_waiting
        # The frame being filled does not count: nothing wakes the serving task (which resumes
        # reading) until it is whole, so it is always read whole, up to socket.request.max.bytes.
        if (frames.waiting > PAUSE_READING_AT or (self._queued and queued.full)) and not self._reading_paused:
            self._pause_reading()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        self._frames.receive_data(b"")
        self._take_up_frames()
        # Keep our side open until pending responses are written; TLS cannot (asyncio closes it).
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = Phase.CLOSED
        node = self._state.node
        node.connections.discard(self)
        if self._counted is not None:
            node.connection_limits.release(*self._counted)
            self._counted = None
        node.queued_requests.count -= self._queued
        self._queued = 0
        self._can_write.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._sending is not None and not self._sending.done():
            self._sending.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- serving --------------------------------------------------------------------------

    def close(self, reason: str | None = None, level: int = logging.WARNING) -> None:
        """Close this connection (after logging ``reason`` at ``level``)."""
        if reason:
            log.log(level, "closing connection from %s: %s", self._peer, reason)
        if self._phase is Phase.OPEN:
            self._phase = Phase.CLOSING
            if self._transport is not None:
                self._transport.close()

    async def _serve(self) -> None:
        """Take up requests until none is left; a connection holds no task (nor its memory) while idle."""
        self._set_request_context()
        try:
            while self._phase is Phase.OPEN:
                if self._muted_until:
                    await self._sit_out_throttle()
                try:
                    frame = self._frames.next_frame()
                except RemoteProtocolError as exc:
                    self.close(str(exc))
                    return
                if frame is NEED_DATA:
                    if self._frames.ended:
                        # Half-closed: the answers to what was asked are still owed.
                        await self._answers_done.wait()
                        self.close()
                        return
                    self._resume_reading()
                    return  # buffer_updated starts the next task once a frame is in
                assert isinstance(frame, bytes | memoryview)
                self._took_frame()
                if not self._can_write.is_set():
                    await self._can_write.wait()
                self._handling = True
                try:
                    await self._handle(frame)
                finally:
                    self._handling = False
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error serving %s", self._peer)
            self.close()
        finally:
            self._task = None

    def _took_frame(self) -> None:
        """A whole request was taken up: it no longer counts as read ahead."""
        waiting = self._frames.frames_waiting
        self._state.node.queued_requests.count += waiting - self._queued
        self._queued = waiting

    def _throttle(self, throttle_ms: int) -> None:
        """Take up no further request for ``throttle_ms`` (a quota was violated)."""
        self._muted_until = max(self._muted_until, monotonic() + throttle_ms / 1000)

    async def _sit_out_throttle(self) -> None:
        """Read nothing until the throttle time is over (Kafka mutes the channel)."""
        self._pause_reading()
        while (left := self._muted_until - monotonic()) > 0:
            await asyncio.sleep(left)
        self._muted_until = 0.0
        self._last_active = monotonic()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()

    async def _handle(self, frame: bytes | memoryview) -> None:
        started = perf_counter()  # the request's total time (Kafka's TotalTimeMs) runs until its answer is ready
        try:
            api_key, api_version, correlation_id = peek_header(frame)
        except RemoteProtocolError as exc:
            self.close(str(exc))
            return
        sasl = self._sasl
        if sasl is not None and (refusal := sasl.refusal(api_key, self._state.node.now_ms())) is not None:
            self.close(f"on SASL listener {sasl.listener.name}: {refusal}")
            return
        spec = self._registry.get(api_key)
        if spec is None:
            self.close(f"unknown api_key {api_key} (version {api_version})")
            return
        if not spec.accepts(api_version):
            if api_key == API_VERSIONS_KEY:
                low, high = spec.min_version, spec.max_version
                error = encode_api_versions_error(correlation_id, ErrorCode.unsupported_version, low, high)
                self._requests.record_since(api_key, api_version, started)
                self._answer_in_order(spec.name, error)
                return
            self.close(f"{spec.name} v{api_version} is not supported (accepted {spec.accept_min}-{spec.max_version})")
            return
        try:
            request = decode_request(frame)
        except RemoteProtocolError as exc:
            self.close(f"{spec.name} v{api_version}: {exc}")
            return
        if (self._answers or self._sending is not None) and not spec.pipelined:
            await self._answers_done.wait()
        quotas = self._state.node.quotas
        meter = quotas.meter(self._principal.name, request) if quotas.active else None
        result: Any
        if meter is None:
            result = spec.handler(self._state, request)
        else:
            meter.arrived(len(frame))
            handler, state, body = spec.handler, self._state, request
            result = meter.run(lambda: handler(state, body), self._throttle)
            del body
        del request
        if inspect.isawaitable(result):
            if spec.pipelined:
                task = asyncio.ensure_future(result)

                def done(_: object) -> None:
                    # Its writes have landed once it is done: the frame's buffer may serve the next one.
                    self._frames.recycle(frame)
                    self._requests.record_since(api_key, api_version, started)

                task.add_done_callback(done)
                self._queue_answer(spec.name, task)
                await self._while_answers_are_full()
                return
            result = await result
        self._requests.record_since(api_key, api_version, started)
        self._frames.recycle(frame)
        if sasl is not None and api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            self._answer_in_order(spec.name, result)
            self._after_sasl(sasl)
            return
        if self._answer_in_order(spec.name, result):
            if not self._can_write.is_set():
                await self._can_write.wait()
        else:
            await self._while_answers_are_full()  # a done answer queued behind one being sent counts too

    def _after_sasl(self, sasl: SaslAuthenticator) -> None:
        """After a SASL request's answer: close a failed connection, or take up the authenticated principal."""
        if sasl.state is SaslState.FAILED:
            self.close()  # the answer (already written, or queued in order) goes out first
        elif sasl.principal is not None and sasl.principal != self._principal:
            self._principal = sasl.principal
            PRINCIPAL.set(sasl.principal)
            self._frames.max_frame_size = self._state.node.config["socket.request.max.bytes"]

    async def _while_answers_are_full(self) -> None:
        """Read no further request while MAX_PIPELINED answers wait (done ones may wait behind a send)."""
        while len(self._answers) >= MAX_PIPELINED:
            self._answer_taken.clear()
            await self._answer_taken.wait()

    def _answer_in_order(self, name: str, result: Any) -> bool:
        """Answer now, or queue the answer behind those still being worked on or sent; True if now."""
        if self._answers or self._sending is not None:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(result)
            self._queue_answer(name, done)
            return False
        self._answer(name, result)
        return True

    def _queue_answer(self, name: str, answer: asyncio.Future[Any]) -> None:
        self._answers.append((name, answer))
        self._answers_done.clear()
        answer.add_done_callback(self._write_ready_answers)

    def _write_ready_answers(self, _: object = None) -> None:
        answers = self._answers
        while answers and answers[0][1].done() and self._sending is None:
            name, answer = answers.pop(0)
            self._answer_taken.set()
            if answer.cancelled():
                self.close()
                continue
            exc = answer.exception()
            if exc is not None:
                log.error("unexpected error serving %s", self._peer, exc_info=exc)
                self.close()
                continue
            self._answer(name, answer.result())
        if not answers and self._sending is None:
            self._answers_done.set()

    def _answer(self, name: str, result: Any) -> None:
        if result is CLOSE_CONNECTION:
            self.close(f"{name} failed and the client asked for no response")
        elif result is not None:
            self._write(result)

    def _write(self, response: bytes | list[Any]) -> None:
        if self._transport is None or self._phase is not Phase.OPEN:
            return
        self._last_active = monotonic()
        if isinstance(response, list):
            if any(isinstance(chunk, FileSlice) for chunk in response):
                self._answers_done.clear()
                self._sending = asyncio.get_running_loop().create_task(self._send_with_files(response))
                self._sending.add_done_callback(self._sent)
                return
            self._transport.writelines(response)
        else:
            self._transport.write(response)

    async def _send_with_files(self, chunks: list[Any]) -> None:
        transport = self._transport
        assert transport is not None
        if self._tls:
            await self._write_with_files(transport, chunks)
            return
        if transport.get_write_buffer_size():
            # Earlier answers first: ask to be paused until the transport's buffer is empty.
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                while transport.get_write_buffer_size() and self._phase is Phase.OPEN:
                    self._can_write.clear()
                    transport.set_write_buffer_limits(high=0, low=0)
                    await self._can_write.wait()
            finally:
                if self._phase is Phase.OPEN:
                    transport.set_write_buffer_limits()
        if self._phase is not Phase.OPEN:
            return
        try:
            await send_with_files(transport.get_extra_info("socket").fileno(), chunks)
        except (BrokenPipeError, ConnectionResetError):
            self.close("the client hung up during a fetch response", logging.DEBUG)  # `consume | head`: normal
        except (LogError, OSError) as exc:
            self.close(f"response with segment data not sent whole: {exc}")

    async def _write_with_files(self, transport: asyncio.Transport, chunks: list[Any]) -> None:
        """The TLS path: ranges read and written through the transport, in order behind earlier answers."""
        try:
            await write_with_files(transport, chunks, self._can_write, lambda: self._phase is Phase.OPEN)
        except ConnectionResetError:
            self.close("the client hung up during a fetch response", logging.DEBUG)
        except (LogError, OSError) as exc:
            self.close(f"response with segment data not sent whole: {exc}")

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending = None
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("unexpected error sending to %s", self._peer, exc_info=exc)
            self.close()
        self._write_ready_answers()
