"""One client connection to the proxy: frames in, answers out in request order.

The socket reads straight into the connection's FrameReader (a buffered protocol), and a large
request frame a broker has answered goes back to the reader for the next one, so a stream of
produce requests neither copies each read nor zero-fills a fresh buffer per request.

Requests are handled concurrently (each in its own task, each broker request written in the
connection's send order, see ``turns``), and answered in the order they arrived, Kafka's promise
per connection. Reading pauses while ``max_in_flight`` requests are unanswered. A request the
proxy must not answer (a broker-internal API, bytes that do not decode) closes the connection
with a log line, as a broker does; answers already due are written first.

The connection's principal is what a broker's listener would make of it: on a SASL listener the
user it logs in as (``sasl_gate``: nothing but ApiVersions and the login is served before), with a
verified client certificate its mapped name, else ``User:ANONYMOUS``. Its broker connections act
for that principal once it is known.

When the proxy stops (``stop_reading``), the connection answers what it has read, then ends its
stream (``write_eof``) and drops whatever the client still sends until the client closes. Closing
with bytes unread would send a reset, and a reset can make the client's kernel throw away answers
it has received but the client has not read yet. A TLS connection cannot half-close: it closes once
its answers are written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from time import perf_counter
from typing import cast

from barnabas.admin_http import RequestMetrics
from barnabas.protocol import NEED_DATA, BufferPool, FrameReader, ProtocolError, peek_header
from barnabas.security import ANONYMOUS, ListenerSecurity, NoMatchingRuleError
from barnabas.security.sasl import CredentialSource
from barnabas.slim_event import SlimEvent

from .router import Answer, CloseConnectionError, RelayedAnswer, Router
from .sasl_gate import AUTHENTICATE, HANDSHAKE, GateAnswer, NoScramUsers, SaslGate
from .turns import TurnChain

__all__ = ["ClientSession"]

log = logging.getLogger(__name__)

#: Where a stopping connection reads the bytes it drops.
DISCARD_BUFFER_BYTES = 64 * 1024


class ClientSession(asyncio.BufferedProtocol):
    def __init__(
        self,
        router: Router,
        sessions: set[ClientSession],
        *,
        max_frame: int,
        max_in_flight: int,
        requests: RequestMetrics | None = None,
        buffers: BufferPool | None = None,
        listener: ListenerSecurity | None = None,
        credentials: CredentialSource | None = None,
    ) -> None:
        """Args: ``listener`` is how the client listener serves (None: PLAINTEXT); ``credentials`` the SCRAM users."""
        self._router = router.for_connection()
        #: Where answered requests are counted with their time (the admin endpoint's /metrics).
        self._requests = requests
        self._sessions = sessions
        self._frames = FrameReader(max_frame, buffers)
        self._router.done_with_frame = self._frames.recycle
        self._max_in_flight = max_in_flight
        self._max_frame = max_frame
        self._listener = listener
        self._credentials = credentials
        #: The SASL exchange every request passes first (a SASL listener), else None.
        self._gate: SaslGate | None = None
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._turns = TurnChain()
        #: Answers due, in request order (at most ``max_in_flight``); a list and SlimEvents keep a connection small.
        self._answers: list[asyncio.Task[Answer]] = []
        self._reading_paused = False
        #: No more requests will be read (end of stream, a broken frame, the proxy stopping).
        self._ending = False
        self._closing = False
        #: The proxy is stopping: once answered, end the stream rather than close (see the module's rules).
        self._stopping = False
        #: The stream is ended: what the client still sends lands here, unread, until it closes.
        self._discard: memoryview | None = None
        #: Brokers' answer frames written to the transport, given back to the pool once it has sent them
        #: (None while there are none: an idle connection holds no list).
        self._frames_in_transport: list[bytes | memoryview] | None = None
        self.idle = SlimEvent(True)
        #: Set once the connection is gone.
        self.closed = SlimEvent()

    # -- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._sessions.add(self)
        listener = self._listener
        if listener is not None and listener.sasl is not None:
            client_host = f"/{peer[0]}" if isinstance(peer, tuple) else self._peer
            self._gate = SaslGate(listener.sasl, self._credentials or NoScramUsers(), client_host)
            self._frames.max_frame_size = listener.sasl.max_receive_size
            return
        try:
            principal = listener.principal(transport.get_extra_info("ssl_object")) if listener else ANONYMOUS
        except NoMatchingRuleError as exc:
            log.warning("client %s: authentication failed: %s; closing the connection", self._peer, exc)
            self._closing = True
            self._transport.abort()
            return
        self._router.links.act_for(principal.name)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._discard is not None:
            return self._discard
        return self._frames.get_buffer()  # the socket's bytes land in the frame reader, uncopied

    def buffer_updated(self, nbytes: int) -> None:
        if self._discard is not None:
            return
        self._frames.buffer_updated(nbytes)
        self._read_frames()

    def eof_received(self) -> bool:
        if self._discard is not None:
            return False  # the client has closed its side too: the transport closes
        self._frames.receive_data(b"")
        self._read_frames()
        return True  # keep our side open until the answers due are written

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for task in self._answers:
            task.cancel()
        self._answers.clear()
        self._router.links.close_nowait()
        self._sessions.discard(self)
        self.idle.set()
        self.closed.set()

    # -- reading ---------------------------------------------------------------------------------

    def _read_frames(self) -> None:
        while not self._closing and not self._ending:
            try:
                frame = self._frames.next_frame()
            except ProtocolError as exc:
                self._close_after_answers(str(exc))
                return
            if frame is NEED_DATA:
                if self._frames.ended:
                    self._close_after_answers(None)
                return
            self._start(frame)

    def _start(self, frame: bytes | memoryview) -> None:
        self._give_back_sent_frames()  # a client asking again has mostly read what it was sent
        if self._gate is not None and not self._pass_gate(self._gate, frame):
            return
        turn = self._turns.next()
        started = perf_counter()
        try:
            api_key, version, _ = peek_header(frame)
        except ProtocolError:
            api_key = version = -1  # the router refuses it (closing the connection); nothing is counted

        async def handle() -> Answer:
            try:
                answer = await self._router.handle(frame, turn)
            finally:
                turn.end()
            if self._requests is not None and api_key >= 0:
                self._requests.record_since(api_key, version, started)
            return answer

        self._queue(handle())
        if len(self._answers) >= self._max_in_flight and self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    def _pass_gate(self, gate: SaslGate, frame: bytes | memoryview) -> bool:
        """Whether ``frame`` goes on to the router: SASL frames are answered here, others may close the connection."""
        try:
            api_key = peek_header(frame)[0]
        except ProtocolError:
            api_key = -1
        refusal = gate.refusal(api_key)
        if refusal is not None:
            self._close_after_answers(f"on SASL listener {gate.listener.name}: {refusal}")
            return False
        if api_key not in (HANDSHAKE, AUTHENTICATE):
            return True
        try:
            answer = gate.answer(frame)
        except CloseConnectionError as exc:
            self._close_after_answers(str(exc))
            return False
        principal = gate.principal
        if principal is not None:  # authenticated (again: the principal cannot change, KIP-368)
            self._router.links.act_for(principal.name)
            self._frames.max_frame_size = self._max_frame
        self._queue(_delayed(answer))
        if answer.closes:
            self._close_after_answers(None)
        return False

    def _queue(self, answer: Coroutine[None, None, Answer]) -> None:
        """Answer in turn, once ``answer`` is ready."""
        task = asyncio.get_running_loop().create_task(answer)
        self._answers.append(task)
        self.idle.clear()
        task.add_done_callback(self._write_ready_answers)

    # -- writing ---------------------------------------------------------------------------------

    def _write_ready_answers(self, _: object = None) -> None:
        """Write every answer at the head of the queue that is ready (a done callback: no writer task per request)."""
        while self._answers and self._answers[0].done() and not self._closing:
            task = self._answers.pop(0)
            if task.cancelled():
                self._close("a request was cancelled in the proxy")
                return
            error = task.exception()
            if isinstance(error, CloseConnectionError):
                self._close(str(error))
                return
            if error is not None:
                log.error("client %s: a request failed in the proxy", self._peer, exc_info=error)
                self._close("internal error")
                return
            self._write(task.result())
            if (
                self._reading_paused
                and not self._ending
                and len(self._answers) < self._max_in_flight
                and self._transport
            ):
                self._reading_paused = False
                self._transport.resume_reading()
        if not self._answers:
            self.idle.set()
            if self._ending:
                self._end()

    def _write(self, answer: Answer) -> None:
        if self._transport is None or answer is None:
            return
        if isinstance(answer, bytes):
            self._transport.write(answer)
            return
        self._give_back_sent_frames()
        self._transport.writelines(answer)
        if isinstance(answer, RelayedAnswer):
            if self._frames_in_transport is None:
                self._frames_in_transport = list(answer.frames)
            else:
                self._frames_in_transport += answer.frames

    def _give_back_sent_frames(self) -> None:
        """Hand the brokers' answer frames back to the buffer pool once the transport holds none of their bytes.

        The transport may keep views of what it was given until it has sent them (uvloop queues
        writes to the end of the loop's iteration; a full socket keeps them longer): a buffer
        handed back earlier could be read into while it is still being sent.
        """
        sent = self._frames_in_transport
        if sent is None or self._transport is None or self._transport.get_write_buffer_size():
            return
        self._frames_in_transport = None
        for frame in sent:
            self._frames.recycle(frame)

    # -- closing ---------------------------------------------------------------------------------

    def _close_after_answers(self, reason: str | None) -> None:
        """Stop reading; close once the answers due are written (at once if none are)."""
        if reason is not None:
            log.warning("client %s: %s; closing the connection", self._peer, reason)
        self._ending = True
        if not self._answers:
            self._end()

    def _end(self) -> None:
        """Every answer due is written: close, or, while the proxy stops, end the stream and drop what comes."""
        transport = self._transport
        if (
            not self._stopping
            or transport is None
            or self._closing
            or self._frames.ended  # the client has ended its side already: nothing more to drop
            or not transport.can_write_eof()
        ):
            self._close(None)
            return
        self._closing = True
        self._discard = memoryview(bytearray(DISCARD_BUFFER_BYTES))
        transport.write_eof()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def _close(self, reason: str | None) -> None:
        if reason is not None:
            log.warning("client %s: %s; closing the connection", self._peer, reason)
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def stop_reading(self) -> None:
        """The proxy is stopping: read no more requests; answer those already read, then end the stream."""
        self._stopping = True
        if self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        self._close_after_answers(None)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


async def _delayed(answer: GateAnswer) -> Answer:
    """A SASL answer, after its delay (a failed login's, KIP-306)."""
    if answer.delay_s > 0:
        await asyncio.sleep(answer.delay_s)
    return answer.frame
