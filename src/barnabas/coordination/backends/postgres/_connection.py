"""Connections for the PostgreSQL backend: URL parsing, error mapping, a small pool, bounded calls.

Rules this module keeps:

- The URL is libpq's (``postgresql://user@host:port/db?...``) plus ``schema=`` (ours, removed before
  libpq sees it). Unless the URL says otherwise, connections get TCP keepalives and
  ``tcp_user_timeout`` (a dead peer is noticed in seconds, not hours: coordination.md §5) and a
  ``connect_timeout``.
- Every connection is autocommit and READ COMMITTED: each statement (or server-side function) is
  its own transaction, so nothing is ever left idle in a transaction holding the writer lock.
- psycopg's errors become coordination errors in one place, :func:`map_errors`.
- Every call has a deadline. When it passes, the connection's socket is shut down, so the call
  fails at once (psycopg would otherwise spend up to 10 s cancelling the query on a server that
  may be paused, and the caller, a keepalive deciding SUSPENDED, cannot wait that long); the
  descriptor is closed only once the call has let go of it: never under the event loop's watch.
- Idle pooled connections are checked without a round trip before reuse (``PQconsumeInput`` sees
  the EOF a restarted server left behind), so a restart costs no spurious failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import pq

from ...errors import CoordinationError, UnavailableError

__all__ = ["Conn", "ConnectSpec", "Pool", "bounded", "close_quietly", "connect", "map_errors", "parse_url"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Conn = psycopg.AsyncConnection[tuple[Any, ...]]

DEFAULT_SCHEMA = "barnabas"
#: How long a call given up on may take to let go of its shut-down socket before it is left to end alone.
LET_GO_S = 0.5
#: Lower-case identifiers only: the name is used unquoted in ``search_path`` and quoted in DDL,
#: which agree only when no case folding is involved.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: libpq parameters we set unless the URL does (TCP ones are ignored on unix sockets).
_DEFAULT_PARAMS: dict[str, str] = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "application_name": "barnabas-coordination",
}


@dataclass(frozen=True)
class ConnectSpec:
    """Where and how to connect: a libpq conninfo string (schema in ``options``) and the schema name."""

    url: str
    schema: str
    conninfo: str = field(repr=False)


def parse_url(url: str) -> ConnectSpec:
    """Split ``postgresql://…[?schema=name&libpq-params]`` into libpq parameters and a schema.

    Raises:
        ValueError: not a postgres URL, a bad schema name, or a malformed libpq URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a postgresql:// URL: {url!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema {schema!r} in {url!r}: use a lower-case SQL identifier ([a-z_][a-z0-9_]*)")
    libpq_query = urlencode([(k, v) for k, v in query if k != "schema"], quote_via=quote)
    libpq_url = urlunsplit(parts._replace(query=libpq_query))
    try:
        params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(libpq_url).items() if v is not None}
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"malformed PostgreSQL URL {url!r}: {exc}") from None
    if not all(port.isdigit() or not port for port in params.get("port", "").split(",")):
        raise ValueError(f"malformed PostgreSQL URL {url!r}: bad port {params['port']!r}")
    for key, value in _DEFAULT_PARAMS.items():
        params.setdefault(key, value)
    # READ COMMITTED whatever the database's default: commit_ops relies on each statement after
    # the writer lock seeing every earlier commit (a REPEATABLE READ snapshot would predate it).
    ours = f"-c search_path={schema} -c default_transaction_isolation=read\\ committed"
    params["options"] = f"{params['options']} {ours}" if params.get("options") else ours
    return ConnectSpec(url=url, schema=schema, conninfo=psycopg.conninfo.make_conninfo("", **params))


@contextlib.contextmanager
def map_errors(what: str) -> Iterator[None]:
    """Translate psycopg's exceptions into the coordination errors (the one place that does)."""
    try:
        yield
    except TimeoutError as exc:
        raise UnavailableError(f"{what}: timed out") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        # Connection refused/lost, server shutting down, query cancelled, serialization failures.
        raise UnavailableError(f"{what}: {exc}") from exc
    except psycopg.DataError as exc:
        # e.g. a key or prefix containing NUL, which PostgreSQL text cannot hold.
        raise ValueError(f"{what}: {exc}") from exc
    except psycopg.Error as exc:
        raise CoordinationError(f"{what}: {exc}") from exc
    except OSError as exc:
        raise UnavailableError(f"{what}: {exc}") from exc


async def connect(spec: ConnectSpec) -> Conn:
    """A new autocommit connection (raises psycopg errors; callers map them)."""
    conn: Conn = await psycopg.AsyncConnection.connect(spec.conninfo, autocommit=True)
    return conn


async def close_quietly(conn: Conn) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


def _shut_down(fd: int) -> None:
    """shutdown(2) a socket whose descriptor this module does not own (a duplicate is shut down, then closed)."""
    with socket.socket(fileno=os.dup(fd)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)


def _finish_after(conn: Conn, task: asyncio.Task[Any]) -> None:
    """Close ``conn`` once ``task`` has ended (its outcome is collected, unobserved)."""
    conn.pgconn.finish()
    if not task.cancelled():
        task.exception()


async def _abandon(conn: Conn, task: asyncio.Task[Any]) -> None:
    """Give up on a hung call: shut its socket down, wait until the call has let go of it, close ``conn``.

    The call sees its connection end (psycopg raises OperationalError) and removes its reader from
    the event loop; only then is the descriptor closed. Closed at once, its number could go to the
    next socket opened while the call's reader was still registered on it: that socket's events went
    astray, and uvloop aborted the process (libuv's uv__epoll_ctl_flush). Cancelling the call instead
    would make psycopg cancel the query server-side and wait up to 5 s more for a server that may be
    paused. A call that has not let go after LET_GO_S is left to end by itself, closed when it does.
    """
    task.add_done_callback(lambda done: _finish_after(conn, done))
    with contextlib.suppress(OSError, psycopg.Error):  # already closed or broken: nothing to shut down
        _shut_down(conn.pgconn.socket)
    await asyncio.wait({task}, timeout=LET_GO_S)


async def bounded(conn: Conn, work: Callable[[Conn], Awaitable[T]], timeout_s: float) -> T:
    """Run ``work(conn)``; on timeout or cancellation end its connection (``_abandon``) and raise.

    Raises:
        TimeoutError: ``work`` did not finish in ``timeout_s`` (``conn`` is closed, or will be as
            soon as ``work`` lets go of it).
    """
    task = asyncio.ensure_future(work(conn))
    try:
        done, _ = await asyncio.wait({task}, timeout=max(timeout_s, 0.0))
    except asyncio.CancelledError:
        await _abandon(conn, task)
        raise
    if not done:
        await _abandon(conn, task)
        raise TimeoutError(f"no answer in {timeout_s:.1f} s")
    return task.result()


def _usable(conn: Conn) -> bool:
    """Idle, open, and the server has not hung up since (checked without a round trip)."""
    if conn.closed or conn.broken or conn.info.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        conn.pgconn.consume_input()
    except psycopg.OperationalError:
        return False
    return conn.pgconn.status == pq.ConnStatus.OK


class Pool:
    """At most ``size`` connections, made on demand and reused while healthy."""

    def __init__(self, spec: ConnectSpec, size: int) -> None:
        self.spec = spec
        self._idle: list[Conn] = []
        self._slots = asyncio.Semaphore(size)
        self._closed = False

    async def run(self, work: Callable[[Conn], Awaitable[T]], timeout_s: float, *, idempotent: bool = False) -> T:
        """Run ``work`` on a pooled connection, everything (waiting included) within ``timeout_s``.

        ``idempotent`` work that fails on a reused connection is retried once on a fresh one.

        Raises:
            TimeoutError, psycopg.Error: as the work or the connect raised them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with asyncio.timeout(timeout_s):
            await self._slots.acquire()
        try:
            attempts = 2 if idempotent else 1
            while True:
                attempts -= 1
                conn, reused = self._take_idle(), True
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        conn, reused = await connect(self.spec), False
                try:
                    result = await bounded(conn, work, deadline - loop.time())
                except psycopg.OperationalError:
                    await close_quietly(conn)
                    if reused and attempts > 0:
                        continue
                    raise
                except BaseException:
                    if not _usable(conn):
                        await close_quietly(conn)
                    else:
                        self._give_back(conn)
                    raise
                self._give_back(conn)
                return result
        finally:
            self._slots.release()

    def _take_idle(self) -> Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if _usable(conn):
                return conn
            conn.pgconn.finish()
        return None

    def _give_back(self, conn: Conn) -> None:
        if self._closed or not _usable(conn):
            conn.pgconn.finish()
        else:
            self._idle.append(conn)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await close_quietly(conn)
