"""The etcd backend's own cases, against real etcd servers: one node, one node we crash, and a 3-node cluster.

What every backend must do (keys, sessions, watches, outages, a killed cluster leader) is the shared
contract's (barnabas.coordination.testing.contract and .outages, run by test_contract.py); here are
only etcd's: its URL and endpoint list, roots as key prefixes, paged range reads, the 128-op Txn
limit, leases revoked on the server, one revision per Txn, and watches resumed from a revision
(after a restart, a disconnect, a compaction, a wiped data dir, a killed follower).

Every test opens the backend by URL under its own key prefix. Waits are conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from barnabas.coordination.api import (
    Changed,
    Check,
    Delete,
    Metastore,
    Put,
    Resync,
    SessionState,
    Versioned,
    WatchEvent,
)
from barnabas.coordination.backends.etcd import EtcdMetastore, open_backend, parse_url
from barnabas.coordination.backends.etcd._connection import Stubs
from barnabas.coordination.backends.etcd._session import BEAT_GRACE_S, Beat, EtcdSession
from barnabas.coordination.errors import (
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from barnabas.coordination.registry import open_metastore
from tests.contract.servers.etcd import EtcdCluster, EtcdServer, free_ports, start_server
from tests.contract.support import StateLog, eventually, next_event, run_scenario

# The etcd_server and etcd_cluster fixtures come from tests/contract/conftest.py.

T = TypeVar("T")
TEST_TIMEOUT_S = 60.0


def run(coro: Coroutine[Any, Any, T], *servers: EtcdServer | EtcdCluster) -> T:
    return run_scenario(coro, *servers, timeout_s=TEST_TIMEOUT_S)


class Mirror:
    """A watch consumer that re-reads the prefix on every event, as the contract asks."""

    def __init__(self, metastore: Metastore, prefix: str) -> None:
        self.metastore = metastore
        self.prefix = prefix
        self.view: dict[str, bytes] | None = None
        self.events: list[WatchEvent] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Mirror:
        self._task = asyncio.create_task(self._run())
        await eventually(lambda: self.view is not None, "the first Resync and read")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        watch = self.metastore.watch(self.prefix)
        try:
            async for event in watch:
                self.events.append(event)
                while True:  # a real consumer retries its read until the backend answers
                    try:
                        listed = await self.metastore.list(self.prefix)
                        break
                    except UnavailableError:
                        await asyncio.sleep(0.05)
                self.view = {key: versioned.value for key, versioned in listed.items()}
        finally:
            await watch.aclose()

    async def converged(self, timeout_s: float = 15.0) -> None:
        async def same() -> bool:
            try:
                truth = await self.metastore.list(self.prefix)
            except UnavailableError:
                return False
            return self.view == {key: versioned.value for key, versioned in truth.items()}

        await eventually(same, f"watch consumer of {self.prefix!r} sees the true state", timeout_s)


async def commit_retrying(metastore: Metastore, key: str, value: bytes, timeout_s: float = 20.0) -> int:
    """Put ``key`` the way a careful caller does: re-read, compare-and-set, retry while unavailable."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            current = await metastore.get(key)
            version = current.version if current else 0
            ops = [Put(key, value)]
            return (await metastore.commit([Check(key, version)], ops))[key]
        except (UnavailableError, VersionConflictError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


@pytest.fixture
def url(etcd_server: EtcdServer) -> str:
    """A fresh prefix on the shared server for this test."""
    return etcd_server.url_for()


@pytest.fixture(scope="module")
def crash_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A node of our own that tests kill and restart (not the shared one)."""
    server = start_server(tmp_path_factory, "etcd-crash")
    yield server
    server.stop()


@pytest.fixture
def crashable(crash_server: EtcdServer) -> Iterator[EtcdServer]:
    """``crash_server``, running at the start of the test and again at its end."""
    if not crash_server.running:
        crash_server.start()
    yield crash_server
    if not crash_server.running:
        crash_server.start()


# -- URLs ------------------------------------------------------------------------------------


def test_url_forms() -> None:
    address = parse_url("etcd://127.0.0.1:2379")
    assert address.endpoints == ("127.0.0.1:2379",)
    assert address.root == b"/barnabas/"
    assert address.timeout_s == 5.0
    address = parse_url("etcd://a:1,b,[::1]:3/x/y/?timeout=0.5")
    assert address.endpoints == ("a:1", "b:2379", "[::1]:3")
    assert address.root == b"/x/y/"
    assert address.timeout_s == 0.5
    assert parse_url("etcd://h/").root == b"/barnabas/"
    for bad in ("etcd:///x", "etcd://h:x/p", "etcd://h:0/p", "etcd://u:p@h/p", "etcd://h/p?ttl=3", "zk://h/p"):
        with pytest.raises(ValueError):
            parse_url(bad)


def test_fails_over_past_a_dead_endpoint(etcd_server: EtcdServer) -> None:
    (port,) = free_ports(1)

    async def scenario() -> None:
        metastore = await open_metastore(f"etcd://127.0.0.1:{port},{etcd_server.endpoint}/failover?timeout=3")
        try:
            assert isinstance(metastore, EtcdMetastore)
            assert (await metastore.commit([Check("k", 0)], [Put("k", b"v")])) == {"k": 1}
            assert await metastore.get("k") == Versioned(b"v", 1)
            await metastore.commit([Check("k", 1)], [Delete("k")])
        finally:
            await metastore.close()

    run(scenario(), etcd_server)


# -- keys, versions, commits -------------------------------------------------------------------


def test_a_neighbouring_root_stays_invisible(url: str, etcd_server: EtcdServer) -> None:
    """Roots are key prefixes: one whose name extends ours (``/t-x`` and ``/t-x-sibling``) is never read or watched."""

    async def scenario() -> None:
        m = await open_backend(url)
        other = await open_backend(url + "-sibling")
        watch = m.watch("")
        try:
            assert await next_event(watch) == Resync()
            await other.commit([Check("t/zz", 0)], [Put("t/zz", b"other")])
            await m.commit([Check("t/a", 0)], [Put("t/a", b"ours")])
            assert await next_event(watch) == Changed(frozenset({"t/a"}))
            assert await m.list("") == {"t/a": Versioned(b"ours", 1)}
            assert await other.list("") == {"t/zz": Versioned(b"other", 1)}
        finally:
            await watch.aclose()
            await m.close()
            await other.close()

    run(scenario(), etcd_server)


def test_list_pages_through_one_snapshot(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        try:
            for start in range(0, 2500, 100):
                keys = [f"k/{i:05d}" for i in range(start, start + 100)]
                await m.commit([Check(key, 0) for key in keys], [Put(key, b"x") for key in keys])
            listed = await m.list("k/")
            assert len(listed) == 2500
            assert list(listed) == sorted(listed)
        finally:
            await m.close()

    run(scenario(), etcd_server)


def test_commits_past_etcds_transaction_limit_are_value_errors(url: str, etcd_server: EtcdServer) -> None:
    """etcd refuses a transaction of more than --max-txn-ops (128) operations: refused up front, nothing written.
    (Uncovered ops are the shared contract's.)"""

    async def scenario() -> None:
        m = await open_backend(url)
        try:
            with pytest.raises(ValueError):
                await m.commit([Check("a", 0), Check("a", None)], [Put("a", b"x")])
            keys = [f"many/{i}" for i in range(129)]
            with pytest.raises(ValueError):
                await m.commit([Check(key, 0) for key in keys], [Put(key, b"x") for key in keys])
            assert await m.list("") == {}
        finally:
            await m.close()

    run(scenario(), etcd_server)


# -- sessions and ephemeral keys -----------------------------------------------------------------


def test_lease_revoked_elsewhere_is_lost(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        try:
            session = await m.open_session(3)  # keepalive every second
            states = StateLog(session)
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            etcd_server.revoke_lease(session.id)
            await states.reached(SessionState.LOST, timeout_s=5)
            assert states.states == [SessionState.LOST]
            assert await m.get("eph") is None
            with pytest.raises(SessionLostError):
                await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
        finally:
            await m.close()

    run(scenario(), etcd_server)


class _KeepalivesThatNeverEnd(EtcdSession):
    """A session whose keepalive streams never end, whatever their gRPC deadline."""

    async def _keepalive_call(self, stubs: Stubs, timeout: float) -> Beat:
        await asyncio.Event().wait()
        raise AssertionError("a keepalive that never ends ended")


def test_a_keepalive_that_never_ends_leaves_the_session_lost_within_its_ttl(url: str, etcd_server: EtcdServer) -> None:
    """The state machine does not wait on a gRPC call's own deadline alone: a network-partition run once left a
    session SUSPENDED from its first keepalive on, never LOST, while its lease ended on the server."""

    async def scenario() -> list[SessionState]:
        m = await open_backend(url)
        try:
            session = await _KeepalivesThatNeverEnd.grant(m._connection, 3)
            try:
                states = StateLog(session)
                await states.reached(SessionState.LOST, timeout_s=3 + BEAT_GRACE_S + 2)
                return states.states
            finally:
                await session.close()
        finally:
            await m.close()

    assert run(scenario(), etcd_server) == [SessionState.SUSPENDED, SessionState.LOST]


def test_a_lease_granted_after_waiting_for_the_server_counts_from_its_grant(crashable: EtcdServer) -> None:
    """A session granted once the server is back, after waiting longer than its TTL, is CONNECTED and stays so:
    it was born SUSPENDED, its time counted from the first attempt (a broker registering again after a healed
    partition got such a session)."""
    ttl_s = 3.0

    async def scenario() -> list[SessionState]:
        m = await open_backend(crashable.url_for() + "?timeout=20")
        try:
            assert await m.get("warm") is None  # the channel is up before the server goes
            crashable.kill()
            granting = asyncio.ensure_future(m.open_session(ttl_s))
            await asyncio.sleep(ttl_s + 1)  # the outage: longer than the TTL asked for
            await asyncio.to_thread(crashable.start)
            session = await granting
            states = StateLog(session)
            try:
                until = time.monotonic() + 1.5 * ttl_s
                while time.monotonic() < until and not states.states:
                    await asyncio.sleep(0.05)
                return list(states.states)  # before the close below adds LOST
            finally:
                await session.close()
        finally:
            await m.close()

    assert run(scenario(), crashable) == []


def test_commit_with_an_expired_lease_is_session_lost(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        try:
            session = await m.open_session(30)  # next keepalive in 10 s: the commit learns first
            etcd_server.revoke_lease(session.id)
            with pytest.raises(SessionLostError):
                await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            assert session.state is SessionState.LOST
            assert await m.get("eph") is None
        finally:
            await m.close()

    run(scenario(), etcd_server)


# -- watches -------------------------------------------------------------------------------------


def test_one_transaction_is_one_event(url: str, etcd_server: EtcdServer) -> None:
    """A Txn is one revision: the watch names every key it touched in one Changed, and nothing else."""

    async def scenario() -> None:
        m = await open_backend(url)
        watch = m.watch("a/")
        try:
            assert await next_event(watch) == Resync()
            await m.commit([Check("a/1", 0)], [Put("a/1", b"x")])
            assert await next_event(watch) == Changed(frozenset({"a/1"}))
            await m.commit([Check("ab", 0), Check("b/1", 0)], [Put("ab", b"x"), Put("b/1", b"x")])
            await m.commit(
                [Check("a/1", 1), Check("a/2", 0), Check("ab", 1)], [Delete("a/1"), Put("a/2", b"z"), Delete("ab")]
            )
            assert await next_event(watch) == Changed(frozenset({"a/1", "a/2"}))
            session = await m.open_session(5)
            await m.commit([Check("a/e", 0), Check("a/f", 0)], [Put("a/e", b"e", session), Put("a/f", b"f", session)])
            assert await next_event(watch) == Changed(frozenset({"a/e", "a/f"}))
            await session.close()  # the lease's revocation deletes both in one revision
            assert await next_event(watch) == Changed(frozenset({"a/e", "a/f"}))
        finally:
            await watch.aclose()
            await m.close()

    run(scenario(), etcd_server)


def test_watch_catches_up_after_a_server_restart(crashable: EtcdServer) -> None:
    async def scenario() -> None:
        url = crashable.url_for() + "?timeout=2"
        m = await open_backend(url)
        watch = m.watch("")
        try:
            assert await next_event(watch) == Resync()
            await m.commit([Check("before", 0)], [Put("before", b"1")])
            assert await next_event(watch) == Changed(frozenset({"before"}))
            crashable.kill()
            crashable.start()
            await commit_retrying(m, "after", b"2")
            # The watch resumed from the last revision it saw: catch-up, no Resync needed.
            assert await next_event(watch) == Changed(frozenset({"after"}))
        finally:
            await watch.aclose()
            await m.close()

    run(scenario(), crashable)


class TcpProxy:
    """Forwards a local port to the server; ``cut()`` drops every connection and refuses new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        with contextlib.suppress(asyncio.CancelledError):  # the loop ending under a live connection
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()


def test_watch_resyncs_when_its_resume_point_was_compacted(etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        proxy = TcpProxy(etcd_server.client_port)
        await proxy.start()
        prefix = etcd_server.url_for().rsplit("/", 1)[1]
        direct = await open_backend(etcd_server.url_for(prefix))
        proxied = await open_backend(f"etcd://127.0.0.1:{proxy.port}/{prefix}?timeout=2")
        watch = proxied.watch("")
        try:
            assert await next_event(watch) == Resync()
            await direct.commit([Check("a", 0)], [Put("a", b"1")])
            assert await next_event(watch) == Changed(frozenset({"a"}))
            await proxy.cut()
            await direct.commit([Check("b", 0)], [Put("b", b"1")])
            await direct.commit([Check("c", 0)], [Put("c", b"1")])
            etcd_server.compact()
            await proxy.start()
            assert await next_event(watch) == Resync()
            assert set(await proxied.list("")) == {"a", "b", "c"}
            await direct.commit([Check("d", 0)], [Put("d", b"1")])
            assert await next_event(watch) == Changed(frozenset({"d"}))
        finally:
            await watch.aclose()
            await proxied.close()
            await direct.close()
            await proxy.cut()

    run(scenario(), etcd_server)


def test_watch_resumes_from_its_last_revision_after_a_disconnect(etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        proxy = TcpProxy(etcd_server.client_port)
        await proxy.start()
        prefix = etcd_server.url_for().rsplit("/", 1)[1]
        direct = await open_backend(etcd_server.url_for(prefix))
        proxied = await open_backend(f"etcd://127.0.0.1:{proxy.port}/{prefix}?timeout=2")
        watch = proxied.watch("")
        try:
            assert await next_event(watch) == Resync()
            await direct.commit([Check("a", 0)], [Put("a", b"1")])
            assert await next_event(watch) == Changed(frozenset({"a"}))
            await proxy.cut()
            await direct.commit([Check("b", 0)], [Put("b", b"1")])
            await direct.commit([Check("a", 1)], [Delete("a")])
            await proxy.start()
            # Missed while disconnected, replayed (maybe in one event): no Resync needed.
            seen: set[str] = set()
            while seen != {"a", "b"}:
                event = await next_event(watch)
                assert isinstance(event, Changed), event
                seen |= event.keys
        finally:
            await watch.aclose()
            await proxied.close()
            await direct.close()
            await proxy.cut()

    run(scenario(), etcd_server)


def test_watch_resyncs_when_the_server_comes_back_without_its_data(crashable: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(crashable.url_for() + "?timeout=2")
        watch = m.watch("")
        try:
            assert await next_event(watch) == Resync()
            for i in range(5):
                await m.commit([Check(f"k{i}", 0)], [Put(f"k{i}", b"1")])
                assert await next_event(watch) == Changed(frozenset({f"k{i}"}))
            crashable.kill()
            shutil.rmtree(crashable.data_dir)  # same address, history restarts at revision 1
            crashable.start()
            assert await next_event(watch) == Resync()
            await commit_retrying(m, "fresh", b"1")
            assert await next_event(watch) == Changed(frozenset({"fresh"}))
        finally:
            await watch.aclose()
            await m.close()

    run(scenario(), crashable)


def test_watch_consumer_converges_through_restarts(crashable: EtcdServer) -> None:
    async def scenario() -> None:
        url = crashable.url_for() + "?timeout=2"
        writer = await open_backend(url)
        reader = await open_backend(url)
        try:
            async with Mirror(reader, "k/") as mirror:
                for round_ in range(3):
                    for i in range(30):
                        key = f"k/{(i * 7 + round_) % 10}"
                        current = await _get_retrying(writer, key)
                        if current is not None and i % 3 == 0:
                            ops: list[Put | Delete] = [Delete(key)]
                        else:
                            ops = [Put(key, f"{round_}-{i}".encode())]
                        # An unavailable commit may or may not have applied: the mirror must agree either way.
                        with contextlib.suppress(UnavailableError):
                            await writer.commit([Check(key, current.version if current else 0)], ops)
                        if i == 15:
                            crashable.kill()
                            crashable.start()
                    await mirror.converged()
        finally:
            await reader.close()
            await writer.close()

    run(scenario(), crashable)


async def _get_retrying(metastore: Metastore, key: str) -> Versioned | None:
    for _ in range(100):
        try:
            return await metastore.get(key)
        except UnavailableError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"get {key!r} kept failing")


# -- three nodes ---------------------------------------------------------------------------------


def test_watch_on_a_killed_follower_fails_over_and_catches_up(etcd_cluster: EtcdCluster) -> None:
    leader = etcd_cluster.leader()
    follower = next(member for member in etcd_cluster.members if member is not leader)
    others = [member for member in etcd_cluster.members if member is not follower]
    url_follower_first = f"etcd://{','.join(m.endpoint for m in [follower, *others])}/t-follower?timeout=3"
    url_others = f"etcd://{','.join(m.endpoint for m in others)}/t-follower?timeout=3"

    async def scenario() -> None:
        watcher = await open_backend(url_follower_first)
        writer = await open_backend(url_others)
        watch = watcher.watch("")
        try:
            assert await next_event(watch) == Resync()
            await writer.commit([Check("a", 0)], [Put("a", b"1")])
            assert await next_event(watch) == Changed(frozenset({"a"}))
            follower.kill()
            await writer.commit([Check("b", 0)], [Put("b", b"1")])
            await writer.commit([Check("c", 0)], [Put("c", b"1")])
            seen: set[str] = set()
            while seen != {"b", "c"}:
                event = await next_event(watch)
                assert isinstance(event, Changed), event  # catch-up from the last revision, not Resync
                seen |= event.keys
        finally:
            await watch.aclose()
            await watcher.close()
            await writer.close()

    try:
        run(scenario(), etcd_cluster)
    finally:
        if not follower.running:
            etcd_cluster.restart(follower)
