"""Watches for the PostgreSQL backend: one LISTEN connection per metastore feeding every watcher.

Rules this module keeps:

- NOTIFY only says "something committed"; what changed is read from the ``changes`` log after the
  last revision seen. Revisions are gap-free and commit in order (see ``_sql``), so reading
  ``rev > last`` never skips a commit, and a first row other than ``last + 1`` means the log was
  pruned past us: that, and every (re)connect, becomes a Resync for every watcher.
- ``LISTEN`` runs before the current revision is read, so a commit is either included in that
  revision (the Resync covers it) or notified afterwards.
- The LISTEN connection is dedicated: a running ``notifies()`` holds the connection's lock
  (psycopg#340), so it is only ever awaited with a timeout, between reads of the log, never
  concurrently with them. Notifications arriving during a read wait in psycopg's backlog.
- The log is read at least every POLL_S even without a notification: a probe of the connection
  (a paused server is noticed) and a backstop, not the delivery path.
- Watchers coalesce: a slow consumer gets one Changed with every key since its last event, or a
  single Resync, never an unbounded queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from psycopg import sql

from ...api import Changed, Resync, WatchEvent
from ...errors import CoordinationError, UnavailableError
from . import _sql
from ._connection import Conn, ConnectSpec, bounded, close_quietly, connect, map_errors

__all__ = ["ChangeFeed", "Watcher"]

log = logging.getLogger(__name__)

#: Seconds between reads of the change log when no notification arrives.
POLL_S = 5.0
#: Change-log rows read per query.
BATCH = 1000
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0


class Watcher:
    """One ``watch(prefix)``: pending keys or a pending Resync, and a wake-up for its consumer."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._keys: set[str] = set()
        self._resync = True  # every watch starts with a Resync
        self._closed = False
        self._wakeup = asyncio.Event()

    def changed(self, keys: Iterable[str]) -> None:
        matched = {key for key in keys if key.startswith(self.prefix)}
        if matched:
            self._keys |= matched
            self._wakeup.set()

    def resync(self) -> None:
        self._resync = True
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def next_event(self) -> WatchEvent | None:
        """The next event, waiting for one; None once the feed is closed."""
        while not self._closed:
            if self._resync:
                self._resync = False
                self._keys.clear()
                return Resync()
            if self._keys:
                keys, self._keys = frozenset(self._keys), set()
                return Changed(keys)
            self._wakeup.clear()
            await self._wakeup.wait()
        return None


class ChangeFeed:
    """Reads the change log on notification and hands the keys to every watcher."""

    def __init__(self, spec: ConnectSpec, timeout_s: float) -> None:
        self._spec = spec
        self._timeout_s = timeout_s
        self._watchers: set[Watcher] = set()
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_rev = 0
        self._closed = False

    def subscribe(self, prefix: str) -> Watcher:
        """A new watcher (its first event is a Resync); starts the feed on first use."""
        if self._closed:
            raise UnavailableError("the metastore is closed")
        watcher = Watcher(prefix)
        self._watchers.add(watcher)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="postgres change feed")
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    async def wait_connected(self, timeout_s: float) -> bool:
        """Wait (bounded) until LISTEN is in place, so a new watcher's first Resync is its only one."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._connected.wait()
        return self._connected.is_set()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        for watcher in list(self._watchers):
            watcher.close()
        self._watchers.clear()

    async def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while True:
            conn: Conn | None = None
            try:
                with map_errors("watch"):
                    async with asyncio.timeout(self._timeout_s):
                        conn = await connect(self._spec)
                    await bounded(conn, self._listen, self._timeout_s)
                self._connected.set()
                for watcher in list(self._watchers):
                    watcher.resync()
                backoff = BACKOFF_MIN_S
                while True:
                    with map_errors("watch"):
                        async for _ in conn.notifies(timeout=POLL_S, stop_after=1):
                            pass
                        await bounded(conn, self._read_changes, self._timeout_s)
            except CoordinationError as exc:
                # Loud once per outage, quiet for the retries that follow.
                level = logging.INFO if self._connected.is_set() or backoff == BACKOFF_MIN_S else logging.DEBUG
                log.log(level, "coordination watch connection: %s; reconnecting", exc)
            finally:
                self._connected.clear()
                if conn is not None:
                    await close_quietly(conn)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _listen(self, conn: Conn) -> None:
        await conn.execute(sql.SQL(_sql.LISTEN).format(schema=sql.Identifier(self._spec.schema)))
        cursor = await conn.execute(_sql.SELECT_REV)
        row = await cursor.fetchone()
        if row is None:
            raise CoordinationError(f"schema {self._spec.schema!r} has no revision row")
        self._last_rev = int(row[0])

    async def _read_changes(self, conn: Conn) -> None:
        while True:
            cursor = await conn.execute(_sql.SELECT_CHANGES, (self._last_rev, BATCH))
            rows = await cursor.fetchall()
            if not rows:
                return
            if int(rows[0][0]) != self._last_rev + 1:
                log.info("coordination change log pruned past revision %d; watchers resync", self._last_rev)
                for watcher in list(self._watchers):
                    watcher.resync()
            else:
                keys = {str(key) for _, key in rows}
                for watcher in list(self._watchers):
                    watcher.changed(keys)
            self._last_rev = int(rows[-1][0])
            if len(rows) < BATCH:
                return
