"""The PostgreSQL backend against real PostgreSQL 15 servers.

One shared server for most tests (each test in its own schema); tests that stop, kill or pause a
server get their own (initdb ran once; a copy starts in ~50 ms). Waits are conditions with
deadlines; the only time bounds asserted are the contract's (an ephemeral key of a killed process
is gone within ttl + one keepalive interval + 1 s; a session is SUSPENDED before its lease can end).
"""

from __future__ import annotations

import asyncio
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

import psycopg
import pytest

from barnabas.coordination.api import (
    Changed,
    Check,
    Delete,
    Metastore,
    Put,
    Resync,
    Session,
    SessionState,
    Versioned,
)
from barnabas.coordination.backends.postgres import PostgresMetastore, PostgresSession, open_backend
from barnabas.coordination.backends.postgres._connection import parse_url
from barnabas.coordination.errors import (
    KeyExistsError,
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from barnabas.coordination.registry import open_metastore
from barnabas.coordination.storage import Storage
from barnabas.coordination.testing.linearizability import UNKNOWN, check, run_concurrent_history
from tests.contract.servers.postgres import PostgresInstall, PostgresServer, free_port
from tests.contract.support import StateLog, eventually, next_event, run_scenario

# Fixtures postgres_install and postgres_server come from tests/contract/conftest.py.

T = TypeVar("T")
TEST_TIMEOUT_S = 60.0


def run(coro: Coroutine[Any, Any, T], *servers: PostgresServer) -> T:
    return run_scenario(coro, *servers, timeout_s=TEST_TIMEOUT_S)


def state_of(session: Session) -> SessionState:
    """The state now (a call, so mypy does not keep an earlier narrowing of the property)."""
    return session.state


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


def test_list_is_prefix_ordered_and_bounded(postgres_server: PostgresServer) -> None:
    keys = ["t/a", "t/b/0", "t/b/1", "t/é", "t/\U0010ffff", "t/\U0010ffffz", "t", "t0", "u", "s/t/a", "T/a"]

    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        try:
            for key in keys:
                await m.commit([Check(key, 0)], [Put(key, key.encode())])
            for prefix in ("t/", "t", "t/b/", "t/\U0010ffff", "", "nothing"):
                listed = await m.list(prefix)
                expected = sorted(k for k in keys if k.startswith(prefix))
                assert list(listed) == expected, prefix
                assert all(listed[k] == Versioned(k.encode(), 1) for k in expected)
            with pytest.raises(ValueError):
                await m.get("nul\x00key")
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


def test_concurrent_creates_and_increments_are_linearizable(postgres_server: PostgresServer) -> None:
    """Racing creates: exactly one wins. Racing CAS increments from 3 clients: none is lost."""
    url = postgres_server.url_for()

    async def scenario() -> None:
        clients = [await open_backend(url) for _ in range(3)]
        try:
            for attempt in range(5):
                key = f"race/{attempt}"
                results = await asyncio.gather(
                    *(
                        m.commit([Check(key, 0)], [Put(key, str(i).encode())])
                        for i, m in enumerate(clients)
                        for _ in (0, 1)
                    ),
                    return_exceptions=True,
                )
                assert sum(1 for r in results if r == {key: 1}) == 1, results
                assert all(isinstance(r, KeyExistsError) for r in results if r != {key: 1}), results
            await clients[0].commit([Check("counter", 0)], [Put("counter", b"0")])
            await asyncio.gather(*(_increment(m, 40) for m in clients))
            final = await clients[0].get("counter")
            assert final == Versioned(b"120", 121)
        finally:
            for m in clients:
                await m.close()

    run(scenario(), postgres_server)


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


def test_concurrent_histories_are_linearizable(postgres_server: PostgresServer) -> None:
    """8 clients x 150 random Storage calls over 3 keys, checked by the shipped Porcupine-style checker."""
    url = postgres_server.url_for()

    async def scenario() -> None:
        await (await open_backend(url)).close()  # create the schema once, outside the history
        history = await run_concurrent_history(
            lambda: _storage(url), clients=8, ops_per_client=150, keys=3, seed=random.randrange(1 << 30)
        )
        assert len(history) == 8 * 150
        result = check(history)
        assert result.ok, result.explanation

    run(scenario(), postgres_server)


async def _storage(url: str) -> Storage:
    return Storage(await open_backend(url))


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


def test_urls_schemas_and_unreachable_servers(postgres_server: PostgresServer) -> None:
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

        started = time.monotonic()
        with pytest.raises(UnavailableError):
            await open_backend(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
        assert time.monotonic() - started < 5

        closed = await open_backend(postgres_server.url_for())
        await closed.close()
        await closed.close()  # idempotent
        with pytest.raises(UnavailableError):
            await closed.get("k")

    run(scenario(), postgres_server)


# -- sessions and ephemeral keys ---------------------------------------------------------------


def test_ephemeral_keys_follow_their_session(postgres_server: PostgresServer) -> None:
    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        other = await open_backend(m.url)
        try:
            session = await m.open_session(5.0)
            assert isinstance(session, PostgresSession) and isinstance(session, Session)
            log = StateLog(session)
            assert session.state is SessionState.CONNECTED and session.ttl_s == 5.0
            second = await m.open_session(5.0)
            assert session.id != second.id

            await m.commit([Check("eph", 0), Check("per", 0)], [Put("eph", b"1", session), Put("per", b"1")])
            assert await other.get("eph") == Versioned(b"1", 1, session.id)
            # A later put keeps the key's session, whatever it names.
            await m.commit([Check("eph", 1)], [Put("eph", b"2")])
            await m.commit([Check("per", 1)], [Put("per", b"2", session)])
            assert await other.get("eph") == Versioned(b"2", 2, session.id)
            assert await other.get("per") == Versioned(b"2", 2, None)
            await m.commit([Check("eph2", 0)], [Put("eph2", b"1", second)])

            await session.close()
            assert state_of(session) is SessionState.LOST and log.states == [SessionState.LOST]
            # Gone for everyone at once, the other session's key and persistent keys untouched.
            assert set(await other.list("")) == {"per", "eph2"}
            with pytest.raises(SessionLostError):
                await m.commit([Check("again", 0)], [Put("again", b"1", session)])
            await session.close()  # idempotent
        finally:
            await m.close()
        # Closing the metastore ends its remaining sessions.
        assert second.state is SessionState.LOST
        assert set(await other.list("")) == {"per"}
        await other.close()

    run(scenario(), postgres_server)


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


OWNER_SCRIPT = """
import asyncio, sys
from barnabas.coordination.api import Check, Put
from barnabas.coordination.registry import open_metastore
from barnabas.coordination.storage import Storage

async def main(url: str, key: str, ttl: float) -> None:
    metastore = await open_metastore(url)
    session = await metastore.open_session(ttl)
    await metastore.commit([Check(key, 0)], [Put(key, b"owner", session)])
    print("ready", session.id, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


def wait_for_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"owner process printed nothing in {timeout_s} s")
    return proc.stdout.readline().strip()


def test_ephemeral_key_of_killed_process_vanishes_within_ttl(postgres_server: PostgresServer) -> None:
    ttl = 1.5
    url = postgres_server.url_for()

    async def scenario() -> float:
        m = await open_backend(url)  # create the schema first; this metastore's reaper also runs
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", OWNER_SCRIPT, url, "members/owner", str(ttl)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                line = wait_for_line(proc, 30)
                assert line.startswith("ready"), f"{line!r}: {proc.communicate()[1] if proc.poll() is not None else ''}"
                owned = await m.get("members/owner")
                assert owned is not None and owned.session_id == line.split()[1]
                # Let the owner renew a few times, so the kill lands at a random point of its interval.
                await asyncio.sleep(random.uniform(ttl, 2 * ttl))
                assert await m.get("members/owner") is not None, "the key vanished while its owner lived"
                os.kill(proc.pid, signal.SIGKILL)
                killed_at = time.monotonic()
                proc.wait()
                await eventually(lambda: _absent(m, "members/owner"), "ephemeral key gone after kill -9", 10)
                return time.monotonic() - killed_at
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        finally:
            await m.close()

    elapsed = run(scenario(), postgres_server)
    print(f"ephemeral key gone {elapsed:.3f} s after kill -9 (ttl {ttl} s)")
    assert elapsed < ttl + ttl / 3 + 1.0


# -- watches -----------------------------------------------------------------------------------


def test_watch_reports_changes_under_its_prefix(postgres_server: PostgresServer) -> None:
    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        writer = await open_backend(m.url)
        watch = m.watch("w/")
        try:
            assert await next_event(watch) == Resync()
            await writer.commit([Check("outside", 0)], [Put("outside", b"1")])
            await writer.commit([Check("w/a", 0)], [Put("w/a", b"1")])
            assert await next_event(watch) == Changed(frozenset({"w/a"}))
            await writer.commit([Check("w/a", 1), Check("w/b", 0)], [Put("w/a", b"2"), Put("w/b", b"1")])
            seen: set[str] = set()
            while seen != {"w/a", "w/b"}:
                event = await next_event(watch)
                assert isinstance(event, Changed)
                seen |= event.keys
            await writer.commit([Check("w/a", 2)], [Delete("w/a")])
            assert await next_event(watch) == Changed(frozenset({"w/a"}))

            # A session's end is a change too (cascaded deletes are logged).
            session = await writer.open_session(5)
            await writer.commit([Check("w/eph", 0)], [Put("w/eph", b"1", session)])
            assert await next_event(watch) == Changed(frozenset({"w/eph"}))
            await session.close()
            assert await next_event(watch) == Changed(frozenset({"w/eph"}))

            # Changes coalesce while the consumer is away: one event names every key.
            for i in range(20):
                await writer.commit([Check(f"w/many/{i}", 0)], [Put(f"w/many/{i}", b"1")])
            await eventually(lambda: _listed(m, "w/many/", 20), "writes visible")
            keys: set[str] = set()
            while len(keys) < 20:
                event = await next_event(watch)
                assert isinstance(event, Changed)
                keys |= event.keys
            assert keys == {f"w/many/{i}" for i in range(20)}

            # A second watch starts with its own Resync; closing one leaves the other working.
            other = m.watch("")
            assert await next_event(other) == Resync()
            await other.aclose()
            await writer.commit([Check("w/c", 0)], [Put("w/c", b"1")])
            assert await next_event(watch) == Changed(frozenset({"w/c"}))
        finally:
            await watch.aclose()
            await writer.close()
            await m.close()

    run(scenario(), postgres_server)


async def _listed(m: Metastore, prefix: str, count: int) -> bool:
    return len(await m.list(prefix)) == count


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


async def converge(m: Metastore, prefix: str, writers: list[Metastore], ops: int) -> None:
    """Random writes from several clients while a consumer re-reads on every event: it ends equal."""
    view: dict[str, Versioned] = {}
    watch = m.watch(prefix)
    events = 0

    async def consume() -> None:
        nonlocal view, events
        async for _ in watch:
            events += 1
            view = await m.list(prefix)

    async def write(w: Metastore, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(ops):
            key = f"{prefix}{rng.randrange(8)}"
            current = await w.get(key)
            try:
                if current is None:
                    await w.commit([Check(key, 0)], [Put(key, rng.randbytes(4))])
                elif rng.random() < 0.3:
                    await w.commit([Check(key, current.version)], [Delete(key)])
                else:
                    await w.commit([Check(key, current.version)], [Put(key, rng.randbytes(4))])
            except VersionConflictError:
                pass
            if rng.random() < 0.2:  # outside the prefix: must not disturb the consumer
                noise = f"noise/{seed}/{rng.randrange(1000)}"
                await w.commit([Check(noise, 0)], [Put(noise, b"")]) if await w.get(noise) is None else None

    consumer = asyncio.ensure_future(consume())
    try:
        await asyncio.gather(*(write(w, i) for i, w in enumerate(writers)))
        truth = await m.list(prefix)
        await eventually(lambda: view == truth, f"consumer converged ({events} events)", 15)
    finally:
        consumer.cancel()
        await asyncio.wait({consumer})
        await watch.aclose()


def test_watch_consumer_converges(postgres_server: PostgresServer) -> None:
    async def scenario() -> None:
        m = await open_backend(postgres_server.url_for())
        writers = [await open_backend(m.url) for _ in range(2)]
        try:
            await converge(m, "c/", [m, *writers], 60)
        finally:
            for w in writers:
                await w.close()
            await m.close()

    run(scenario(), postgres_server)


# -- the server goes away ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_server_restart_within_ttl(own_server: PostgresServer, how: str) -> None:
    """Sessions go SUSPENDED and come back CONNECTED with their keys; watches Resync and converge."""

    async def scenario() -> None:
        m = await open_backend(own_server.url_for("restart"))
        writer = await open_backend(m.url)
        session = await m.open_session(8.0)
        log = StateLog(session)
        watch = m.watch("")
        try:
            assert await next_event(watch) == Resync()
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            assert await next_event(watch) == Changed(frozenset({"eph"}))

            own_server.stop() if how == "stop" else own_server.kill()
            await log.reached(SessionState.SUSPENDED, session.ttl_s / 3 + 5)
            with pytest.raises(UnavailableError):
                await m.get("eph")
            own_server.start()
            await log.reached(SessionState.CONNECTED, 10)
            assert log.states == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert await m.get("eph") == Versioned(b"1", 1, session.id)

            assert await next_event(watch) == Resync()
            await writer.commit([Check("after", 0)], [Put("after", b"1")])
            assert await next_event(watch) == Changed(frozenset({"after"}))
            await watch.aclose()
            await converge(m, "c/", [writer], 30)
        finally:
            await watch.aclose()
            await writer.close()
            await m.close()

    run(scenario(), own_server)


def test_session_lost_when_ttl_passes_while_server_is_down(own_server: PostgresServer) -> None:
    async def scenario() -> None:
        m = await open_backend(own_server.url_for("down"))
        short = await m.open_session(1.5)
        long = await m.open_session(30.0)
        short_log, long_log = StateLog(short), StateLog(long)
        try:
            await m.commit([Check("short", 0), Check("long", 0)], [Put("short", b"1", short), Put("long", b"1", long)])
            own_server.stop()
            await short_log.reached(SessionState.LOST, 10)
            assert short_log.states == [SessionState.SUSPENDED, SessionState.LOST]
            own_server.start()
            # The expired lease is reaped when the server is back; the long one holds (its keepalive
            # may not even have run while the server was down).
            await eventually(lambda: _absent(m, "short"), "expired session's key reaped", 10)
            assert await m.get("long") == Versioned(b"1", 1, long.id)
            assert long.state is SessionState.CONNECTED and SessionState.LOST not in long_log.states
            with pytest.raises(SessionLostError):
                await m.commit([Check("short", 0)], [Put("short", b"2", short)])
        finally:
            await m.close()

    run(scenario(), own_server)


def test_paused_server_suspends_then_recovers(own_server: PostgresServer) -> None:
    """A server that stops answering (SIGSTOP) is noticed by the keepalive's deadline, not by an error."""

    async def scenario() -> None:
        m = await open_backend(own_server.url_for("paused"))
        session = await m.open_session(4.5)
        log = StateLog(session)
        try:
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            paused_at = time.monotonic()
            own_server.pause()
            try:
                suspended_at = await log.reached(SessionState.SUSPENDED, 10)
                assert suspended_at - paused_at < session.ttl_s, "SUSPENDED must come before the lease can end"
            finally:
                own_server.resume()
            await log.reached(SessionState.CONNECTED, 10)
            assert await m.get("eph") == Versioned(b"1", 1, session.id)
        finally:
            await m.close()

    run(scenario(), own_server)
