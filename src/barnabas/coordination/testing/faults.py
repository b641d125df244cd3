"""A Metastore wrapper that injects latency and failures, as one client would see them.

kazoo's ``harness.py`` (``lose_connection``, ``expire_session``) and Pulsar's fault-injecting
metadata store, over the api.py contract. Wrap any backend, hand the wrapper to the code under
test, and drive the controls from the test:

- ``delay(seconds, ops)``: the chosen operations wait that long before reaching the backend.
- ``fail(ops, count, applied=False)``: the chosen operations raise UnavailableError, ``count``
  times or until ``heal()``; with ``applied`` they reach the backend first and only the answer is
  lost (the ambiguous outcome api.py warns about).
- ``partition()``: every operation raises UnavailableError, one in flight raises it when its
  answer comes back (applied or not), a new watch raises it on its first iteration, open watches
  go silent, and sessions are SUSPENDED. ``heal()`` removes every fault and delay: open watches
  yield ``Resync()`` and sessions whose lease still holds are CONNECTED again.
- ``drop_watch_events()``: events reaching open watches are dropped as they arrive (counted in
  ``dropped_events``, which tests can wait on); after ``heal()`` each watch yields ``Resync()``,
  so a consumer that re-reads on Resync converges. Operations keep working.
- ``expire(session)``: the lease ends as if its TTL ran out: the backend session is closed (its
  ephemeral keys go, for everyone), then the wrapper session becomes LOST.

What it cannot simulate: anything the server side does. Other clients of the same backend are
unaffected, a partition never expires a lease by itself (call ``expire``), the backend's own
retries and reconnects are not exercised, and ordering or loss inside a real network is not
modelled; for those, fault the server (SIGKILL, SIGSTOP, network namespaces).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

from ..api import Check, Metastore, Op, Put, Resync, Session, SessionState, Versioned, WatchEvent
from ..backends._session import SessionBase
from ..errors import SessionLostError, UnavailableError

__all__ = ["ALL_OPS", "FaultyMetastore", "FaultySession", "OpName"]

T = TypeVar("T")

OpName = Literal["get", "list", "commit", "open_session", "watch"]
ALL_OPS: frozenset[OpName] = frozenset(get_args(OpName))


@dataclass(slots=True)
class _Failure:
    remaining: int | None  # None: until heal()
    applied: bool


class _Signal(enum.Enum):
    HEALED = "healed"  # the connection is back: the watch must resync
    ENDED = "ended"  # the backend's watch ended


_Item = WatchEvent | _Signal | Exception


class FaultySession(SessionBase):
    """A backend session seen through a FaultyMetastore: SUSPENDED while partitioned, LOST when expired."""

    def __init__(self, inner: Session, metastore: FaultyMetastore) -> None:
        super().__init__(inner.id, inner.ttl_s)
        self.inner = inner
        self._metastore = metastore
        self._expired = False
        inner.add_state_listener(self._on_inner_state)
        self._refresh()

    def _on_inner_state(self, _: SessionState) -> None:
        self._refresh()

    def _refresh(self) -> None:
        if self._expired or self.inner.state is SessionState.LOST:
            state = SessionState.LOST
        elif self._metastore.partitioned:
            state = SessionState.SUSPENDED
        else:
            state = self.inner.state
        self._set_state(state)
        if state is SessionState.LOST:
            self.inner.remove_state_listener(self._on_inner_state)
            self._metastore._sessions.discard(self)

    async def close(self) -> None:
        await self.inner.close()
        self._refresh()


class FaultyMetastore:
    """``inner`` by delegation, with injected delays, failures, partitions and lease expiry."""

    def __init__(self, inner: Metastore) -> None:
        self.inner = inner
        self.partitioned = False
        self.dropping_watch_events = False
        #: Watch events not delivered because of a partition or drop_watch_events().
        self.dropped_events = 0
        self._delays: dict[OpName, float] = {}
        self._failures: dict[OpName, _Failure] = {}
        self._sessions: set[FaultySession] = set()
        self._watches: set[asyncio.Queue[_Item]] = set()

    @property
    def url(self) -> str:
        return self.inner.url

    # -- controls ---------------------------------------------------------------------------

    def delay(self, seconds: float, ops: Iterable[OpName] | None = None) -> None:
        """Make ``ops`` (default: all) wait ``seconds`` before reaching the backend; 0 removes it.

        Raises:
            ValueError: an unknown operation name.
        """
        for op in _ops(ops):
            if seconds > 0:
                self._delays[op] = seconds
            else:
                self._delays.pop(op, None)

    def fail(self, ops: Iterable[OpName] | None = None, count: int | None = None, *, applied: bool = False) -> None:
        """Make ``ops`` (default: all) raise UnavailableError ``count`` times (None: until heal()).

        Args:
            ops: the operations to fail (default: all of ``ALL_OPS``).
            count: how many calls of each operation fail; None until heal().
            applied: let each failing call reach the backend and lose only its answer.

        Raises:
            ValueError: an unknown operation name, or a count below 1.
        """
        if count is not None and count < 1:
            raise ValueError(f"count must be at least 1 (or None), not {count}")
        for op in _ops(ops):
            self._failures[op] = _Failure(count, applied)

    def partition(self) -> None:
        """Cut this client off: operations fail, watches go silent, sessions are SUSPENDED."""
        self.partitioned = True
        self._refresh_sessions()

    def drop_watch_events(self) -> None:
        """Stop delivering watch events until heal(), which then yields ``Resync()`` on each watch."""
        self.dropping_watch_events = True

    def heal(self) -> None:
        """Remove every injected fault and delay; open watches resync if they missed anything."""
        if self.partitioned or self.dropping_watch_events:
            for queue in self._watches:
                queue.put_nowait(_Signal.HEALED)
        self.partitioned = False
        self.dropping_watch_events = False
        self._delays.clear()
        self._failures.clear()
        self._refresh_sessions()

    async def expire(self, session: Session) -> None:
        """End ``session`` as if its lease ran out: ephemeral keys are removed, then it is LOST.

        Raises:
            ValueError: ``session`` was not opened through this wrapper.
        """
        if not isinstance(session, FaultySession) or session._metastore is not self:
            raise ValueError(f"session {session.id} was not opened through this FaultyMetastore")
        try:
            await session.inner.close()
        finally:
            session._expired = True
            session._refresh()

    def _refresh_sessions(self) -> None:
        for session in list(self._sessions):
            session._refresh()

    # -- injection --------------------------------------------------------------------------

    async def _admit(self, op: OpName) -> _Failure | None:
        """Apply the delay, then raise if ``op`` must fail before reaching the backend.

        Returns the failure to apply after the call (its answer is lost), if any.
        """
        seconds = self._delays.get(op)
        if seconds:
            await asyncio.sleep(seconds)  # injected latency, not synchronisation
        if self.partitioned:
            raise UnavailableError(f"{op}: partitioned (injected)")
        failure = self._failures.get(op)
        if failure is None:
            return None
        if failure.remaining is not None:
            failure.remaining -= 1
            if failure.remaining <= 0:
                del self._failures[op]
        if not failure.applied:
            raise UnavailableError(f"{op}: failed (injected)")
        return failure

    async def _call(
        self, op: OpName, call: Callable[[], Awaitable[T]], discard: Callable[[T], Awaitable[None]] | None = None
    ) -> T:
        failure = await self._admit(op)
        try:
            result = await call()
        except Exception as exc:
            if failure is not None or self.partitioned:  # the error never reached the caller either
                raise UnavailableError(f"{op}: the answer was lost (injected)") from exc
            raise
        if failure is not None or self.partitioned:
            if discard is not None:
                await discard(result)
            raise UnavailableError(f"{op}: applied, but the answer was lost (injected)")
        return result

    # -- the Metastore contract -------------------------------------------------------------

    async def get(self, key: str) -> Versioned | None:
        return await self._call("get", lambda: self.inner.get(key))

    async def list(self, prefix: str) -> dict[str, Versioned]:
        return await self._call("list", lambda: self.inner.list(prefix))

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        unwrapped = [_unwrap(op) for op in ops]
        return await self._call("commit", lambda: self.inner.commit(checks, unwrapped))

    async def open_session(self, ttl_s: float) -> FaultySession:
        async def close(session: Session) -> None:
            await session.close()

        inner = await self._call("open_session", lambda: self.inner.open_session(ttl_s), close)
        session = FaultySession(inner, self)
        if session.state is not SessionState.LOST:
            self._sessions.add(session)
        return session

    async def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        if await self._admit("watch") is not None:
            raise UnavailableError("watch: failed (injected)")
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        pump = asyncio.get_running_loop().create_task(self._pump(self.inner.watch(prefix), queue), name=prefix)
        self._watches.add(queue)
        try:
            while True:
                item = await queue.get()
                if item is _Signal.HEALED:
                    yield Resync()
                elif item is _Signal.ENDED:
                    return
                elif isinstance(item, Exception):
                    raise item
                else:
                    yield item
        finally:
            self._watches.discard(queue)
            pump.cancel()
            await asyncio.wait({pump})

    async def _pump(self, events: AsyncGenerator[WatchEvent, None], queue: asyncio.Queue[_Item]) -> None:
        """Move the backend's watch events into ``queue`` as they arrive, dropping them while faulted."""
        try:
            async for event in events:
                if self.partitioned or self.dropping_watch_events:
                    self.dropped_events += 1
                else:
                    queue.put_nowait(event)
            queue.put_nowait(_Signal.ENDED)
        except Exception as exc:
            queue.put_nowait(exc)
        finally:
            await events.aclose()

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            for queue in self._watches:
                queue.put_nowait(_Signal.ENDED)
            self._refresh_sessions()


def _ops(ops: Iterable[OpName] | None) -> frozenset[OpName]:
    chosen = ALL_OPS if ops is None else frozenset(ops)
    unknown = chosen - ALL_OPS
    if unknown:
        raise ValueError(f"unknown operations {sorted(unknown)}; choose from {sorted(ALL_OPS)}")
    return chosen


def _unwrap(op: Op) -> Op:
    """Hand the backend its own session object (a backend may need more than the id)."""
    if isinstance(op, Put) and isinstance(op.session, FaultySession):
        if op.session.state is SessionState.LOST:
            raise SessionLostError(f"session {op.session.id} has ended")
        return dataclasses.replace(op, session=op.session.inner)
    return op


def _typecheck(metastore: FaultyMetastore, session: FaultySession) -> tuple[Metastore, Session]:
    """mypy proves here that the wrappers meet the protocols."""
    return metastore, session
