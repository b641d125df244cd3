"""The ZooKeeper backend against real ZooKeeper servers: a shared standalone node, private nodes we
stop and restart, and a three-node ensemble whose leader we kill.

Every test opens the backend by URL under its own chroot. Waits are conditions with deadlines; the
only time bounds asserted are the contract's (an ephemeral key of a killed process is gone within
ttl + one keepalive interval + 1 s; kazoo pings after a third of the session timeout).
"""

from __future__ import annotations

import asyncio
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
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
from barnabas.coordination.backends.zookeeper import open_backend
from barnabas.coordination.backends.zookeeper._layout import key_of, node_name, parse_url
from barnabas.coordination.errors import (
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from tests.contract.servers.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, free_ports
from tests.contract.support import StateLog, eventually, next_event, run_scenario

# The zookeeper_server (session) and zookeeper_ensemble fixtures come from tests/contract/conftest.py.

T = TypeVar("T")
TEST_TIMEOUT_S = 60.0


def run(coro: Coroutine[Any, Any, T], *servers: ZooKeeperServer | ZooKeeperEnsemble) -> T:
    return run_scenario(coro, *servers, timeout_s=TEST_TIMEOUT_S)


async def absent(metastore: Metastore, key: str) -> bool:
    return await metastore.get(key) is None


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A standalone server of this test's own, which it may stop, restart or pause."""
    server = ZooKeeperServer(tmp_path).start()
    yield server
    server.stop()


# -- layout (no server) --------------------------------------------------------------------------


def test_url_parsing() -> None:
    url = parse_url("zookeeper://127.0.0.1:2181,127.0.0.1:2182/apps/kafka")
    assert (url.hosts, url.chroot, url.kv_path) == ("127.0.0.1:2181,127.0.0.1:2182", "/apps/kafka", "/apps/kafka/kv")
    assert parse_url("zookeeper://zk").hosts == "zk:2181"
    assert parse_url("zookeeper://zk:2181").chroot == "/barnabas"
    assert parse_url("zookeeper://zk:2181/").chroot == "/barnabas"
    assert parse_url("zookeeper://[::1]:2181/x").hosts == "[::1]:2181"
    assert parse_url("zookeeper://zk/x?op_timeout=2.5").op_timeout_s == 2.5
    for bad in (
        "etcd://zk:2181/x",
        "zookeeper:///x",
        "zookeeper://zk:port/x",
        "zookeeper://zk:2181/a//b",
        "zookeeper://zk:2181/a/../b",
        "zookeeper://zk:2181/zookeeper",
        "zookeeper://zk:2181/x?timeout=1",
        "zookeeper://zk:2181/x?op_timeout=0",
    ):
        with pytest.raises(ValueError):
            parse_url(bad)


def test_key_encoding_is_one_node_name_and_reversible() -> None:
    for key in (
        "a",
        "a/b/c",
        "/lead",
        "trail/",
        "100%",
        "%2F",
        ".",
        "..",
        "...",
        "a b",
        "ünï/cödé",
        "x\n\x00y",
        "~!@#",
    ):
        name = node_name(key)
        assert "/" not in name and name not in ("", ".", ".."), (key, name)
        assert all(0x21 <= ord(c) < 0x7F for c in name), name
        assert key_of(name) == key
    assert node_name("brokers/ids/1") == "brokers%2Fids%2F1"
    assert node_name("100%") == "100%25"
    assert key_of("not%ZZvalid") is None
    assert key_of("%41") is None  # we would have written "A"
    with pytest.raises(ValueError):
        node_name("")


# -- versioned keys and commits -------------------------------------------------------------------


def test_what_the_server_would_drop_is_refused_up_front(zookeeper_server: ZooKeeperServer) -> None:
    """Past ZooKeeper's request limit (jute.maxbuffer, 1 MB) the server drops the connection; an empty key or
    a negative version has no znode form: refused before sending. (Uncovered ops are the shared contract's.)"""

    async def scenario() -> None:
        m = await open_backend(zookeeper_server.url_for())
        try:
            for checks, ops in [([Check("a", -1)], []), ([Check("", 0)], [Put("", b"x")])]:
                with pytest.raises(ValueError):
                    await m.commit(checks, ops)
            with pytest.raises(ValueError):
                await m.commit([Check("big", 0)], [Put("big", b"x" * 1_000_001)])
            assert await m.list("") == {}
            assert await m.commit([Check("big", 0)], [Put("big", b"x" * 900_000)]) == {"big": 1}
            assert (await m.get("big")) == Versioned(b"x" * 900_000, 1)
        finally:
            await m.close()

    run(scenario(), zookeeper_server)


def test_list_prefix_order_and_odd_keys(zookeeper_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        m = await open_backend(zookeeper_server.url_for())
        try:
            keys = ["brokers/ids/2", "brokers/ids/10", "brokers/topics/t/partitions/0/state", "100%", "a b", "ü/ß", "."]
            for key in keys:
                await m.commit([Check(key, 0)], [Put(key, key.encode())])
            everything = await m.list("")
            assert list(everything) == sorted(keys)
            assert all(v == Versioned(k.encode(), 1) for k, v in everything.items())
            assert list(await m.list("brokers/ids/")) == ["brokers/ids/10", "brokers/ids/2"]
            assert list(await m.list("brokers/")) == [k for k in sorted(keys) if k.startswith("brokers/")]
            assert await m.list("nothing") == {}
            assert await m.get("100%") == Versioned(b"100%", 1)
        finally:
            await m.close()

    run(scenario(), zookeeper_server)


def test_list_is_a_snapshot_under_concurrent_commits(zookeeper_server: ZooKeeperServer) -> None:
    """Two keys always written together: a snapshot never shows them at different versions."""

    async def scenario() -> None:
        url = zookeeper_server.url_for()
        writer, reader = await open_backend(url), await open_backend(url)
        try:
            await writer.commit([Check("p/a", 0), Check("p/b", 0)], [Put("p/a", b"0"), Put("p/b", b"0")])
            stop = asyncio.Event()

            async def write() -> None:
                version = 1
                while not stop.is_set():
                    value = str(version).encode()
                    await writer.commit(
                        [Check("p/a", version), Check("p/b", version)], [Put("p/a", value), Put("p/b", value)]
                    )
                    version += 1

            task = asyncio.create_task(write())
            for _ in range(60):
                snapshot = await reader.list("p/")
                assert snapshot["p/a"] == snapshot["p/b"], snapshot
            stop.set()
            await task
        finally:
            await writer.close()
            await reader.close()

    run(scenario(), zookeeper_server)


# -- sessions and ephemeral keys ------------------------------------------------------------------


def test_ephemeral_keys_follow_their_session(zookeeper_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        url = zookeeper_server.url_for()
        m, other = await open_backend(url), await open_backend(url)
        try:
            s1 = await m.open_session(2.0)
            s2 = await m.open_session(2.0)
            assert s1.state is SessionState.CONNECTED and s1.id != s2.id
            assert s1.ttl_s == 2.0  # within the server's [0.4, 4] s bounds: granted as asked
            states = StateLog(s1)
            assert await m.commit([Check("e/1", 0)], [Put("e/1", b"a", s1)]) == {"e/1": 1}
            assert await m.commit([Check("p/1", 0)], [Put("p/1", b"p")]) == {"p/1": 1}
            assert await other.get("e/1") == Versioned(b"a", 1, s1.id)
            assert await other.get("p/1") == Versioned(b"p", 1, None)
            # A key's session is fixed at creation: later puts (with or without a session) keep it.
            assert await m.commit([Check("e/1", 1)], [Put("e/1", b"b")]) == {"e/1": 2}
            assert await m.commit([Check("e/1", 2)], [Put("e/1", b"c", s2)]) == {"e/1": 3}
            assert await other.get("e/1") == Versioned(b"c", 3, s1.id)
            # One commit may mix an ephemeral create with other writes.
            await m.commit([Check("e/2", 0), Check("p/1", 1)], [Put("e/2", b"x", s1), Put("p/1", b"q")])
            assert (await other.get("e/2")) == Versioned(b"x", 1, s1.id)
            # ... but not ephemerals of two ZooKeeper sessions.
            with pytest.raises(ValueError):
                await m.commit([Check("e/3", 0), Check("e/4", 0)], [Put("e/3", b"", s1), Put("e/4", b"", s2)])
            # A session belongs to the metastore that opened it.
            with pytest.raises(ValueError):
                await other.commit([Check("e/5", 0)], [Put("e/5", b"", s1)])

            await s1.close()
            assert s1.state is SessionState.LOST and states.states[-1] is SessionState.LOST
            # Closing ends the ZooKeeper session: its ephemerals are gone by the time close() returns.
            assert await other.get("e/1") is None and await other.get("e/2") is None
            assert await other.get("p/1") == Versioned(b"q", 2, None)
            with pytest.raises(SessionLostError):
                await m.commit([Check("e/6", 0)], [Put("e/6", b"", s1)])
            with pytest.raises(SessionLostError):
                await m.commit([Check("p/1", None)], [Put("p/1", b"", s1)])
            await s1.close()  # idempotent
            await m.commit([Check("e/6", 0)], [Put("e/6", b"", s2)])
        finally:
            await m.close()  # closes s2 too
        try:
            assert await other.get("e/6") is None
        finally:
            await other.close()

    run(scenario(), zookeeper_server)


def test_ttl_is_the_negotiated_session_timeout(zookeeper_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        m = await open_backend(zookeeper_server.url_for())
        try:
            short = await m.open_session(0.1)
            long = await m.open_session(60.0)
            # The server clamps to [minSessionTimeout, maxSessionTimeout] = [0.4, 4.0] s here.
            assert short.ttl_s == zookeeper_server.min_session_timeout_ms / 1000
            assert long.ttl_s == zookeeper_server.max_session_timeout_ms / 1000
            granted = zookeeper_server.session_timeouts_ms()
            assert granted[int(short.id, 16)] == 400 and granted[int(long.id, 16)] == 4000
            with pytest.raises(ValueError):
                await m.open_session(0)
        finally:
            await m.close()

    run(scenario(), zookeeper_server)


OWNER_SCRIPT = """
import asyncio, sys
from barnabas.coordination.api import Check, Put, SessionState
from barnabas.coordination.registry import open_metastore

async def main(url, key, ttl):
    metastore = await open_metastore(url)
    session = await metastore.open_session(float(ttl))
    lost = asyncio.Event()

    def on_state(state):
        print("state", state.value, flush=True)
        if state is SessionState.LOST:
            lost.set()

    session.add_state_listener(on_state)
    await metastore.commit([Check(key, 0)], [Put(key, b"owned", session)])
    print("ready", session.id, session.ttl_s, flush=True)
    await lost.wait()
    try:
        await metastore.commit([Check(key + "/again", 0)], [Put(key + "/again", b"", session)])
    except Exception as exc:
        print("commit after loss:", type(exc).__name__, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(*sys.argv[1:]))
"""


class OwnerProcess:
    """A real process holding an ephemeral key; its stdout lines are collected by a thread."""

    def __init__(self, url: str, key: str, ttl_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", OWNER_SCRIPT, url, key, str(ttl_s)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    async def wait_line(self, prefix: str, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                await asyncio.sleep(0.02)
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"owner process printed no {prefix!r} line; output: {self.seen}")

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def owner_processes() -> Iterator[list[OwnerProcess]]:
    started: list[OwnerProcess] = []
    yield started
    for owner in started:
        owner.kill()


def test_ephemeral_key_of_a_killed_process_vanishes_within_ttl(
    zookeeper_server: ZooKeeperServer, owner_processes: list[OwnerProcess]
) -> None:
    async def scenario() -> None:
        url = zookeeper_server.url_for()
        m = await open_backend(url)
        try:
            owner = OwnerProcess(url, "members/owner", 1.0)
            owner_processes.append(owner)
            _, session_id, ttl = (await owner.wait_line("ready")).split()
            assert (await m.get("members/owner")) == Versioned(b"owned", 1, session_id)
            killed = time.monotonic()
            owner.kill()  # SIGKILL: no close, no goodbye
            await eventually(lambda: absent(m, "members/owner"), "ephemeral key removed", 10.0)
            gone_after = time.monotonic() - killed
            keepalive = float(ttl) / 3
            assert gone_after < float(ttl) + keepalive + 1.0, gone_after
        finally:
            await m.close()

    run(scenario(), zookeeper_server)


@pytest.mark.parametrize("servers", ["zookeeper_server", "zookeeper_ensemble"])
def test_session_expiry_of_a_stopped_process_is_lost_and_drops_its_keys(
    servers: str, request: pytest.FixtureRequest, owner_processes: list[OwnerProcess]
) -> None:
    """SIGSTOP the owner past its timeout: the servers expire it; once resumed, it observes LOST."""
    zookeeper: ZooKeeperServer | ZooKeeperEnsemble = request.getfixturevalue(servers)

    async def scenario() -> None:
        url = zookeeper.url_for()
        m = await open_backend(url)
        try:
            owner = OwnerProcess(url, "members/sleeper", 0.8)
            owner_processes.append(owner)
            await owner.wait_line("ready")
            owner.signal(signal.SIGSTOP)
            await eventually(lambda: absent(m, "members/sleeper"), "expired session's key removed", 10.0)
            owner.signal(signal.SIGCONT)
            await owner.wait_line("state lost", 20.0)
            assert await owner.wait_line("commit after loss") == "commit after loss: SessionLostError"
            assert [line for line in owner.seen if line.startswith("state")][-1] == "state lost", owner.seen
            assert await m.get("members/sleeper/again") is None
        finally:
            await m.close()

    run(scenario(), zookeeper)


def restartable_url(server: ZooKeeperServer) -> str:
    """A URL naming ``server`` twice, for tests that restart it.

    ZooKeeper 3.8.0 accepts connections while it starts but, failing to close them (a
    NullPointerException in ``removeCnxn`` before its database is loaded), neither answers nor drops
    them; kazoo waits for a connect reply for the session timeout divided by the number of hosts.
    With one host that wait outlasts the session the server has just restored; with two it retries in
    time. (In an ensemble a client moves on to another member after a third of its timeout.)
    """
    return f"zookeeper://{server.endpoint},{server.endpoint}/t-{uuid.uuid4().hex[:12]}"


def test_states_across_a_frozen_server(private_zookeeper: ZooKeeperServer) -> None:
    """Server frozen (SIGSTOP): SUSPENDED; thawed before the session times out: CONNECTED, same session."""

    async def scenario() -> None:
        m = await open_backend(private_zookeeper.url_for())
        try:
            session = await m.open_session(4.0)
            states = StateLog(session)
            await m.commit([Check("e", 0)], [Put("e", b"kept", session)])
            private_zookeeper.pause()
            try:
                await states.reached(SessionState.SUSPENDED, 10.0)
            finally:
                private_zookeeper.resume()
            await states.reached(SessionState.CONNECTED)
            assert states.states == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert await m.get("e") == Versioned(b"kept", 1, session.id)
        finally:
            await m.close()

    run(scenario(), private_zookeeper)


def test_states_across_a_server_restart(private_zookeeper: ZooKeeperServer) -> None:
    """Server down: SUSPENDED (calls fail as unavailable); back before expiry: CONNECTED, same session."""

    async def scenario() -> None:
        url = restartable_url(private_zookeeper)
        m = await open_backend(url)
        impatient = await open_backend(url + "?op_timeout=0.5")
        try:
            session = await m.open_session(4.0)
            states = StateLog(session)
            await m.commit([Check("e", 0)], [Put("e", b"kept", session)])
            await asyncio.to_thread(private_zookeeper.stop)
            await states.reached(SessionState.SUSPENDED)
            with pytest.raises(UnavailableError):
                await impatient.get("e")
            with pytest.raises(UnavailableError):
                await impatient.commit([Check("x", 0)], [Put("x", b"")])
            await asyncio.to_thread(private_zookeeper.start)
            # The server restores sessions from its log and restarts their clocks on start-up.
            await states.reached(SessionState.CONNECTED)
            assert states.states == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert session.state is SessionState.CONNECTED
            assert await m.get("e") == Versioned(b"kept", 1, session.id)
            assert await m.commit([Check("e", 1)], [Put("e", b"still", session)]) == {"e": 2}
        finally:
            await impatient.close()
            await m.close()

    run(scenario(), private_zookeeper)


def test_unreachable_server_is_unavailable() -> None:
    async def scenario() -> None:
        (port,) = free_ports(1)
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            await open_backend(f"zookeeper://127.0.0.1:{port}/x?op_timeout=0.5")
        assert time.monotonic() - started < 10

    run(scenario())


# -- watches --------------------------------------------------------------------------------------


def test_watch_reports_changes_under_its_prefix(zookeeper_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        url = zookeeper_server.url_for()
        m, writer = await open_backend(url), await open_backend(url)
        events = m.watch("topics/")
        try:
            assert await next_event(events) == Resync()
            await writer.commit([Check("other/x", 0)], [Put("other/x", b"")])  # outside the prefix
            await writer.commit([Check("topics/a", 0)], [Put("topics/a", b"1")])
            assert await next_event(events) == Changed(frozenset({"topics/a"}))
            await writer.commit([Check("topics/a", 1)], [Put("topics/a", b"2")])
            assert await next_event(events) == Changed(frozenset({"topics/a"}))
            await writer.commit([Check("topics/a", None)], [Delete("topics/a")])
            assert await next_event(events) == Changed(frozenset({"topics/a"}))
            session = await writer.open_session(1.0)
            await writer.commit([Check("topics/e", 0)], [Put("topics/e", b"", session)])
            assert await next_event(events) == Changed(frozenset({"topics/e"}))
            await session.close()  # the ephemeral's removal is a change too
            assert await next_event(events) == Changed(frozenset({"topics/e"}))
            # Nothing outside the prefix ever showed up; one more write proves the stream is idle.
            await writer.commit([Check("other/x", 1)], [Delete("other/x")])
            await writer.commit([Check("topics/b", 0)], [Put("topics/b", b"")])
            assert await next_event(events) == Changed(frozenset({"topics/b"}))
            # A second watcher starts with Resync too.
            second = m.watch("")
            assert await next_event(second) == Resync()
            await writer.commit([Check("zz", 0)], [Put("zz", b"")])
            assert await next_event(second) == Changed(frozenset({"zz"}))
            await second.aclose()
        finally:
            await events.aclose()
            await writer.close()
            await m.close()

    run(scenario(), zookeeper_server)


def test_a_key_that_came_and_went_unseen_means_resync(zookeeper_server: ZooKeeperServer) -> None:
    """An absence check is a create and a delete in one multi: the children changed, nothing visible did."""

    async def scenario() -> None:
        url = zookeeper_server.url_for()
        m, writer = await open_backend(url), await open_backend(url)
        events = m.watch("")
        try:
            assert await next_event(events) == Resync()
            await writer.commit([Check("ghost", 0)], [])
            assert await next_event(events) == Resync()
            await writer.commit([Check("real", 0)], [Put("real", b"")])
            assert await next_event(events) == Changed(frozenset({"real"}))
        finally:
            await events.aclose()
            await writer.close()
            await m.close()

    run(scenario(), zookeeper_server)


def test_watch_resyncs_after_a_server_restart(private_zookeeper: ZooKeeperServer) -> None:
    async def scenario() -> None:
        m = await open_backend(restartable_url(private_zookeeper))
        events = m.watch("k/")
        try:
            assert await next_event(events) == Resync()
            await m.commit([Check("k/1", 0)], [Put("k/1", b"")])
            assert await next_event(events) == Changed(frozenset({"k/1"}))
            await asyncio.to_thread(private_zookeeper.restart)
            assert await next_event(events, 20.0) == Resync()
            await m.commit([Check("k/2", 0)], [Put("k/2", b"")])
            assert await next_event(events) == Changed(frozenset({"k/2"}))
        finally:
            await events.aclose()
            await m.close()

    run(scenario(), private_zookeeper)


def test_a_consumer_that_rereads_on_every_event_converges(zookeeper_server: ZooKeeperServer) -> None:
    """Random concurrent writers, including keys that come and go quickly and absence checks."""

    async def scenario() -> None:
        url = zookeeper_server.url_for()
        consumer, writers = await open_backend(url), [await open_backend(url) for _ in range(3)]
        session = await writers[0].open_session(4.0)
        view: dict[str, Versioned] = {}
        events_seen: list[WatchEvent] = []

        async def consume() -> None:
            async for event in consumer.watch("c/"):
                events_seen.append(event)
                view.clear()
                view.update(await consumer.list("c/"))

        async def write(writer: Metastore, seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(120):
                key = rng.choice(["c/1", "c/2", "c/3", "c/4/deep", "d/outside"])
                current = await writer.get(key)
                try:
                    if rng.random() < 0.1:
                        await writer.commit([Check(key, current.version if current else 0)], [])
                    elif current is None:
                        eph = session if writer is writers[0] and rng.random() < 0.3 else None
                        await writer.commit([Check(key, 0)], [Put(key, b"new", eph)])
                        if rng.random() < 0.3:  # a key that lives for an instant
                            await writer.commit([Check(key, 1)], [Delete(key)])
                    elif rng.random() < 0.4:
                        await writer.commit([Check(key, current.version)], [Delete(key)])
                    else:
                        await writer.commit([Check(key, current.version)], [Put(key, str(seed).encode())])
                except VersionConflictError:
                    pass

        consumer_task = asyncio.create_task(consume())
        try:
            await eventually(lambda: bool(events_seen), "the first event")
            await asyncio.gather(*(write(w, i) for i, w in enumerate(writers)))
            truth = await writers[1].list("c/")
            await eventually(lambda: view == truth, f"consumer view {view} == {truth}", 15.0)
            assert events_seen[0] == Resync()
            await session.close()  # its ephemerals go: the consumer sees that too
            truth = await writers[1].list("c/")
            await eventually(lambda: view == truth, f"after close: {view} == {truth}", 15.0)
        finally:
            consumer_task.cancel()
            await asyncio.gather(consumer_task, return_exceptions=True)
            for metastore in [consumer, *writers]:
                await metastore.close()

    run(scenario(), zookeeper_server)


# -- a three-node ensemble ------------------------------------------------------------------------


def test_leader_crash_keeps_the_session_and_commits_resume(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    async def scenario() -> None:
        url = zookeeper_ensemble.url_for() + "?op_timeout=20"
        m = await open_backend(url)
        seen: list[WatchEvent] = []

        async def collect() -> None:
            async for event in m.watch(""):
                seen.append(event)

        collector = asyncio.create_task(collect())
        try:
            await eventually(lambda: seen == [Resync()], "the first Resync")
            session = await m.open_session(4.0)
            states = StateLog(session)
            await m.commit([Check("leader/ephemeral", 0)], [Put("leader/ephemeral", b"x", session)])
            await m.commit([Check("counter", 0)], [Put("counter", b"0")])

            leader = await asyncio.to_thread(zookeeper_ensemble.leader)
            await asyncio.to_thread(leader.kill)  # SIGKILL: followers drop their clients and elect a leader
            await states.reached(SessionState.SUSPENDED)
            await states.reached(SessionState.CONNECTED)
            assert session.state is SessionState.CONNECTED
            assert await asyncio.to_thread(zookeeper_ensemble.leader) is not leader

            # Commits go on; one caught in the election may fail as unavailable (and may have applied).
            for _ in range(20):
                while True:
                    try:
                        current = await m.get("counter")
                        assert current is not None
                        await m.commit([Check("counter", current.version)], [Put("counter", b"%d" % current.version)])
                        break
                    except UnavailableError:
                        continue
            final = await m.get("counter")
            assert final is not None and final.version >= 21
            assert await m.get("leader/ephemeral") == Versioned(b"x", 1, session.id)
            # The watch noticed the connection drop and resynced.
            await eventually(lambda: Resync() in seen[1:], "a Resync after the failover")

            await asyncio.to_thread(leader.start)  # the old leader rejoins as a follower
            await session.close()
            assert await m.get("leader/ephemeral") is None
        finally:
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)
            await m.close()

    run(scenario(), zookeeper_ensemble)
