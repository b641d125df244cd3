"""One KazooClient — one ZooKeeper session — driven from asyncio.

Rules:

- kazoo is thread-based: its ``*_async`` calls return an ``IAsyncResult`` completed on a kazoo
  thread, and its state listeners and watch callbacks run on kazoo threads. Nothing here touches
  asyncio objects from those threads: every completion and callback is marshalled onto the event
  loop with ``call_soon_threadsafe``.
- Requests submitted together go out in order on one connection, so a ``sync`` followed by reads
  needs one round trip, and reads of many znodes are pipelined.
- A call waits at most ``op_timeout_s`` for a connection and its replies, then raises
  UnavailableError; a write that timed out may still be applied (the contract says so).
- kazoo's three states are already ours: ``session_state`` maps them, the only place that does.
- Driver exceptions become coordination errors in ``map_errors`` and nowhere else.
- A connection built with ``final_loss=True`` (a barnabas Session) treats LOST as the end: kazoo
  would open a fresh ZooKeeper session after an expiry, but ephemeral keys belong to the old one,
  so the client is stopped instead. ``losses`` is bumped on the kazoo thread before kazoo can
  reconnect, so a commit can tell whether its reply came from the session it was meant for.
- A final connection SUSPENDED for the negotiated session timeout is LOST (Curator's rule): kazoo,
  like ZooKeeper's own client, learns of an expiry only from a server, so a client cut off from
  every server stayed SUSPENDED for as long as the cut lasted, while the servers had expired its
  session and the others had seen its ephemeral keys go. A server it can reach has surely expired
  the session by then; one that was down restarts its sessions' clocks and may still hold it, and
  then its keys go once it expires there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Connect
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from ...api import SessionState
from ...errors import CoordinationError, SessionLostError, UnavailableError

__all__ = ["KazooConnection", "map_errors", "raise_first", "session_state"]

log = logging.getLogger(__name__)

#: Longest pause between reconnect attempts (kazoo's default backs off towards an hour).
_MAX_RECONNECT_DELAY_S = 1.0


def session_state(state: str) -> SessionState:
    """kazoo's KazooState, which has exactly our three states."""
    return {
        KazooState.CONNECTED: SessionState.CONNECTED,
        KazooState.SUSPENDED: SessionState.SUSPENDED,
        KazooState.LOST: SessionState.LOST,
    }[state]


@contextlib.contextmanager
def map_errors(what: str, *, session: bool = False) -> Iterator[None]:
    """Translate kazoo's exceptions into coordination errors.

    Args:
        what: the operation, for the message.
        session: the call ran on a barnabas Session, for which an expired ZooKeeper session is
            final (SessionLostError); on the metastore's own client kazoo simply reconnects.
    """
    try:
        yield
    except SessionExpiredError as exc:  # ConnectionClosedError too: the client was stopped
        if session:
            raise SessionLostError(f"{what}: the ZooKeeper session has ended") from exc
        raise UnavailableError(f"{what}: {type(exc).__name__}") from exc
    except (ConnectionLoss, OperationTimeoutError, KazooTimeoutError, TimeoutError) as exc:
        raise UnavailableError(f"{what}: ZooKeeper not reachable ({type(exc).__name__})") from exc
    except KazooException as exc:
        raise CoordinationError(f"{what}: {type(exc).__name__}: {exc}") from exc


class _ConnectSpy(logging.LoggerAdapter[logging.Logger]):
    """kazoo keeps no copy of the negotiated session timeout but logs each ConnectResponse; read it there."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})
        self.negotiated_ms: int | None = None

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if args and isinstance(args[0], Connect):
            self.negotiated_ms = int(args[0].time_out)
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if future.done():
        return
    if result.successful():
        future.set_result(result.value)
    else:
        future.set_exception(result.exception)


class KazooConnection:
    """A started KazooClient, its state as seen from the loop, and calls bridged to asyncio."""

    def __init__(self, hosts: str, timeout_s: float, op_timeout_s: float, *, final_loss: bool) -> None:
        self._loop = asyncio.get_running_loop()
        self._spy = _ConnectSpy(logging.getLogger("kazoo.client"))
        self.client = KazooClient(
            hosts=hosts,
            timeout=timeout_s,
            logger=self._spy,
            connection_retry=KazooRetry(
                max_tries=-1, delay=0.05, backoff=2, max_delay=min(_MAX_RECONNECT_DELAY_S, timeout_s / 4)
            ),
        )
        self.requested_timeout_s = timeout_s
        self.op_timeout_s = op_timeout_s
        self.final_loss = final_loss
        self.state = SessionState.SUSPENDED  # not connected yet
        self.losses = 0  # LOST notifications seen on the kazoo thread
        self.listeners: list[Callable[[SessionState], None]] = []
        self._changed = asyncio.Event()
        self._stopping: asyncio.Task[None] | None = None
        #: Declares a final connection LOST once SUSPENDED for the session timeout (see the rules).
        self._expiry: asyncio.TimerHandle | None = None
        #: The ZooKeeper session last connected (kazoo forgets it when the connection drops).
        self._connected_session = 0
        self.client.add_listener(self._on_kazoo_state)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and wait for the ZooKeeper session.

        Raises:
            UnavailableError: no server answered within ``op_timeout_s``.
        """
        await asyncio.to_thread(self.client.start_async)
        try:
            await self.wait_connected(self._loop.time() + self.op_timeout_s)
        except CoordinationError:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close the ZooKeeper session (its ephemerals go at once if a server is reachable)."""
        if self._stopping is None:
            self._stopping = self._loop.create_task(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        try:
            await asyncio.to_thread(self.client.stop)
            await asyncio.to_thread(self.client.close)
        except Exception:  # e.g. WriterNotClosedException: the connection thread would not end
            log.exception("stopping the ZooKeeper client")
        self._deliver(SessionState.LOST)

    @property
    def stopped(self) -> bool:
        return self._stopping is not None

    @property
    def session_id(self) -> int | None:
        client_id = self.client.client_id
        return int(client_id[0]) if client_id else None

    @property
    def negotiated_timeout_s(self) -> float:
        """The session timeout the server granted (it clamps into [2, 20] ticks by default)."""
        ms = self._spy.negotiated_ms
        return ms / 1000 if ms else self.requested_timeout_s

    # -- states ----------------------------------------------------------------------------

    def _on_kazoo_state(self, kazoo_state: str) -> None:
        """kazoo's listener, on a kazoo thread: count losses now, deliver on the loop."""
        state = session_state(kazoo_state)
        if state is SessionState.LOST:
            self.losses += 1
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            self._loop.call_soon_threadsafe(self._deliver, state)

    def _deliver(self, state: SessionState) -> None:
        if state is self.state or (self.final_loss and self.state is SessionState.LOST):
            return
        self.state = state
        self._time_expiry(state)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if state is SessionState.LOST and self.final_loss and self._stopping is None:
            self._stopping = self._loop.create_task(self._stop())
        for listener in list(self.listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener %r failed", listener)

    def _time_expiry(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._connected_session = self.session_id or self._connected_session
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if state is SessionState.SUSPENDED and self.final_loss:
            self._expiry = self._loop.call_later(self.negotiated_timeout_s, self._expired_by_clock)

    def _expired_by_clock(self) -> None:
        self._expiry = None
        if self.state is not SessionState.SUSPENDED:
            return
        log.warning(
            "no ZooKeeper server reached for the session timeout (%.1f s): session 0x%x counts as expired",
            self.negotiated_timeout_s, self._connected_session,
        )  # fmt: skip
        self.losses += 1
        self._deliver(SessionState.LOST)

    async def wait_connected(self, deadline: float | None) -> None:
        """Wait until the state is CONNECTED.

        Args:
            deadline: loop time to give up at; None waits as long as it takes.

        Raises:
            SessionLostError: a final connection is LOST.
            UnavailableError: still not connected at ``deadline``, or the client is stopped.
        """
        while self.state is not SessionState.CONNECTED:
            if self.final_loss and self.state is SessionState.LOST:
                raise SessionLostError("the ZooKeeper session has ended")
            if self._stopping is not None:
                raise UnavailableError("the ZooKeeper client is closed")
            remaining = None if deadline is None else deadline - self._loop.time()
            if remaining is not None and remaining <= 0:
                raise UnavailableError(f"ZooKeeper not reachable at {self.client.hosts} for {self.op_timeout_s} s")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()

    # -- calls -----------------------------------------------------------------------------

    async def call(self, what: str, *submits: Callable[[], Any], session: bool = False) -> list[Any]:
        """Submit requests in order once connected and return their results (exceptions as values).

        Args:
            what: the operation, for error messages.
            submits: zero-argument functions each returning a kazoo ``IAsyncResult``.
            session: errors are those of a barnabas Session (see ``map_errors``).

        Raises:
            UnavailableError: not connected, or no replies, within ``op_timeout_s``.
            SessionLostError: ``session`` and the ZooKeeper session has ended.
        """
        deadline = self._loop.time() + self.op_timeout_s
        with map_errors(what, session=session):
            await self.wait_connected(deadline)
            futures = [self._bridge(submit()) for submit in submits]
        results: list[Any] = []
        try:
            async with asyncio.timeout_at(deadline):
                for future in futures:
                    try:
                        results.append(await future)
                    except Exception as exc:  # a kazoo error for this request: the caller decides
                        results.append(exc)
        except TimeoutError:
            raise UnavailableError(f"{what}: no reply from ZooKeeper within {self.op_timeout_s} s") from None
        finally:
            for future in futures:
                if not future.cancel() and not future.cancelled():
                    future.exception()  # retrieved: no "exception was never retrieved" noise
        return results

    def _bridge(self, result: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self._loop.create_future()

        def completed(done: Any) -> None:  # on a kazoo thread
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_settle, future, done)

        result.rawlink(completed)
        return future

    def watch_callback(self, on_loop: Callable[[Any], None]) -> Callable[[Any], None]:
        """A kazoo watch function that hands its WatchedEvent to ``on_loop`` on the event loop.

        Make it once and pass the same function on every read: kazoo keeps a set of watch functions
        per path, so reusing one registers it once however often the znode is re-read.
        """

        def fire(event: Any) -> None:  # on a kazoo thread
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(on_loop, event)

        return fire


def raise_first(what: str, results: Sequence[Any], *, session: bool = False) -> None:
    """Raise the first exception among ``call`` results, translated."""
    for result in results:
        if isinstance(result, BaseException):
            with map_errors(what, session=session):
                raise result
