"""The PostgreSQL backend's own cases, against real PostgreSQL 15 servers.

What every backend must do (keys, sessions, watches, outages) is the shared contract's
(barnabas.coordination.testing.contract and .outages, run by test_contract.py); here are only
PostgreSQL's: NUL in text, a database defaulting to REPEATABLE READ, a crash in the middle of a
concurrent history, schemas as namespaces, leases ended by SQL, and a pruned change log.

One shared server for most tests (each test in its own schema); a test that kills a server gets its
own (initdb ran once; a copy starts in ~50 ms). Waits are conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

import psycopg
import pytest

from barnabas.coordination.api import (
    Changed,
    Check,
    Metastore,
    Put,
    Resync,
    Session,
    SessionState,
    Versioned,
)
from barnabas.coordination.backends.postgres import PostgresMetastore, open_backend
from barnabas.coordination.backends.postgres._connection import bounded, connect, parse_url
from barnabas.coordination.errors import (
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from barnabas.coordination.registry import open_metastore
from barnabas.coordination.storage import Storage
from barnabas.coordination.testing.linearizability import UNKNOWN, check, run_concurrent_history
from tests.contract.servers.postgres import PostgresInstall, PostgresServer
from tests.contract.support import StateLog, eventually, next_event, run_scenario

# Fixtures postgres_install and postgres_server come from tests/contract/conftest.py.

T = TypeVar("T")
TEST_TIMEOUT_S = 60.0


def run(coro: Coroutine[Any, Any, T], *servers: PostgresServer) -> T:
    return run_scenario(coro, *servers, timeout_s=TEST_TIMEOUT_S)


async def sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run SQL directly in the URL's schema (to play a second client or an operator)."""
    spec = parse_url(url)
    async with await psycopg.AsyncConnection.connect(spec.conninfo, autocommit=True) as conn:
        cursor = await conn.execute(statement, params or None)
        return await cursor.fetchall() if cursor.description else []


@pytest.fixture
def own_server(postgres_install: PostgresInstall) -> Iterator[PostgresServer]:
    """A server of this test's own, which it may stop, kill or pause."""
    server = postgres_install.server().start()
    yield server
    server.resume()
    server.stop()


# -- keys, versions, commits -------------------------------------------------------------------


def test_a_key_with_nul_is_refused(postgres_server: PostgresServer) -> None:
    """PostgreSQL text cannot hold NUL: such a key is the caller's ValueError, not a server error."""

    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        try:
            with pytest.raises(ValueError):
                await m.get("nul\x00key")
            with pytest.raises(ValueError):
                await m.commit([Check("nul\x00key", 0)], [Put("nul\x00key", b"")])
        finally:
            await m.close()

    run(scenario(), postgres_server)


async def _increment(m: Metastore, times: int) -> int:
    conflicts = 0
    for _ in range(times):
        while True:
            current = await m.get("counter")
            assert current is not None
            value = int(current.value) + 1
            try:
                await m.commit([Check("counter", current.version)], [Put("counter", str(value).encode())])
                break
            except VersionConflictError:
                conflicts += 1
    return conflicts


def test_database_default_isolation_does_not_matter(postgres_server: PostgresServer) -> None:
    """A database defaulting to REPEATABLE READ must not make checks read a snapshot older than the lock."""
    database = f"rr_{random.randrange(1 << 30)}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
        conn.execute(f"ALTER DATABASE {database} SET default_transaction_isolation = 'repeatable read'")
    url = f"postgresql://postgres@127.0.0.1:{postgres_server.port}/{database}"

    async def scenario() -> None:
        clients = [await open_backend(url) for _ in range(3)]
        try:
            await clients[0].commit([Check("counter", 0)], [Put("counter", b"0")])
            await asyncio.gather(*(_increment(m, 30) for m in clients))
            assert await clients[0].get("counter") == Versioned(b"90", 91)
        finally:
            for m in clients:
                await m.close()

    run(scenario(), postgres_server)


class _WaitOutOutages:
    """A Metastore that, after an UnavailableError, waits until the server is back before raising it.

    So each client makes one or two calls of unknown outcome per crash rather than hundreds of fast
    failures, each of which the checker would have to try at every later point of the history.
    """

    def __init__(self, inner: Metastore, back: asyncio.Event) -> None:
        self.inner = inner
        self.back = back
        self.url = inner.url

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except UnavailableError:
            await self.back.wait()
            raise

    async def get(self, key: str) -> Versioned | None:
        return await self._call(self.inner.get(key))

    async def list(self, prefix: str) -> dict[str, Versioned]:
        return await self._call(self.inner.list(prefix))

    async def commit(self, checks: Any, ops: Any) -> dict[str, int]:
        return await self._call(self.inner.commit(checks, ops))

    async def open_session(self, ttl_s: float) -> Session:
        return await self.inner.open_session(ttl_s)

    def watch(self, prefix: str) -> Any:
        return self.inner.watch(prefix)

    async def close(self) -> None:
        await self.inner.close()


def test_history_across_a_server_crash_is_linearizable(own_server: PostgresServer) -> None:
    """The server is SIGKILLed and restarted mid-run: calls in flight have unknown outcomes, none is lost."""
    url = own_server.url_for("crash")

    async def scenario() -> None:
        await (await open_backend(url)).close()
        back = asyncio.Event()
        back.set()

        async def crash_midway() -> int:
            async def busy() -> bool:
                rows = await sql(url, "SELECT count(*) FROM changes")
                return int(rows[0][0]) >= 150

            await eventually(busy, "the clients made progress", 30)
            back.clear()
            await asyncio.to_thread(own_server.kill)
            await asyncio.to_thread(own_server.start)
            back.set()
            return time.monotonic_ns()

        async def storage() -> Storage:
            return Storage(_WaitOutOutages(await open_backend(url), back))

        crash = asyncio.ensure_future(crash_midway())
        history = await run_concurrent_history(storage, clients=6, ops_per_client=300, keys=3, seed=7)
        restarted_ns = await crash
        unknown = sum(call.result is UNKNOWN for call in history.calls)
        after = sum(call.invoked_ns > restarted_ns and call.result is not UNKNOWN for call in history.calls)
        print(f"{len(history)} calls, {unknown} with unknown outcome, {after} answered after the restart")
        assert unknown > 0, "the crash hit no call"
        assert after > 0, "the clients finished before the server was back"
        started = time.monotonic()
        result = check(history)
        assert result.ok, result.explanation
        print(f"checked in {time.monotonic() - started:.2f} s")

    run(scenario(), own_server)


# -- URLs, schemas, lifecycle ------------------------------------------------------------------


def test_urls_schemas_and_closing(postgres_server: PostgresServer) -> None:
    async def scenario() -> None:
        assert parse_url(postgres_server.url).schema == "barnabas"
        for bad in ("postgresql://h/db?schema=Bad", "postgresql://h/db?schema=a-b", "postgresql://h:notaport/db"):
            with pytest.raises(ValueError):
                await open_backend(bad)

        # Both schemes through the registry; schemas are separate namespaces on one database.
        one = await open_metastore(postgres_server.url_for("iso_one"))
        two = await open_metastore(postgres_server.url_for("iso_two").replace("postgresql://", "postgres://"))
        try:
            assert isinstance(one, PostgresMetastore) and isinstance(two, PostgresMetastore)
            await one.commit([Check("k", 0)], [Put("k", b"one")])
            assert await two.get("k") is None
            await two.commit([Check("k", 0)], [Put("k", b"two")])
            assert await one.get("k") == Versioned(b"one", 1)
        finally:
            await one.close()
            await two.close()

        # Several first clients at once create the schema exactly once, without errors.
        fresh = postgres_server.url_for()
        racing = await asyncio.gather(*(open_backend(fresh) for _ in range(5)))
        for m in racing:
            await m.close()

        closed = await open_backend(postgres_server.url_for())
        await closed.close()
        await closed.close()  # idempotent
        with pytest.raises(UnavailableError):
            await closed.get("k")

    run(scenario(), postgres_server)


# -- sessions and ephemeral keys ---------------------------------------------------------------


def test_session_ended_elsewhere_is_lost(postgres_server: PostgresServer) -> None:
    """A lease that expired (here: moved into the past, as a paused owner would see) is LOST, never revived."""

    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        try:
            session = await m.open_session(1.5)
            log = StateLog(session)
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            await sql(
                m.url,
                "UPDATE sessions SET expires_at = clock_timestamp() - interval '1 s' WHERE id = %s",
                (session.id,),
            )
            # The reapers (this metastore's included) delete it; the keepalive then finds no lease.
            await eventually(lambda: _absent(m, "eph"), "ephemeral key reaped", 5)
            await log.reached(SessionState.LOST, 5)
            assert SessionState.SUSPENDED not in log.states

            # A commit naming a session the server no longer has fails and marks it LOST.
            late = await m.open_session(30.0)
            await sql(m.url, "DELETE FROM sessions WHERE id = %s", (late.id,))
            with pytest.raises(SessionLostError):
                await m.commit([Check("late", 0)], [Put("late", b"1", late)])
            assert late.state is SessionState.LOST
            assert await m.get("late") is None
        finally:
            await m.close()

    run(scenario(), postgres_server)


async def _absent(m: Metastore, key: str) -> bool:
    return await m.get(key) is None


def test_a_renewal_answered_late_is_trusted_only_from_its_sending(postgres_server: PostgresServer) -> None:
    """The server renews a lease when the renewal reaches it, so a session may count on it only from
    the renewal's sending: counted from a late answer, the session called itself CONNECTED after the
    server had expired it. Here one renewal is answered 2.5 s late (TTL 3 s) and the next ones go
    unanswered: the session must be SUSPENDED before the server's expiry, even with its event loop
    busy around that moment, and LOST only once the lease has surely ended (TTL after the late answer).
    """
    answer_delay_s = 2.5

    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        renew = m._renew_session
        answered_late = asyncio.Event()
        answered_at = 0.0
        server_expiry = 0.0

        async def late_then_unanswered(session_id: str, timeout_s: float) -> float | None:
            nonlocal answered_at, server_expiry
            if answered_late.is_set():
                await asyncio.sleep(timeout_s)  # no answer at all, for as long as the caller waits
                raise UnavailableError("no answer")
            sent = await renew(session_id, timeout_s)
            rows = await sql(
                m.url,
                "SELECT extract(epoch FROM expires_at - clock_timestamp()) FROM sessions WHERE id = %s",
                (session_id,),
            )
            server_expiry = time.monotonic() + float(rows[0][0])
            await asyncio.sleep(answer_delay_s)
            answered_at = time.monotonic()
            answered_late.set()
            return sent

        try:
            session = await m.open_session(3.0)
            log = StateLog(session)
            m._renew_session = late_then_unanswered  # type: ignore[method-assign]
            await asyncio.wait_for(answered_late.wait(), 10)
            # The event loop busy from 30 ms before the server's expiry to 20 ms after it, as a loaded
            # broker's is: a doubt timed for the lease's very end would run only after the expiry.
            asyncio.get_running_loop().call_later(server_expiry - 0.03 - time.monotonic(), time.sleep, 0.05)
            await eventually(lambda: session.state is SessionState.LOST, "LOST", 10)
            doubted = log.first_after(answered_at, SessionState.SUSPENDED)
            assert doubted <= server_expiry, f"CONNECTED {doubted - server_expiry:.2f} s past the server's expiry"
            lost = log.first_after(answered_at, SessionState.LOST)
            assert lost >= answered_at + session.ttl_s - 0.05, f"LOST {answered_at + session.ttl_s - lost:.2f} s early"
        finally:
            await m.close()

    run(scenario(), postgres_server)


def test_a_session_opened_across_a_server_pause_is_kept(own_server: PostgresServer) -> None:
    """An open statement sent while the server is frozen past the TTL starts the lease only when the
    server thaws: the session must then renew and be CONNECTED, never LOST (counted from the sending
    alone, it was born expired and lost at its first keepalive).
    """

    async def scenario() -> None:
        m = await open_backend(own_server.url_for())
        try:
            assert await m.get("owned") is None  # a connection open and idle: the open is sent at once
            own_server.pause()
            opening = asyncio.create_task(m.open_session(1.0))
            await asyncio.sleep(1.5)  # the freeze outlasts the TTL
            own_server.resume()
            session = await asyncio.wait_for(opening, 10)
            log = StateLog(session)
            await eventually(lambda: session.state is SessionState.CONNECTED, "CONNECTED", 5)
            await m.commit([Check("owned", 0)], [Put("owned", b"x", session)])
            await asyncio.sleep(2 * session.ttl_s)  # two TTLs of keepalives: the lease must hold through them
            assert SessionState.LOST not in log.states and session.state is SessionState.CONNECTED, log.states
            assert (await m.get("owned")) is not None
        finally:
            own_server.resume()
            await m.close()

    run(scenario(), own_server)


# -- watches -----------------------------------------------------------------------------------


def test_watch_resyncs_when_the_change_log_was_pruned(postgres_server: PostgresServer) -> None:
    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        watch = m.watch("")
        try:
            assert await next_event(watch) == Resync()
            # In one transaction: a change, its log row pruned, another change. The feed finds a gap.
            spec = parse_url(m.url)
            async with await psycopg.AsyncConnection.connect(spec.conninfo) as conn:
                await conn.execute("INSERT INTO kv (key, value, version) VALUES ('p/1', 'x', 1)")
                await conn.execute("DELETE FROM changes WHERE rev = (SELECT max(rev) FROM changes)")
                await conn.execute("INSERT INTO kv (key, value, version) VALUES ('p/2', 'x', 1)")
                await conn.commit()
            assert await next_event(watch) == Resync()
            await m.commit([Check("p/3", 0)], [Put("p/3", b"x")])
            assert await next_event(watch) == Changed(frozenset({"p/3"}))
        finally:
            await watch.aclose()
            await m.close()

    run(scenario(), postgres_server)


# -- connections -------------------------------------------------------------------------------


def test_a_call_given_up_on_keeps_its_socket_until_it_lets_go(postgres_server: PostgresServer) -> None:
    """A call past its deadline is abandoned, but its socket stays open until the call has left the event loop.

    Closing it at once (as ``bounded`` did) freed the descriptor while the call's reader was still
    registered on it: the next socket given that number lost its own registration to the call's
    cleanup, and under uvloop, the broker's loop, libuv aborted the process (SIGABRT in
    ``uv__epoll_ctl_flush``). Found by pausing PostgreSQL under a 3-broker workload
    (tests/fault/test_coordination_server_faults.py): a broker died in one pause in five to ten. Here a
    socket opened right after the deadline, as a broker opens them all the time, must be served.
    """

    async def scenario() -> None:
        conn = await connect(parse_url(postgres_server.url_for()))
        with pytest.raises(TimeoutError):
            await bounded(conn, lambda c: c.execute("SELECT pg_sleep(10)"), 0.2)
        reader, writer = socket.socketpair()
        woke = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            loop.add_reader(reader, woke.set)
            await eventually(lambda: conn.closed, "the abandoned call let go of its connection", 5)
            writer.send(b"x")
            async with asyncio.timeout(5):
                await woke.wait()
        finally:
            loop.remove_reader(reader)
            reader.close()
            writer.close()

    run(scenario(), postgres_server)
