"""The ZooKeeper backend's own cases, against real ZooKeeper servers.

What every backend must do (keys, sessions, watches, outages, a killed ensemble leader) is the
shared contract's (barnabas.coordination.testing.contract and .outages, run by test_contract.py);
here are only ZooKeeper's: its URL and chroot, keys as node names, its request limit, a list read
node by node, one session per multi, negotiated session timeouts, a frozen owner's session expiring
on the server, and a key that came and went within one multi.

Every test opens the backend by URL under its own chroot. Waits are conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from barnabas.coordination.api import (
    Changed,
    Check,
    Metastore,
    Put,
    Resync,
    Versioned,
)
from barnabas.coordination.backends.zookeeper import open_backend
from barnabas.coordination.backends.zookeeper._layout import key_of, node_name, parse_url
from tests.contract.servers.zookeeper import ZooKeeperEnsemble, ZooKeeperServer
from tests.contract.support import eventually, next_event, run_scenario

# The zookeeper_server (session) and zookeeper_ensemble fixtures come from tests/contract/conftest.py.

T = TypeVar("T")
TEST_TIMEOUT_S = 60.0


def run(coro: Coroutine[Any, Any, T], *servers: ZooKeeperServer | ZooKeeperEnsemble) -> T:
    return run_scenario(coro, *servers, timeout_s=TEST_TIMEOUT_S)


async def absent(metastore: Metastore, key: str) -> bool:
    return await metastore.get(key) is None


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


def test_one_commit_takes_ephemeral_keys_of_one_session(zookeeper_server: ZooKeeperServer) -> None:
    """A multi binds to one ZooKeeper session: ephemerals of two sessions in one commit are refused up front."""

    async def scenario() -> None:
        m = await open_backend(zookeeper_server.url_for())
        try:
            s1, s2 = await m.open_session(2.0), await m.open_session(2.0)
            with pytest.raises(ValueError):
                await m.commit([Check("e/3", 0), Check("e/4", 0)], [Put("e/3", b"", s1), Put("e/4", b"", s2)])
            assert await m.list("") == {}
            # Only creates bind the multi: an update naming another session (which keeps its key's) may join.
            await m.commit([Check("p", 0)], [Put("p", b"")])
            await m.commit([Check("e/3", 0), Check("p", 1)], [Put("e/3", b"", s1), Put("p", b"x", s2)])
            assert await m.get("e/3") == Versioned(b"", 1, s1.id) and await m.get("p") == Versioned(b"x", 2, None)
        finally:
            await m.close()

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


# -- watches --------------------------------------------------------------------------------------


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
