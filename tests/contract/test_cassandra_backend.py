"""The Cassandra backend against a real node (tests/contract/servers/cassandra.py).

The node (``cassandra_server``, registered in tests/contract/conftest.py) is shared by the whole
session; each test gets a fresh keyspace (``cassandra_url``). Tests that stop the node restart it
before they end (``cassandra_url`` restarts it otherwise). Waits are conditions with deadlines; the
only time bound asserted is the contract's (an ephemeral key of a killed process is gone within
ttl + one keepalive interval + 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from barnabas.coordination.api import Changed, Check, Delete, Put, Resync, SessionState, Versioned, WatchEvent
from barnabas.coordination.backends.cassandra import CassandraMetastore, CassandraSession, open_backend
from barnabas.coordination.backends.cassandra._connection import parse_url
from barnabas.coordination.backends.cassandra._metastore import prefix_end
from barnabas.coordination.backends.cassandra._session import Beat, lease_seconds, state_after
from barnabas.coordination.errors import (
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from tests.contract.servers.cassandra import CassandraServer

T = TypeVar("T")

DEADLINE_S = 30.0


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 120.0) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout_s):
            return await coro

    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[CassandraMetastore]:
    store = await open_backend(url)
    try:
        yield store
    finally:
        await store.close()


async def eventually(condition: Callable[[], Awaitable[bool]], timeout_s: float = DEADLINE_S, what: str = "") -> float:
    """Poll ``condition`` until true; return the seconds it took. Fails after ``timeout_s``."""
    began = time.monotonic()
    while not await condition():
        if time.monotonic() - began > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def next_event(events: AsyncGenerator[WatchEvent, None], timeout_s: float = DEADLINE_S) -> WatchEvent:
    return await asyncio.wait_for(anext(events), timeout_s)


async def changed_keys_until(
    events: AsyncGenerator[WatchEvent, None], wanted: set[str], timeout_s: float = DEADLINE_S
) -> set[str]:
    """Collect keys from Changed events until ``wanted`` were all named; Resyncs are allowed."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while not wanted <= seen:
        event = await next_event(events, max(0.1, deadline - time.monotonic()))
        if isinstance(event, Changed):
            seen |= event.keys
    return seen


@pytest.fixture
def cassandra_url(cassandra_server: CassandraServer) -> str:
    """A backend URL on a fresh keyspace of the shared node (started again if a test left it down)."""
    if not cassandra_server.running:
        cassandra_server.start()
    return cassandra_server.url_for()


# -- pure parts (no server) ----------------------------------------------------------------


def test_url_parsing() -> None:
    target = parse_url("cassandra://a,b:9043/ks?replication_factor=3&namespace=n1")
    assert (target.hosts, target.port, target.keyspace, target.replication_factor, target.namespace) == (
        ("a", "b"),
        9043,
        "ks",
        3,
        "n1",
    )
    target = parse_url("cassandra://u:p%40ss@h/ks")
    assert (target.hosts, target.port, target.namespace, target.username, target.password) == (
        ("h",),
        9042,
        "barnabas",
        "u",
        "p@ss",
    )
    for bad in (
        "cassandra:///ks",
        "cassandra://h/",
        "cassandra://h/bad-name",
        "cassandra://h:1,g:2/ks",
        "cassandra://h/ks?colour=red",
        "cassandra://h/ks?replication_factor=0",
    ):
        with pytest.raises(ValueError):
            parse_url(bad)


def test_prefix_end_and_lease_rounding() -> None:
    assert prefix_end("") is None
    assert prefix_end("a/") == "a0"
    assert prefix_end("\U0010ffff") is None
    assert prefix_end("a\ud7ff") == "a\ue000"
    assert [lease_seconds(t) for t in (0.1, 1, 2, 2.5, 10)] == [2, 2, 2, 3, 10]
    assert state_after(Beat.ALIVE, 99, 2) is SessionState.CONNECTED
    assert state_after(Beat.GONE, 0, 2) is SessionState.LOST
    assert state_after(Beat.UNANSWERED, 1.9, 2) is SessionState.SUSPENDED
    assert state_after(Beat.UNANSWERED, 2.0, 2) is SessionState.LOST


# -- keys and commits ----------------------------------------------------------------------


def test_list_is_a_prefix_range_in_key_order(cassandra_url: str) -> None:
    async def main() -> None:
        async with opened(cassandra_url) as store:
            keys = ["a/2", "a/1", "a/10", "a0", "a", "b/x", "a/\u00e9", "a/\U0001f600"]
            await store.commit([Check(k, 0) for k in keys], [Put(k, k.encode()) for k in keys])
            listed = await store.list("a/")
            assert list(listed) == sorted(k for k in keys if k.startswith("a/"))
            assert listed["a/1"] == Versioned(b"a/1", 1, None)
            assert list(await store.list("")) == sorted(keys)
            assert await store.list("zz") == {}

    run(main())


def test_concurrent_compare_and_set_from_two_clients_loses_no_update(cassandra_url: str) -> None:
    """Six writers on two clients increment one counter by read + CAS; every increment lands once."""

    async def main() -> None:
        async with opened(cassandra_url) as first, opened(cassandra_url) as second:
            await first.commit([Check("n", 0)], [Put("n", b"0")])

            async def increment(store: CassandraMetastore, times: int) -> int:
                conflicts = 0
                for _ in range(times):
                    while True:
                        current = await store.get("n")
                        assert current is not None
                        try:
                            await store.commit(
                                [Check("n", current.version)], [Put("n", str(int(current.value) + 1).encode())]
                            )
                            break
                        except VersionConflictError:
                            conflicts += 1
                return conflicts

            await asyncio.gather(*(increment(store, 8) for store in (first, second) * 3))
            final = await first.get("n")
            assert final == Versioned(b"48", 49, None)

    run(main())


# -- sessions and ephemeral keys -----------------------------------------------------------


def test_ephemeral_keys_belong_to_their_session_and_vanish_on_close(cassandra_url: str) -> None:
    async def main() -> None:
        async with opened(cassandra_url) as store, opened(cassandra_url) as other:
            session = await store.open_session(ttl_s=2)
            assert isinstance(session, CassandraSession)
            assert session.state is SessionState.CONNECTED
            assert session.ttl_s == 2.0
            seen: list[SessionState] = []
            session.add_state_listener(seen.append)
            await store.commit([Check("e", 0), Check("p", 0)], [Put("e", b"1", session), Put("p", b"1")])
            assert await other.get("e") == Versioned(b"1", 1, session.id)
            # A later put keeps the key's session, whoever writes it; a persistent key stays persistent.
            await other.commit([Check("e", 1)], [Put("e", b"2")])
            await store.commit([Check("p", 1)], [Put("p", b"2", session)])
            assert await store.get("e") == Versioned(b"2", 2, session.id)
            assert await store.get("p") == Versioned(b"2", 2, None)
            # Keepalives keep the key alive past its TTL.
            await asyncio.sleep(session.ttl_s * 2)
            assert await other.get("e") == Versioned(b"2", 2, session.id)
            # A commit that only checks an ephemeral key holds it to its version.
            assert await other.commit([Check("e", 2)], []) == {}
            await session.close()
            assert session.state is SessionState.LOST
            assert seen == [SessionState.LOST]
            assert await other.get("e") is None
            assert await other.get("p") == Versioned(b"2", 2, None)
            with pytest.raises(SessionLostError):
                await store.commit([Check("e2", 0)], [Put("e2", b"1", session)])
            assert await other.get("e2") is None

    run(main())


def test_a_session_of_another_metastore_is_refused(cassandra_url: str) -> None:
    async def main() -> None:
        async with opened(cassandra_url) as store, opened(cassandra_url) as other:
            session = await store.open_session(ttl_s=2)
            with pytest.raises(ValueError):
                await other.commit([Check("e", 0)], [Put("e", b"1", session)])

    run(main())


OWNER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from barnabas.coordination.api import Check, Put
    from barnabas.coordination.registry import open_metastore

    async def main(url, key, ttl):
        store = await open_metastore(url)
        session = await store.open_session(ttl)
        await store.commit([Check(key, 0)], [Put(key, b"owned", session)])
        print("ready", session.id, session.ttl_s, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
    """
)


def test_ephemeral_key_vanishes_after_its_owner_is_killed(cassandra_url: str) -> None:
    """kill -9 of the owning process: the key is gone within ttl + one keepalive interval (+1 s slack)."""
    ttl_s = 2.0
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, cassandra_url, "members/1", str(ttl_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line.startswith("ready"), f"owner failed: {line}{owner.stderr.read() if owner.stderr else ''}"
        session_id, granted_ttl = line.split()[1], float(line.split()[2])

        async def main() -> float:
            async with opened(cassandra_url) as store:
                assert await store.get("members/1") == Versioned(b"owned", 1, session_id)
                events = store.watch("members/")
                assert isinstance(await next_event(events), Resync)
                await asyncio.sleep(granted_ttl)  # survives keepalives
                assert await store.get("members/1") is not None
                os.kill(owner.pid, signal.SIGKILL)
                killed_at = time.monotonic()
                owner.wait()
                await eventually(lambda: _absent(store, "members/1"), what="members/1 vanishes")
                gone_after = time.monotonic() - killed_at
                # Nothing wrote the expiry: the watch sees it through the ephemeral-key index.
                assert "members/1" in await changed_keys_until(events, {"members/1"})
                await events.aclose()
                return gone_after

        gone_after = run(main())
        interval = granted_ttl / 3
        print(f"ephemeral key gone {gone_after:.2f} s after kill -9 (ttl {granted_ttl} s)")
        assert gone_after < granted_ttl + interval + 1.0
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


async def _absent(store: CassandraMetastore, key: str) -> bool:
    return await store.get(key) is None


def test_sessions_and_watches_across_a_server_crash(cassandra_server: CassandraServer, cassandra_url: str) -> None:
    """The node is killed -9 and started again (one outage, to keep the suite fast).

    Sessions: SUSPENDED while it is down; CONNECTED again if the lease outlived the outage, else
    LOST (decided by the client's clock: the server's TTL ran out meanwhile). Acknowledged writes
    survive the crash. A watcher waiting through the outage yields Resync when its polls succeed.
    """

    async def main() -> None:
        async with opened(cassandra_url) as store:
            durable = await store.open_session(ttl_s=60)
            short = await store.open_session(ttl_s=2)
            await store.commit(
                [Check("durable", 0), Check("short", 0), Check("plain", 0)],
                [Put("durable", b"d", durable), Put("short", b"s", short), Put("plain", b"p")],
            )
            states: dict[str, list[SessionState]] = {"durable": [], "short": []}
            durable.add_state_listener(states["durable"].append)
            short.add_state_listener(states["short"].append)
            events = store.watch("")
            assert isinstance(await next_event(events), Resync)
            received: list[WatchEvent] = []

            async def consume() -> None:
                async for event in events:
                    received.append(event)

            consumer = asyncio.create_task(consume())

            await asyncio.to_thread(cassandra_server.kill)
            await eventually(_state_is(durable, SessionState.SUSPENDED), what="durable session SUSPENDED")
            await eventually(_state_is(short, SessionState.LOST), what="short session LOST")
            with pytest.raises(UnavailableError):
                await store.get("plain")
            with pytest.raises(SessionLostError):
                await store.commit([Check("short2", 0)], [Put("short2", b"s", short)])

            await asyncio.to_thread(cassandra_server.start)
            await eventually(_state_is(durable, SessionState.CONNECTED), what="durable session CONNECTED again")
            assert states["durable"] == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert states["short"] == [SessionState.SUSPENDED, SessionState.LOST]
            assert await store.get("durable") == Versioned(b"d", 1, durable.id)
            assert await store.get("plain") == Versioned(b"p", 1, None)
            assert await store.get("short") is None  # expired by TTL while the node was down
            await store.commit([Check("durable", 1)], [Put("durable", b"d2")])
            assert await store.get("durable") == Versioned(b"d2", 2, durable.id)

            async def resynced() -> bool:
                return any(isinstance(event, Resync) for event in received)

            await eventually(resynced, what="a Resync after the outage")
            consumer.cancel()

    try:
        run(main())
    finally:
        if not cassandra_server.running:
            cassandra_server.start()


def _state_is(session: CassandraSession, state: SessionState) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return session.state is state

    return check


# -- watches -------------------------------------------------------------------------------


def test_watch_names_changes_under_its_prefix_only(cassandra_url: str) -> None:
    async def main() -> None:
        async with opened(cassandra_url) as store, opened(cassandra_url) as writer:
            events = store.watch("topics/")
            assert isinstance(await next_event(events), Resync)
            await writer.commit([Check("other/x", 0)], [Put("other/x", b"1")])
            await writer.commit([Check("topics/a", 0)], [Put("topics/a", b"1")])
            event = await next_event(events)
            assert event == Changed(frozenset({"topics/a"}))
            await writer.commit(
                [Check("topics/a", 1), Check("topics/b", 0), Check("other/x", 1)],
                [Delete("topics/a"), Put("topics/b", b"1"), Put("other/x", b"2")],
            )
            assert await changed_keys_until(events, {"topics/a", "topics/b"}) == {"topics/a", "topics/b"}
            # A session closing deletes its keys by a commit: named at once.
            session = await writer.open_session(ttl_s=2)
            await writer.commit([Check("topics/e", 0)], [Put("topics/e", b"1", session)])
            assert "topics/e" in await changed_keys_until(events, {"topics/e"})
            await session.close()
            assert "topics/e" in await changed_keys_until(events, {"topics/e"})
            await events.aclose()

    run(main())


def test_watch_names_what_changed_while_the_consumer_was_away(cassandra_url: str) -> None:
    """The generator only runs when pulled; the change log lets it name everything it missed."""

    async def main() -> None:
        async with opened(cassandra_url) as store, opened(cassandra_url) as writer:
            events = store.watch("t/")
            assert isinstance(await next_event(events), Resync)
            for i in range(5):
                await writer.commit([Check(f"t/{i}", 0), Check(f"x/{i}", 0)], [Put(f"t/{i}", b""), Put(f"x/{i}", b"")])
            wanted = {f"t/{i}" for i in range(5)}
            assert await changed_keys_until(events, wanted) == wanted
            await events.aclose()

    run(main())


def test_a_consumer_that_rereads_on_every_event_converges(cassandra_url: str) -> None:
    """Writers race; a consumer re-reading the prefix after each event ends with the true state."""

    async def main() -> None:
        async with opened(cassandra_url) as store, opened(cassandra_url) as writer:
            session = await writer.open_session(ttl_s=2)
            view: dict[str, Versioned] = {}
            events = store.watch("c/")
            stop = asyncio.Event()

            async def consume() -> None:
                async for _event in events:
                    view.clear()
                    view.update(await store.list("c/"))
                    if stop.is_set():
                        return

            consumer = asyncio.create_task(consume())

            async def write(worker: int) -> None:
                for i in range(15):
                    key = f"c/{(worker + i) % 5}"
                    current = await writer.get(key)
                    with contextlib.suppress(VersionConflictError):
                        if current is None:
                            owner = session if i % 3 == 0 else None
                            await writer.commit([Check(key, 0)], [Put(key, b"%d" % i, owner)])
                        elif i % 4 == 0:
                            await writer.commit([Check(key, current.version)], [Delete(key)])
                        else:
                            await writer.commit([Check(key, current.version)], [Put(key, b"%d" % i)])

            await asyncio.gather(*(write(w) for w in range(3)))
            await session.close()  # its keys vanish too
            truth = await writer.list("c/")
            await writer.commit([Check("c/zz-last", 0)], [Put("c/zz-last", b"end")])
            truth["c/zz-last"] = Versioned(b"end", 1, None)

            async def converged() -> bool:
                return view == truth

            await eventually(converged, what=f"watch consumer converges to {truth}")
            stop.set()
            await writer.commit([Check("c/zz-last", 1)], [Put("c/zz-last", b"end")])
            await asyncio.wait_for(consumer, DEADLINE_S)

    run(main())
