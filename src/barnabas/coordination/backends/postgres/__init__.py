"""Coordination on PostgreSQL (``postgresql://user@host:port/db[?schema=barnabas]``), psycopg 3 async.

Rules this backend keeps (coordination.md §5; the SQL and its locking rules are in ``_sql``):

- Keys are rows of ``kv (key, value, version, session_id)``; ``version`` starts at 1 and grows by
  one per write; a delete removes the row, so a re-created key starts at 1 again.
- A commit is one round trip: the server-side function ``commit_ops`` takes the writer lock,
  verifies every check, verifies that the sessions named by puts hold a live lease, then deletes
  and upserts, in one transaction. Nothing is written unless everything holds.
- Sessions are lease rows on the server's clock (``_session``); ephemeral keys cascade from them.
  Every metastore runs a reaper that deletes expired leases, sleeping until the next lease ends
  (at most REAP_MAX_S), so a dead owner's keys go at most ttl + REAP_MAX_S after its last renewal.
- Watches are LISTEN/NOTIFY hints over a gap-free change log (``_watch``).
- Three kinds of connection, so none waits behind another: a small pool for reads, commits and
  the reaper; one for keepalives; one for LISTEN. Every call has a deadline (OP_TIMEOUT_S; a
  keepalive's is ttl/3) after which its connection is dropped.
- Errors leave through ``_connection.map_errors``: connection trouble and timeouts are
  UnavailableError (a commit may then have been applied), failed checks VersionConflictError and
  its subclasses, an ended lease SessionLostError.
- The schema (``barnabas`` by default) and its objects are created on first use; PostgreSQL ≥ 14.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from ...api import Check, Delete, Op, Put, SessionState, Versioned, WatchEvent, check_ops_covered
from ...errors import (
    CoordinationError,
    KeyExistsError,
    NoSuchKeyError,
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from . import _sql
from ._connection import Conn, ConnectSpec, Pool, map_errors, parse_url
from ._session import PostgresSession
from ._watch import ChangeFeed

__all__ = ["PostgresMetastore", "PostgresSession", "open_backend"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_Rows = list[tuple[Any, ...]]  # a module alias: the class defines ``list``

#: Deadline of every read, commit and session call (connecting and waiting for the pool included).
OP_TIMEOUT_S = 10.0
#: Connections for reads, commits and the reaper.
POOL_SIZE = 4
#: Bounds of the reaper's sleep between passes.
REAP_MIN_S = 0.02
REAP_MAX_S = 0.5


async def open_backend(url: str) -> PostgresMetastore:
    """Connect, create the schema if needed, and start the reaper.

    Raises:
        ValueError: the URL is malformed.
        UnavailableError: the server cannot be reached.
    """
    metastore = PostgresMetastore(parse_url(url))
    try:
        await metastore._ensure_schema()
    except BaseException:
        await metastore.close()
        raise
    metastore._start_reaper()
    return metastore


def _prefix_end(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (None: no such string)."""
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            following = last + 1 if not 0xD800 <= last + 1 <= 0xDFFF else 0xE000
            return prefix[:-1] + chr(following)
        prefix = prefix[:-1]
    return None


class PostgresMetastore:
    """The Metastore contract on one schema of a PostgreSQL database."""

    def __init__(self, spec: ConnectSpec) -> None:
        self._spec = spec
        self._pool = Pool(spec, POOL_SIZE)
        self._keepalive_pool = Pool(spec, 1)
        self._feed = ChangeFeed(spec, OP_TIMEOUT_S)
        self._sessions: set[PostgresSession] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def url(self) -> str:
        return self._spec.url

    @property
    def schema(self) -> str:
        return self._spec.schema

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, what: str, work: Callable[[Conn], Awaitable[T]], *, idempotent: bool = False) -> T:
        with map_errors(what):
            return await self._pool.run(work, OP_TIMEOUT_S, idempotent=idempotent)

    async def _call(self, what: str, work: Callable[[Conn], Awaitable[T]], *, idempotent: bool = False) -> T:
        if self._closed:
            raise UnavailableError("the metastore is closed")
        return await self._run(what, work, idempotent=idempotent)

    async def _ensure_schema(self) -> None:
        """Create the schema and its objects unless a current version of them is there."""

        async def work(conn: Conn) -> None:
            try:
                cursor = await conn.execute(_sql.SELECT_SCHEMA_VERSION)
                row = await cursor.fetchone()
                if row is not None and int(row[0]) >= _sql.SCHEMA_VERSION:
                    return
            except psycopg.errors.UndefinedTable:
                pass
            async with conn.transaction():
                await conn.execute(_sql.LOCK_DDL, (self._spec.schema,))
                await conn.execute(sql.SQL(_sql.CREATE_SCHEMA).format(schema=sql.Identifier(self._spec.schema)))
                for statement in _sql.DDL:
                    await conn.execute(statement)

        await self._run(f"create schema {self._spec.schema!r}", work, idempotent=True)

    # -- reads ------------------------------------------------------------------------------

    async def get(self, key: str) -> Versioned | None:
        async def work(conn: Conn) -> tuple[Any, ...] | None:
            cursor = await conn.execute(_sql.SELECT_KEY, (key,))
            return await cursor.fetchone()

        row = await self._call(f"get {key!r}", work, idempotent=True)
        return None if row is None else Versioned(bytes(row[0]), int(row[1]), row[2])

    async def list(self, prefix: str) -> dict[str, Versioned]:
        end = _prefix_end(prefix)

        async def work(conn: Conn) -> _Rows:
            if end is None:
                cursor = await conn.execute(_sql.SELECT_FROM, (prefix,))
            else:
                cursor = await conn.execute(_sql.SELECT_RANGE, (prefix, end))
            return await cursor.fetchall()

        rows = await self._call(f"list {prefix!r}", work, idempotent=True)
        return {key: Versioned(bytes(value), int(version), session) for key, value, version, session in rows}

    # -- writes -----------------------------------------------------------------------------

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        by_key = check_ops_covered(checks, ops)
        puts = [op for op in ops if isinstance(op, Put)]
        sessions: dict[str, PostgresSession] = {}
        for put in puts:
            if put.session is None:
                continue
            if not isinstance(put.session, PostgresSession):
                raise ValueError(f"Put of {put.key!r} names a session of another backend: {put.session!r}")
            if put.session.state is SessionState.LOST:
                raise SessionLostError(f"session {put.session.id} has ended")
            if put.session not in self._sessions:
                raise ValueError(f"Put of {put.key!r}: session {put.session.id} was not opened by this metastore")
            sessions[put.session.id] = put.session
        params = (
            [check.key for check in checks],
            [check.version for check in checks],
            [put.key for put in puts],
            [bytes(put.value) for put in puts],
            [put.session.id if put.session is not None else None for put in puts],
            [op.key for op in ops if isinstance(op, Delete)],
        )

        async def work(conn: Conn) -> _Rows:
            cursor = await conn.execute(_sql.COMMIT_OPS, params)
            return await cursor.fetchall()

        rows = await self._call("commit", work)
        versions: dict[str, int] = {}
        for key, version, failure in rows:
            if failure is not None:
                raise self._failure(str(key), int(version), str(failure), by_key, sessions)
            versions[str(key)] = int(version)
        return versions

    @staticmethod
    def _failure(
        key: str, found: int, failure: str, by_key: dict[str, Check], sessions: dict[str, PostgresSession]
    ) -> CoordinationError:
        """The error for a failed commit, as ``commit_ops`` reported it."""
        if failure == "absent":
            return NoSuchKeyError(key)
        if failure == "exists":
            return KeyExistsError(key)
        if failure == "version":
            return VersionConflictError(key, f"{key}: version is {found}, expected {by_key[key].version}")
        if failure == "session":
            if key in sessions:
                sessions[key]._mark_ended()
            return SessionLostError(f"session {key} has ended")
        return CoordinationError(f"commit failed on {key!r}: {failure}")

    # -- sessions ---------------------------------------------------------------------------

    async def open_session(self, ttl_s: float) -> PostgresSession:
        if not ttl_s > 0:
            raise ValueError(f"session TTL must be positive, not {ttl_s!r}")
        session_id = uuid.uuid4().hex

        async def work(conn: Conn) -> float:
            sent = time.monotonic()  # of the attempt that opened it: the server starts the lease after this
            await conn.execute(_sql.OPEN_SESSION, {"id": session_id, "ttl": float(ttl_s)})
            return sent

        sent = await self._call("open session", work)
        session = PostgresSession(self, session_id, float(ttl_s), sent, time.monotonic())
        self._sessions.add(session)
        return session

    async def _renew_session(self, session_id: str, timeout_s: float) -> float | None:
        """Extend the lease: when (``time.monotonic``) the renewal that did it was sent, or None if the
        lease had already ended (never revived).
        """

        async def work(conn: Conn) -> float | None:
            sent = time.monotonic()  # the server renews after this, never before
            cursor = await conn.execute(_sql.RENEW_SESSION, (session_id,))
            return sent if await cursor.fetchone() is not None else None

        with map_errors(f"renew session {session_id}"):
            return await self._keepalive_pool.run(work, timeout_s)

    async def _end_session(self, session_id: str, timeout_s: float) -> None:
        """Delete the lease and its keys (a lease the server cannot end within its TTL ends anyway)."""

        async def work(conn: Conn) -> None:
            await conn.execute(_sql.END_SESSION, (session_id,))

        with map_errors(f"end session {session_id}"):
            await self._pool.run(work, min(timeout_s, OP_TIMEOUT_S))

    def _forget_session(self, session: PostgresSession) -> None:
        self._sessions.discard(session)

    def _start_reaper(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="postgres session reaper")

    async def _reap(self) -> None:
        """Delete expired leases (any client's), then sleep until the next one may expire."""

        async def work(conn: Conn) -> float | None:
            cursor = await conn.execute(_sql.REAP_SESSIONS)
            row = await cursor.fetchone()
            return None if row is None or row[0] is None else float(row[0])

        while True:
            try:
                next_expiry = await self._run("reap sessions", work)
            except CoordinationError as exc:
                log.debug("coordination reaper: %s", exc)
                next_expiry = None
            delay = REAP_MAX_S if next_expiry is None else next_expiry + 0.005
            await asyncio.sleep(min(max(delay, REAP_MIN_S), REAP_MAX_S))

    # -- watches ----------------------------------------------------------------------------

    async def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        if self._closed:
            raise UnavailableError("the metastore is closed")
        watcher = self._feed.subscribe(prefix)
        try:
            await self._feed.wait_connected(OP_TIMEOUT_S)
            while (event := await watcher.next_event()) is not None:
                yield event
        finally:
            self._feed.unsubscribe(watcher)

    # -- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        """End this metastore's sessions (their keys go now), stop its tasks, close connections."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(session.close() for session in list(self._sessions)), return_exceptions=True)
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.wait({self._reaper})
        await self._feed.close()
        await self._pool.close()
        await self._keepalive_pool.close()
