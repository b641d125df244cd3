"""The contract while a backend's server is away: killed, frozen, restarted, or never there.

These checks take a :class:`~.contract.Target`'s server down through its ``server`` hook (or its
cluster's leader through ``kill_server_leader``) and raise AssertionError when the backend breaks
api.py on the way down, while down, or on the way back. A target without the hook a check needs is
a mistake in the test's parametrisation (AssertionError), never a silent pass. The pytest module is
tests/contract/test_contract.py, which runs each check on the backends it applies to.

Rules these checks keep:

- The server is always running again when a check ends, passed or failed (``finally``).
- The session TTL of a check that brings the server back is the target's ``outage_ttl_s``; a check
  that lets the lease run out uses ``ttl_s``.
- Calls that may meet the outage retry on UnavailableError, re-reading before a compare-and-set, as
  a careful caller does; waits are conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

from ..api import Check, Metastore, Put, Resync, Session, SessionState, Versioned, WatchEvent
from ..election import LeaderElection
from ..errors import FencedError, SessionLostError, UnavailableError, VersionConflictError
from ..listeners import ListenerRegistry
from ..registry import open_metastore
from ..storage import Storage
from .contract import Server, Target, eventually, first_event_is_resync, named, opened

__all__ = [
    "check_an_unreachable_server_is_unavailable",
    "check_election_survives_server_leader_kill",
    "check_listeners_resync_after_server_restart",
    "check_session_is_lost_when_the_server_is_down_past_its_ttl",
    "check_session_rides_out_a_paused_server",
    "check_session_rides_out_a_server_restart",
]

T = TypeVar("T")

#: How soon opening a URL whose server nobody runs must fail.
UNREACHABLE_WITHIN_S = 10.0


def _server(target: Target) -> Server:
    if target.server is None:
        raise AssertionError(f"{target.name} has no server to take down; do not run this check for it")
    return target.server


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` again after UnavailableError, as any client riding out a server outage does."""
    while True:
        try:
            return await call()
        except UnavailableError:
            await asyncio.sleep(0.05)


async def _put_retrying(metastore: Metastore, key: str, value: bytes) -> int:
    """Put ``key`` by re-read and compare-and-set until an answer (an unanswered commit may have applied)."""
    while True:
        try:
            current = await metastore.get(key)
            checks = [Check(key, current.version if current else 0)]
            return (await metastore.commit(checks, [Put(key, value)]))[key]
        except (UnavailableError, VersionConflictError):
            await asyncio.sleep(0.05)


def _in_state(session: Session, state: SessionState) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return session.state is state

    return check


async def _reported(watch: AsyncGenerator[WatchEvent, None], key: str, timeout_s: float) -> None:
    """Read ``watch`` until an event covers a change of ``key``: a Changed naming it, or a Resync."""
    try:
        async with asyncio.timeout(timeout_s):
            while not isinstance(event := await anext(watch), Resync) and key not in event.keys:
                pass
    except TimeoutError:
        raise AssertionError(f"no Resync, and no Changed naming {key!r}, within {timeout_s} s") from None


async def check_an_unreachable_server_is_unavailable(target: Target) -> None:
    """Opening a URL whose server nobody runs fails with UnavailableError, and promptly."""
    if target.unreachable_url is None:
        raise AssertionError(f"{target.name} names no unreachable server; do not run this check for it")
    started = time.monotonic()
    try:
        async with asyncio.timeout(UNREACHABLE_WITHIN_S):
            metastore = await open_metastore(target.unreachable_url)
    except UnavailableError:
        pass
    except TimeoutError:
        raise AssertionError(f"opening {target.unreachable_url} neither failed nor succeeded in time") from None
    else:
        await metastore.close()
        raise AssertionError(f"opened {target.unreachable_url}, where no server runs")
    took = time.monotonic() - started
    assert took < UNREACHABLE_WITHIN_S, f"UnavailableError after {took:.1f} s"


async def check_session_rides_out_a_server_restart(target: Target) -> None:
    """The server is killed and started again within the session's TTL: the same session comes back with its keys.

    While the server is down the session is SUSPENDED and calls fail as unavailable; once it is back
    the session is CONNECTED (SUSPENDED then CONNECTED, nothing else), its ephemeral key is there
    and it can make new ones. A watch goes on through the outage: the first change after it is
    named or covered by a Resync (a watch that reconnects when pulled may not know what it
    missed), and the next one is named.
    """
    server = _server(target)
    url = target.outage_url or target.url
    async with opened(target, url) as metastore, opened(target, url) as writer:
        session = await metastore.open_session(target.outage_ttl_s)
        states: list[SessionState] = []
        session.add_state_listener(states.append)
        await metastore.commit(
            [Check("out/eph", 0), Check("out/per", 0)], [Put("out/eph", b"1", session), Put("out/per", b"1")]
        )
        watch = metastore.watch("out/")
        try:
            await first_event_is_resync(watch, target.notify_timeout_s)
            await asyncio.to_thread(server.kill)
            try:
                await eventually(_in_state(session, SessionState.SUSPENDED), session.ttl_s, "SUSPENDED, server down")
                try:
                    await metastore.get("out/per")
                except UnavailableError:
                    pass
                else:
                    raise AssertionError("a get succeeded with the server down")
            finally:
                await asyncio.to_thread(server.start)
            await eventually(_in_state(session, SessionState.CONNECTED), session.ttl_s, "CONNECTED, server back")
            assert states == [SessionState.SUSPENDED, SessionState.CONNECTED], states
            assert await _retrying(lambda: metastore.get("out/eph")) == Versioned(b"1", 1, session.id)
            versions = await _retrying(
                lambda: metastore.commit([Check("out/eph2", 0)], [Put("out/eph2", b"", session)])
            )
            assert versions == {"out/eph2": 1}
            await _put_retrying(writer, "out/after", b"1")
            await _reported(watch, "out/after", target.notify_timeout_s)
            await writer.commit([Check("out/next", 0)], [Put("out/next", b"1")])
            await named(watch, "out/", {"out/next"}, target.notify_timeout_s)
            await session.close()
        finally:
            await watch.aclose()


async def check_session_rides_out_a_paused_server(target: Target) -> None:
    """The server freezes (SIGSTOP) and thaws: SUSPENDED before the lease could end, then CONNECTED with its keys.

    A frozen server answers nothing and reports no error: only the keepalive's own deadline can notice.
    """
    server = _server(target)
    async with opened(target, target.outage_url) as metastore:
        session = await metastore.open_session(target.outage_ttl_s)
        states: list[SessionState] = []
        session.add_state_listener(states.append)
        await metastore.commit([Check("frozen/eph", 0)], [Put("frozen/eph", b"1", session)])
        paused = time.monotonic()
        await asyncio.to_thread(server.pause)
        try:
            await eventually(_in_state(session, SessionState.SUSPENDED), session.ttl_s, "SUSPENDED, server frozen")
            took = time.monotonic() - paused
            assert took < session.ttl_s, f"SUSPENDED {took:.1f} s after the freeze, past the {session.ttl_s} s TTL"
        finally:
            await asyncio.to_thread(server.resume)
        await eventually(_in_state(session, SessionState.CONNECTED), session.ttl_s, "CONNECTED, server thawed")
        assert states == [SessionState.SUSPENDED, SessionState.CONNECTED], states
        assert await _retrying(lambda: metastore.get("frozen/eph")) == Versioned(b"1", 1, session.id)
        await session.close()


async def check_session_is_lost_when_the_server_is_down_past_its_ttl(target: Target) -> None:
    """The server is down past the session's TTL: SUSPENDED, then LOST, and its key is gone once the server is back.

    For backends whose lease runs on while their server is down (etcd, PostgreSQL, Cassandra; a
    ZooKeeper server restarts its sessions' clocks when it starts). LOST comes within the TTL plus
    the target's slack of the crash, is final, and a put with the session is refused.
    """
    server = _server(target)
    async with opened(target, target.outage_url) as metastore:
        session = await metastore.open_session(target.ttl_s)
        states: list[SessionState] = []
        session.add_state_listener(states.append)
        await metastore.commit(
            [Check("gone/eph", 0), Check("gone/per", 0)], [Put("gone/eph", b"1", session), Put("gone/per", b"1")]
        )
        await asyncio.to_thread(server.kill)
        try:
            limit = session.ttl_s + target.vanish_slack_s
            await eventually(_in_state(session, SessionState.LOST), limit, "LOST with the server down past the TTL")
            assert states == [SessionState.SUSPENDED, SessionState.LOST], states
            try:
                await metastore.commit([Check("gone/late", 0)], [Put("gone/late", b"1", session)])
            except SessionLostError:
                pass
            else:
                raise AssertionError("a put with a lost session succeeded")
        finally:
            await asyncio.to_thread(server.start)

        async def gone() -> bool:
            try:
                return await metastore.get("gone/eph") is None
            except UnavailableError:
                return False

        await eventually(gone, session.ttl_s + target.vanish_slack_s, "the lost session's key to go")
        assert await _retrying(lambda: metastore.get("gone/per")) == Versioned(b"1", 1, None)
        assert session.state is SessionState.LOST and states == [SessionState.SUSPENDED, SessionState.LOST], states


async def check_listeners_resync_after_server_restart(target: Target) -> None:
    server = _server(target)
    async with opened(target) as listening:
        seen: dict[str, Any] = {}
        registry = ListenerRegistry(listening)
        registry.add_keyset_listener("rs/", lambda found: seen.__setitem__("keys", sorted(found)))

        def showing(keys: list[str]) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return seen == {"keys": keys}

            return check

        await eventually(showing([]), target.notify_timeout_s, "the listener's first call")
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        async with opened(target) as writing:
            await Storage(writing).put_if_absent("rs/after-restart", b"x")
        await eventually(
            showing(["rs/after-restart"]), target.notify_timeout_s + 30, "the listener to resync after a restart"
        )
        await registry.close()


async def check_election_survives_server_leader_kill(target: Target) -> None:
    """The coordination cluster's own leader dies mid-term: our leader keeps its session and seat.

    Its fenced writes go on after the fail-over and past its session's TTL (one caught in it may
    fail as unavailable and is retried), a watch consumer re-reading on every event ends with the
    true state, a waiting candidate does not win meanwhile, and once the leader resigns the
    candidate wins with the next epoch and the old fence is refused.
    """
    if target.kill_server_leader is None:
        raise AssertionError(f"{target.name} is not a cluster; do not run this check for it")
    async with opened(target) as first, opened(target) as second, opened(target) as watching:
        session_a = await first.open_session(target.ttl_s)
        states_a: list[SessionState] = []
        session_a.add_state_listener(states_a.append)
        fence_a = await LeaderElection(first, "failover").nominate(session_a, "a")
        storage_a = Storage(first)
        assert await storage_a.fenced_put(fence_a, "failover/state", b"0", 0) == 1
        session_b = await second.open_session(target.ttl_s)
        election_b = LeaderElection(second, "failover")
        contender = asyncio.create_task(_retrying(lambda: election_b.nominate(session_b, "b")))
        view: dict[str, Versioned] | None = None

        async def consume() -> None:
            nonlocal view
            watch = watching.watch("failover/")
            try:
                async for _ in watch:
                    view = await _retrying(lambda: watching.list("failover/"))
            finally:
                await watch.aclose()

        consuming = asyncio.create_task(consume())
        restart = await asyncio.to_thread(target.kill_server_leader)
        killed = time.monotonic()
        try:
            writes = 0
            while writes < 10 or time.monotonic() - killed < session_a.ttl_s + 1:
                writes += 1
                value = str(writes).encode()
                await _retrying(functools.partial(storage_a.fenced_put, fence_a, "failover/state", value, None))

            async def connected() -> bool:
                return session_a.state is SessionState.CONNECTED and session_b.state is SessionState.CONNECTED

            await eventually(connected, target.ttl_s + target.vanish_slack_s, "both sessions CONNECTED again")
            assert SessionState.LOST not in states_a, f"the leader's session was lost: {states_a}"
            truth = await _retrying(lambda: first.list("failover/"))
            state = truth.get("failover/state")
            assert state is not None and state.value == str(writes).encode() and state.version > writes, state

            async def mirrored() -> bool:
                return view == truth

            await eventually(mirrored, target.notify_timeout_s, f"the watch consumer to see {truth}, not {view}")
            leader = await _retrying(election_b.leader)
            assert leader is not None and (leader.candidate, leader.epoch) == ("a", fence_a.epoch), leader
            assert not contender.done(), "the contender won while the leader held its seat"
            assert await _retrying(lambda: LeaderElection(first, "failover").resign(fence_a))
            async with asyncio.timeout(target.notify_timeout_s):
                fence_b = await contender
            assert fence_b.epoch == fence_a.epoch + 1
            try:
                await storage_a.fenced_put(fence_a, "failover/state", b"stale", None)
            except FencedError:
                pass
            else:
                raise AssertionError("the resigned leader's fenced write succeeded")
            await session_b.close()
            await session_a.close()
        finally:
            for task in (contender, consuming):
                task.cancel()
            await asyncio.gather(contender, consuming, return_exceptions=True)
            await asyncio.to_thread(restart)
