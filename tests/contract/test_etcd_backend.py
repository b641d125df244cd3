"""The etcd backend against real etcd servers: one node, one node we crash, and a 3-node cluster.

Every test opens the backend by URL under its own key prefix. Waits are conditions with deadlines;
the only time bounds asserted are the contract's (an ephemeral key of a killed process is gone
within ttl + one keepalive interval + 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
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


def test_unreachable_endpoint_is_unavailable() -> None:
    (port,) = free_ports(1)

    async def scenario() -> float:
        start = time.monotonic()
        with pytest.raises(UnavailableError):
            await open_metastore(f"etcd://127.0.0.1:{port}/x?timeout=0.5")
        return time.monotonic() - start

    assert run(scenario()) < 5


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


def test_list_is_by_prefix_in_key_order(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        other = await open_backend(url + "-sibling")  # a neighbouring root must stay invisible
        try:
            keys = ["t/b", "t/a", "t/a/0", "tx", "s/a", "t/\u00e9"]
            await m.commit([Check(key, 0) for key in keys], [Put(key, key.encode()) for key in keys])
            await other.commit([Check("t/zz", 0)], [Put("t/zz", b"other")])
            listed = await m.list("t/")
            assert list(listed) == ["t/a", "t/a/0", "t/b", "t/\u00e9"]
            assert listed["t/a/0"] == Versioned(b"t/a/0", 1)
            assert list(await m.list("")) == sorted(keys)
            assert await m.list("nothing/") == {}
            assert await other.list("") == {"t/zz": Versioned(b"other", 1)}
        finally:
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


def test_ephemeral_keys_keep_their_session_and_vanish_on_close(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        try:
            session = await m.open_session(5)
            states = StateLog(session)
            assert states.states == [] and session.state is SessionState.CONNECTED
            assert session.ttl_s >= 5
            assert session.id.isdigit()
            other = await m.open_session(5)
            assert other.id != session.id
            await m.commit([Check("persistent", 0)], [Put("persistent", b"p")])
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            assert await m.get("eph") == Versioned(b"1", 1, session.id)
            # A later put keeps the key's session, with or without naming one.
            await m.commit([Check("eph", 1)], [Put("eph", b"2")])
            await m.commit([Check("eph", 2)], [Put("eph", b"3", other)])
            await m.commit([Check("persistent", 1)], [Put("persistent", b"p2", session)])
            assert await m.get("eph") == Versioned(b"3", 3, session.id)
            assert await m.get("persistent") == Versioned(b"p2", 2, None)

            async with Mirror(m, "") as mirror:
                await session.close()
                assert await m.get("eph") is None  # gone when close() returns
                assert await m.get("persistent") == Versioned(b"p2", 2, None)
                assert states.states == [SessionState.LOST]
                await mirror.converged()
                assert any(isinstance(e, Changed) and "eph" in e.keys for e in mirror.events)
            with pytest.raises(SessionLostError):
                await m.commit([Check("again", 0)], [Put("again", b"x", session)])
            await session.close()  # idempotent
            await other.close()
        finally:
            await m.close()

    run(scenario(), etcd_server)


def test_closing_the_metastore_ends_its_sessions(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        session = await m.open_session(5)
        await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
        await m.close()
        assert session.state is SessionState.LOST
        observer = await open_backend(url)
        try:
            assert await observer.get("eph") is None
        finally:
            await observer.close()

    run(scenario(), etcd_server)


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


OWNER_SCRIPT = """
import asyncio, sys
from barnabas.coordination.api import Check, Put
from barnabas.coordination.registry import open_metastore

async def main(url, key, ttl):
    metastore = await open_metastore(url)
    session = await metastore.open_session(float(ttl))
    await metastore.commit([Check(key, 0)], [Put(key, b"owned", session)])
    print("ready", session.ttl_s, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


def read_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"no output from pid {proc.pid} within {timeout_s} s")
    return proc.stdout.readline()


def test_ephemeral_key_of_a_killed_process_vanishes_within_ttl(url: str, etcd_server: EtcdServer) -> None:
    ttl = 2.0
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, url, "owner", str(ttl)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(proc, 30)
        assert line.startswith("ready"), (line, proc.stderr and proc.stderr.read())
        granted = float(line.split()[1])

        async def scenario() -> float:
            m = await open_backend(url)
            try:
                versioned = await m.get("owner")
                assert versioned is not None and versioned.session_id is not None
                async with Mirror(m, "") as mirror:
                    assert mirror.view == {"owner": b"owned"}
                    os.kill(proc.pid, signal.SIGKILL)
                    killed = time.monotonic()
                    await eventually(lambda: mirror.view == {}, "the killed owner's key vanishes", 30)
                    return time.monotonic() - killed
            finally:
                await m.close()

        vanished = run(scenario(), etcd_server)
        print(f"ephemeral key gone {vanished:.2f} s after SIGKILL (ttl {granted})")
        assert vanished < granted + granted / 3 + 1
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_session_suspends_while_the_server_is_down_and_reconnects(crashable: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(crashable.url_for() + "?timeout=1")
        try:
            session = await m.open_session(6)
            states = StateLog(session)
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            crashable.kill()
            await states.reached(SessionState.SUSPENDED, timeout_s=5)
            with pytest.raises(UnavailableError):
                await m.get("eph")
            crashable.start()
            await states.reached(SessionState.CONNECTED, timeout_s=5)
            assert states.states == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert await m.get("eph") == Versioned(b"1", 1, session.id)
            await session.close()
        finally:
            await m.close()

    run(scenario(), crashable)


def test_session_is_lost_after_its_ttl_without_the_server(crashable: EtcdServer) -> None:
    async def scenario() -> None:
        url = crashable.url_for() + "?timeout=1"
        m = await open_backend(url)
        try:
            session = await m.open_session(2)
            states = StateLog(session)
            await m.commit([Check("eph", 0)], [Put("eph", b"1", session)])
            crashable.kill()
            killed = time.monotonic()
            await states.reached(SessionState.SUSPENDED, timeout_s=5)
            lost_at = await states.reached(SessionState.LOST, timeout_s=10)
            assert lost_at - killed <= session.ttl_s + 1
            assert states.states == [SessionState.SUSPENDED, SessionState.LOST]
            with pytest.raises(SessionLostError):
                await m.commit([Check("eph2", 0)], [Put("eph2", b"1", session)])
            # etcd restores leases with a fresh TTL on restart; the lost session revokes its own.
            crashable.start()
            observer = await open_backend(url)
            try:
                took = await eventually(lambda: _absent(observer, "eph"), "the lost session's key is revoked", 10)
                assert took < session.ttl_s + 1
            finally:
                await observer.close()
            assert session.state is SessionState.LOST
        finally:
            await m.close()

    run(scenario(), crashable)


async def _absent(metastore: Metastore, key: str) -> bool:
    try:
        return await metastore.get(key) is None
    except UnavailableError:
        return False


# -- watches -------------------------------------------------------------------------------------


def test_watch_reports_changes_under_its_prefix_only(url: str, etcd_server: EtcdServer) -> None:
    async def scenario() -> None:
        m = await open_backend(url)
        neighbour = await open_backend(url + "-n")
        watch = m.watch("a/")
        try:
            assert await next_event(watch) == Resync()
            await m.commit([Check("a/1", 0)], [Put("a/1", b"x")])
            assert await next_event(watch) == Changed(frozenset({"a/1"}))
            await m.commit([Check("a/1", 1)], [Put("a/1", b"y")])
            assert await next_event(watch) == Changed(frozenset({"a/1"}))
            # Outside the prefix: a sibling key, another prefix, another root. No event.
            await m.commit([Check("ab", 0), Check("b/1", 0)], [Put("ab", b"x"), Put("b/1", b"x")])
            await neighbour.commit([Check("a/1", 0)], [Put("a/1", b"x")])
            # One commit touching two keys and a delete: one event naming them.
            await m.commit([Check("a/1", 2), Check("a/2", 0)], [Delete("a/1"), Put("a/2", b"z")])
            assert await next_event(watch) == Changed(frozenset({"a/1", "a/2"}))
            session = await m.open_session(5)
            await m.commit([Check("a/e", 0)], [Put("a/e", b"e", session)])
            assert await next_event(watch) == Changed(frozenset({"a/e"}))
            await session.close()
            assert await next_event(watch) == Changed(frozenset({"a/e"}))
        finally:
            await watch.aclose()
            await m.close()
            await neighbour.close()

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


def test_leader_crash_keeps_sessions_commits_and_watches(etcd_cluster: EtcdCluster) -> None:
    leader = etcd_cluster.leader()
    followers = [member for member in etcd_cluster.members if member is not leader]
    # Every client's first endpoint is the leader, so the crash hits the member each one talks to.
    endpoints = ",".join(member.endpoint for member in [leader, *followers])
    url = f"etcd://{endpoints}/t-leader-crash?timeout=3"

    async def scenario() -> dict[str, object]:
        owner = await open_backend(url)  # only keeps its session alive: its keepalives must fail over
        writer = await open_backend(url)
        watcher = await open_backend(url)
        try:
            session = await owner.open_session(5)
            states = StateLog(session)
            await owner.commit([Check("members/me", 0)], [Put("members/me", b"alive", session)])
            await commit_retrying(writer, "counter", b"0")
            async with Mirror(watcher, "") as mirror:
                leader.kill()
                killed = time.monotonic()
                await commit_retrying(writer, "counter", b"1")
                first_commit = time.monotonic() - killed
                i = 1
                while time.monotonic() - killed < session.ttl_s + 1:  # outlive the TTL: keepalives went elsewhere
                    i += 1
                    await commit_retrying(writer, "counter", str(i).encode())
                await mirror.converged()
                assert mirror.view is not None and mirror.view["counter"] == str(i).encode()
            await states.reached(SessionState.CONNECTED)
            assert SessionState.LOST not in states.states
            assert await writer.get("members/me") == Versioned(b"alive", 1, session.id)
            assert etcd_cluster.leader() is not leader
            await session.close()
            assert await writer.get("members/me") is None
            return {"first commit after kill (s)": round(first_commit, 3), "session states": states.states}
        finally:
            await watcher.close()
            await writer.close()
            await owner.close()

    try:
        print(run(scenario(), etcd_cluster))
    finally:
        if not leader.running:
            etcd_cluster.restart(leader)


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
