"""The contract every coordination backend must meet, as checks runnable against any URL.

Like trio's ``check_one_way_stream`` or Pulsar PIP-45's shared suite: each ``check_*`` takes a
:class:`Target` (a URL naming a fresh, empty namespace on a real server, plus how that backend
behaves in time) and raises AssertionError when the backend breaks the contract in api.py. The
parametrised pytest module is tests/contract/test_contract.py; a new backend only adds a fixture.

Checks that need a process to die really kill one (SIGKILL of ``python -m
barnabas.coordination.testing.member``): only a dead process proves a backend notices death
without its cooperation. Waits are on conditions with deadlines, never fixed sleeps; the one
check of time passing (``holds_for``) asserts that something stays true while it passes. Checks
that take the backend's server down (stop, kill, pause) are in ``outages.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..api import Changed, Check, Delete, Metastore, Put, Resync, Session, SessionState, Versioned, WatchEvent
from ..election import LeaderElection
from ..errors import (
    FencedError,
    KeyExistsError,
    NoSuchKeyError,
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from ..listeners import ListenerRegistry
from ..membership import GroupMembership
from ..registry import open_metastore
from ..storage import Storage
from .linearizability import check as check_linearizable
from .linearizability import run_concurrent_history

__all__ = ["ALL_CHECKS", "Server", "Target"]


class Server(Protocol):
    """The server behind a target, as the outage checks drive it (blocking calls).

    barnabas.testing's servers (``ManagedServer``) have these methods.
    """

    def start(self) -> object:
        """Start it and wait until it is ready, on the same ports and data."""
        ...

    def stop(self) -> object:
        """Stop it cleanly."""
        ...

    def kill(self) -> None:
        """SIGKILL it: a crash."""
        ...

    def pause(self) -> None:
        """SIGSTOP it: it keeps its connections and answers nothing."""
        ...

    def resume(self) -> None:
        """SIGCONT it."""
        ...


@dataclass(frozen=True)
class Target:
    """A backend under test: a URL for a fresh namespace and its timing."""

    name: str
    url: str
    #: Session TTL the checks use.
    ttl_s: float = 2.0
    #: Extra time, beyond the TTL, an ephemeral key may outlive its dead owner (keepalive, polling).
    vanish_slack_s: float = 2.0
    #: How long a watch may take to report a change.
    notify_timeout_s: float = 10.0
    #: The server behind ``url``, for the outage checks; None when the backend has no server.
    server: Server | None = None
    #: ``url`` as the outage checks open it (None: ``url`` itself): options that make calls fail fast
    #: while the server is down, and whatever its client needs to reconnect in time.
    outage_url: str | None = None
    #: A session TTL that outlasts a kill and start of the server (and the keepalive noticing it).
    outage_ttl_s: float = 10.0
    #: A URL of this backend naming a server nobody runs; None when the backend has no server.
    unreachable_url: str | None = None
    #: Kills the server cluster's current leader (blocking) and returns what restarts it; None when
    #: the backend is not a replicated cluster.
    kill_server_leader: Callable[[], Callable[[], object]] | None = None


@contextlib.asynccontextmanager
async def opened(target: Target, url: str | None = None) -> AsyncIterator[Metastore]:
    """A metastore on ``url`` (default: the target's), closed at the end."""
    metastore = await open_metastore(url or target.url)
    try:
        yield metastore
    finally:
        await metastore.close()


async def eventually(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> float:
    """Poll ``condition`` until it holds; return the seconds it took. AssertionError on timeout."""
    start = time.monotonic()
    while not await condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.1f} s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def holds_for(condition: Callable[[], Awaitable[bool]], duration_s: float, what: str) -> None:
    """Poll ``condition`` for ``duration_s``: AssertionError the first time it does not hold."""
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < duration_s:
        if not await condition():
            raise AssertionError(f"{what} stopped holding after {elapsed:.2f} s (of {duration_s:.1f} s)")
        await asyncio.sleep(0.05)


async def named(watch: AsyncGenerator[WatchEvent, None], prefix: str, keys: set[str], timeout_s: float) -> set[str]:
    """Read ``watch`` until its Changed events named every key of ``keys``; return every key they named.

    Resync may come between (the contract allows it anywhere); a key outside ``prefix`` named is an
    AssertionError, and so is running out of time (the watch is then ended, Python's rule).
    """
    seen: set[str] = set()
    try:
        async with asyncio.timeout(timeout_s):
            while not keys <= seen:
                event = await anext(watch)
                if isinstance(event, Changed):
                    outside = {key for key in event.keys if not key.startswith(prefix)}
                    assert not outside, f"a watch on {prefix!r} named {sorted(outside)}"
                    seen |= event.keys
    except TimeoutError:
        raise AssertionError(
            f"a watch on {prefix!r} named {sorted(seen)} in {timeout_s} s, not {sorted(keys)}"
        ) from None
    return seen


def state_of(session: Session) -> SessionState:
    """The state now (a call, so mypy keeps no narrowing of the property from an earlier assert)."""
    return session.state


async def first_event_is_resync(watch: AsyncGenerator[WatchEvent, None], timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        event = await anext(watch)
    assert isinstance(event, Resync), f"a watch started with {event}, not Resync"


# -- Storage ----------------------------------------------------------------------------------


async def check_versions_start_at_one_and_grow_by_one(target: Target) -> None:
    async with opened(target) as metastore:
        storage = Storage(metastore)
        assert await storage.get("v/a") is None
        assert await storage.put_if_absent("v/a", b"1") == 1
        assert await storage.compare_and_set("v/a", b"2", 1) == 2
        assert await storage.update_if_exists("v/a", b"3") == 3
        assert await storage.get("v/a") == Versioned(b"3", 3, None)
        assert await storage.delete("v/a", expected_version=3)
        assert await storage.get("v/a") is None
        assert await storage.put_if_absent("v/a", b"again") == 1, "a re-created key starts at version 1"


async def check_conflicts_raise_the_right_errors(target: Target) -> None:
    async with opened(target) as metastore:
        storage = Storage(metastore)
        await storage.put_if_absent("c/a", b"1")
        attempts: tuple[tuple[Callable[[], Awaitable[object]], type[VersionConflictError], str], ...] = (
            (lambda: storage.put_if_absent("c/a", b"x"), KeyExistsError, "c/a"),
            (lambda: storage.update_if_exists("c/missing", b"x"), NoSuchKeyError, "c/missing"),
            (lambda: storage.compare_and_set("c/missing", b"x", 1), NoSuchKeyError, "c/missing"),
            (lambda: storage.compare_and_set("c/a", b"x", 7), VersionConflictError, "c/a"),
            (lambda: storage.delete("c/a", expected_version=2), VersionConflictError, "c/a"),
        )
        for attempt, error, key in attempts:
            try:
                await attempt()
            except error as exc:
                assert exc.key == key, f"{error.__name__} names {exc.key!r}, not {key!r}"
            else:
                raise AssertionError(f"expected {error.__name__} for {key}")
        assert not await storage.delete("c/missing"), "deleting an absent key reports False"
        assert await storage.get("c/a") == Versioned(b"1", 1, None), "failed writes changed nothing"


async def check_every_conflict_is_its_own_error_on_its_key(target: Target) -> None:
    """Each way a check can fail raises its own error naming the key, whether or not the key is written."""
    async with opened(target) as metastore:
        a, b, guard = "vc/a", "vc/b", "vc/guard"
        assert await metastore.get(a) is None
        assert await metastore.commit([Check(a, 0)], [Put(a, b"1")]) == {a: 1}
        assert await metastore.commit([Check(a, 1)], [Put(a, b"2")]) == {a: 2}
        assert await metastore.commit([Check(a, None)], [Put(a, b"3")]) == {a: 3}
        failing: list[tuple[list[Check], list[Put | Delete], type[VersionConflictError], str]] = [
            ([Check(a, 0)], [Put(a, b"x")], KeyExistsError, a),  # expected absent, is present
            ([Check(a, 2)], [Put(a, b"x")], VersionConflictError, a),  # expected another version
            ([Check(b, None)], [Put(b, b"x")], NoSuchKeyError, b),  # expected present at any version
            ([Check(b, 1)], [Delete(b)], NoSuchKeyError, b),  # expected an exact version of an absent key
            ([Check(a, 1)], [Delete(a)], VersionConflictError, a),
            ([Check(a, 3), Check(guard, None)], [Put(a, b"x")], NoSuchKeyError, guard),  # a key not written gates it
            ([Check(a, 0)], [], KeyExistsError, a),  # checks alone are an atomic assertion too
            ([Check(b, None)], [], NoSuchKeyError, b),
            ([Check(a, 7)], [], VersionConflictError, a),
        ]
        for checks, ops, error, key in failing:
            try:
                await metastore.commit(checks, ops)
            except VersionConflictError as exc:
                assert type(exc) is error, f"{checks} raised {type(exc).__name__}, not {error.__name__}"
                assert exc.key == key, f"{type(exc).__name__} names {exc.key!r}, not {key!r}"
            else:
                raise AssertionError(f"{checks} with {ops} succeeded")
        assert await metastore.get(a) == Versioned(b"3", 3, None), "failed commits changed nothing"
        assert await metastore.commit([Check(a, 3), Check(b, 0)], []) == {}
        assert await metastore.get(b) is None, "an absence check leaves nothing behind"
        assert await metastore.commit([Check(a, 3)], [Delete(a)]) == {}
        assert await metastore.get(a) is None
        assert await metastore.commit([Check(a, 0)], [Put(a, b"")]) == {a: 1}, "a re-created key starts at 1"
        assert await metastore.get(a) == Versioned(b"", 1, None)
        assert await metastore.commit([Check(a, None)], [Delete(a)]) == {}
        assert await metastore.commit([], []) == {}


async def check_commit_is_atomic(target: Target) -> None:
    """A commit with any failing check, first, middle or last, applies nothing and names that check's key."""
    async with opened(target) as metastore:
        a, b, c, z, new, late = (f"at/{name}" for name in ("a", "b", "c", "z", "new", "late"))
        await metastore.commit([Check(a, 0), Check(b, 0)], [Put(a, b"a1"), Put(b, b"b1")])
        before = await metastore.list("at/")
        failing: list[tuple[list[Check], list[Put | Delete], str]] = [
            ([Check(a, 1), Check(b, 2), Check(c, 0)], [Put(a, b"x"), Put(b, b"x"), Put(c, b"x")], b),
            ([Check(c, 0), Check(a, 1), Check(b, 0)], [Put(c, b"x"), Delete(a), Put(b, b"x")], b),
            ([Check(a, 1), Check(z, None)], [Put(a, b"x")], z),
            (
                [Check(a, 1), Check(new, 0), Check(b, 1), Check(late, 5)],
                [Put(a, b"x"), Put(new, b"x"), Delete(b), Put(late, b"x")],
                late,
            ),
        ]
        for checks, ops, failed in failing:
            try:
                await metastore.commit(checks, ops)
            except VersionConflictError as exc:
                assert exc.key == failed, f"the failing check is {failed}, the error names {exc.key}"
            else:
                raise AssertionError("a commit with a failing check succeeded")
            assert await metastore.list("at/") == before, "a failed commit applied something"
        versions = await metastore.commit(
            [Check(a, 1), Check(b, None), Check(c, 0), Check(z, 0)], [Put(a, b"a2"), Delete(b), Put(c, b"c1")]
        )
        assert versions == {a: 2, c: 1}, "a commit answers with each put key's new version"
        assert await metastore.list("at/") == {a: Versioned(b"a2", 2, None), c: Versioned(b"c1", 1, None)}


async def check_uncovered_ops_are_value_errors(target: Target) -> None:
    """Every op needs one check on its key, and a key takes one op: anything else is the caller's bug."""
    async with opened(target) as metastore:
        refused: list[tuple[list[Check], list[Put | Delete]]] = [
            ([], [Put("u/a", b"x")]),
            ([Check("u/b", 0)], [Put("u/a", b"x")]),
            ([Check("u/a", 0), Check("u/a", 0)], [Put("u/a", b"x")]),
            ([Check("u/a", 0)], [Put("u/a", b"x"), Put("u/a", b"y")]),
            ([Check("u/a", 0)], [Delete("u/a")]),
        ]
        for checks, ops in refused:
            try:
                await metastore.commit(checks, ops)
            except ValueError:
                continue
            raise AssertionError(f"{checks} with {ops} was accepted")
        assert await metastore.list("u/") == {}, "a refused commit wrote something"


#: Keys for the list check: neighbours that share the prefix's first characters, numbers that sort as
#: text, characters a backend must encode (ZooKeeper node names, SQL, CQL), the highest code point.
LIST_KEYS = (
    *("l/a/2", "l/a/10", "l/a/1", "l/a", "l/a0", "l/ab", "l/b", "L/a", "m"),
    *("l/é", "l/\U0001f600", "l/\U0010ffff", "l/\U0010ffffz", "l/100%", "l/%2F", "l/a b", "l/.", "l/.."),
)


async def check_list_is_the_prefix_in_key_order(target: Target) -> None:
    """``list(prefix)`` is every key starting with the prefix and nothing else, in code-point order, with values."""
    async with opened(target) as metastore:
        await metastore.commit([Check(key, 0) for key in LIST_KEYS], [Put(key, key.encode()) for key in LIST_KEYS])
        for prefix in ("l/a/", "l/a", "l/", "l/\U0010ffff", "L", "", "nothing/"):
            listed = await metastore.list(prefix)
            expected = sorted(key for key in LIST_KEYS if key.startswith(prefix))
            assert list(listed) == expected, f"list({prefix!r}) is {list(listed)}, not {expected}"
            wrong = {key: found for key, found in listed.items() if found != Versioned(key.encode(), 1, None)}
            assert not wrong, f"list({prefix!r}) read {wrong}"


# -- Sessions and ephemeral keys ---------------------------------------------------------------


async def check_ephemeral_keys_follow_their_session(target: Target) -> None:
    """An ephemeral key carries its session's id for good, and is gone for everyone when ``close()`` returns.

    A later put keeps the key's session (naming none or another); a persistent key put with a
    session stays persistent; one commit may mix the two kinds; a session works only with the
    metastore that opened it (ValueError elsewhere). Closing a session ends it (LOST,
    once, for good; a second close is harmless) and leaves other keys alone; a put with it is
    refused. Closing a metastore ends the sessions it still has.
    """
    async with opened(target) as observer:
        async with opened(target) as metastore:
            session = await metastore.open_session(target.ttl_s)
            other = await metastore.open_session(target.ttl_s)
            assert session.state is SessionState.CONNECTED and other.state is SessionState.CONNECTED
            assert session.id != other.id, "two sessions share an id"
            assert session.ttl_s >= target.ttl_s, f"asked for a {target.ttl_s} s TTL, granted {session.ttl_s} s"
            states: list[SessionState] = []
            session.add_state_listener(states.append)
            versions = await metastore.commit(
                [Check("e/k", 0), Check("e/p", 0)], [Put("e/k", b"1", session), Put("e/p", b"1")]
            )
            assert versions == {"e/k": 1, "e/p": 1}, versions
            assert await observer.get("e/k") == Versioned(b"1", 1, session.id)
            assert await observer.get("e/p") == Versioned(b"1", 1, None)
            await metastore.commit([Check("e/k", 1)], [Put("e/k", b"2")])
            await observer.commit([Check("e/k", 2)], [Put("e/k", b"3")])
            await metastore.commit([Check("e/k", 3)], [Put("e/k", b"4", other)])
            await metastore.commit([Check("e/p", 1)], [Put("e/p", b"2", session)])
            assert await observer.get("e/k") == Versioned(b"4", 4, session.id), "a later put changed the session"
            assert await observer.get("e/p") == Versioned(b"2", 2, None), "a persistent key became ephemeral"
            await metastore.commit([Check("e/o", 0)], [Put("e/o", b"1", other)])
            assert await observer.commit([Check("e/k", 4)], []) == {}, "checking an ephemeral key alone"
            try:
                await observer.commit([Check("e/theirs", 0)], [Put("e/theirs", b"", other)])
            except ValueError:
                pass
            else:
                raise AssertionError("a put with another metastore's session succeeded")

            await session.close()
            assert state_of(session) is SessionState.LOST and states == [SessionState.LOST], states
            survivors = {"e/o": Versioned(b"1", 1, other.id), "e/p": Versioned(b"2", 2, None)}
            assert await observer.list("e/") == survivors, "not gone, or more gone, when close() returned"
            try:
                await metastore.commit([Check("e/late", 0)], [Put("e/late", b"x", session)])
            except SessionLostError:
                pass
            else:
                raise AssertionError("an ephemeral put with a closed session succeeded")
            await session.close()
            assert states == [SessionState.LOST], f"a second close changed the state again: {states}"
        assert state_of(other) is SessionState.LOST, "closing its metastore did not end a session"
        assert await observer.list("e/") == {"e/p": Versioned(b"2", 2, None)}, "a closed metastore's key stayed"


async def _start_member(
    target: Target, group: str, member: str, elect: str | None = None, *, rejoin: bool = False
) -> tuple[Any, list[str]]:
    command = [
        sys.executable,
        "-m",
        "barnabas.coordination.testing.member",
        target.url,
        group,
        member,
        str(target.ttl_s),
    ]
    if elect:
        command += ["--elect", elect]
    if rejoin:
        command.append("--rejoin")
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = (await process.stdout.readline()).decode().split()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("the member process did not report ready within 60 s") from None
    if not line or line[0] != "ready":
        process.kill()
        await process.wait()
        raise AssertionError(f"the member process failed to start (exit {process.returncode})")
    return process, line


async def _vanishes_within_ttl(group: GroupMembership, member: str, ttl_s: float, since: float, fault: str) -> None:
    """``member`` leaves ``group`` within the contract's bound of ``fault`` (at ``since``): ttl + ttl/3 + 1 s."""

    async def vanished() -> bool:
        return member not in await group.members()

    limit = ttl_s + ttl_s / 3 + 1.0
    await eventually(vanished, limit, f"a member to vanish after {fault} (TTL {ttl_s} s)")
    took = time.monotonic() - since
    assert took <= limit, f"gone {took:.2f} s after {fault}, past ttl + ttl/3 + 1 s = {limit:.2f} s"


async def check_killed_member_vanishes_within_its_ttl(target: Target) -> None:
    """A member's key outlives its TTL while its process lives, and goes within the contract's bound of a kill -9.

    The bound is the TTL plus one keepalive interval (every backend renews every TTL/3) plus 1 s of
    detection and scheduling. A watch names the removal, though no client wrote it.
    """
    async with opened(target) as metastore:
        group = GroupMembership(metastore, "kill9")
        key = group.prefix + "victim"
        process, line = await _start_member(target, "kill9", "victim")
        watch = metastore.watch(group.prefix)
        try:
            session_id, ttl_s = line[1], float(line[2])
            found = await metastore.get(key)
            assert found is not None and found.session_id == session_id, found
            await first_event_is_resync(watch, target.notify_timeout_s)

            async def alive() -> bool:
                return await metastore.get(key) is not None

            await holds_for(alive, 1.5 * ttl_s, "a live member's key (kept alive from its own process)")
            process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await process.wait()

            await _vanishes_within_ttl(group, "victim", ttl_s, killed, "kill -9")
            await named(watch, group.prefix, {key}, target.notify_timeout_s)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await watch.aclose()


async def _line_starting(process: asyncio.subprocess.Process, prefix: str, timeout_s: float) -> str:
    """The member process's next output line that starts with ``prefix`` (others are skipped)."""
    assert process.stdout is not None
    async with asyncio.timeout(timeout_s):
        while True:
            raw = await process.stdout.readline()
            if not raw:
                raise AssertionError(f"the member process ended without a {prefix!r} line")
            line = raw.decode().strip()
            if line.startswith(prefix):
                return line


async def check_paused_member_loses_its_session_within_its_ttl(target: Target) -> None:
    """A hung member (SIGSTOP: alive, holding whatever it holds) loses its session as a dead one would.

    Its key goes within the same bound as a killed member's, so a hung broker's partitions fail
    over on every backend; resumed, the member itself sees its session LOST, never CONNECTED again
    with the key gone.
    """
    async with opened(target) as metastore:
        group = GroupMembership(metastore, "paused")
        process, line = await _start_member(target, "paused", "sleeper")
        try:
            ttl_s = float(line[2])
            process.send_signal(signal.SIGSTOP)
            paused = time.monotonic()

            await _vanishes_within_ttl(group, "sleeper", ttl_s, paused, "SIGSTOP")
            process.send_signal(signal.SIGCONT)
            seen = await _line_starting(process, "state", ttl_s + target.vanish_slack_s + 5.0)
            while seen != "state lost":
                assert seen == "state suspended", f"a resumed member whose key is gone reported {seen!r}"
                seen = await _line_starting(process, "state", ttl_s + target.vanish_slack_s + 5.0)
            assert "sleeper" not in await group.members(), "the resumed member's key came back"
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                await process.wait()


async def check_a_member_that_joined_again_at_once_is_seen_back(target: Target) -> None:
    """A hung member that, resumed, finds its session lost and joins again at once (a broker registering
    again) is back in the view another process keeps from watch events, and stays there.

    That view is a broker's list of live brokers: every event re-reads the group (the metadata
    watcher's rule). The end of the old session must not take the new key with it, nor may the
    watch fold the member's departure and return into nothing the view would re-read.
    """
    async with opened(target) as metastore:
        group = GroupMembership(metastore, "rejoined")
        key = group.prefix + "phoenix"
        view: dict[str, bytes] = {}
        watch = metastore.watch(group.prefix)

        async def follow() -> None:
            async for _ in watch:
                view.clear()
                view.update(await group.members())

        process, line = await _start_member(target, "rejoined", "phoenix", rejoin=True)
        following = asyncio.ensure_future(follow())
        try:
            ttl_s = float(line[2])

            async def seen_with(data: bytes) -> bool:
                return view.get("phoenix") == data

            await eventually(lambda: seen_with(b"pid"), target.notify_timeout_s, "the member in the watched view")
            process.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            await _vanishes_within_ttl(group, "phoenix", ttl_s, paused, "SIGSTOP")
            process.send_signal(signal.SIGCONT)
            rejoined = (await _line_starting(process, "rejoined", ttl_s + target.vanish_slack_s + 30.0)).split()[1]
            await eventually(
                lambda: seen_with(b"again"), target.notify_timeout_s, "the member back in the watched view"
            )

            async def kept() -> bool:
                found = await metastore.get(key)
                return view.get("phoenix") == b"again" and found is not None and found.session_id == rejoined

            await holds_for(kept, 1.5 * ttl_s, "the member joined again, in the store and the watched view")
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
            await watch.aclose()
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                await process.wait()


# -- Leader election and fencing ---------------------------------------------------------------


async def check_one_leader_per_epoch_and_epochs_increase(target: Target) -> None:
    async with contextlib.AsyncExitStack() as stack:
        metastores = [await stack.enter_async_context(opened(target)) for _ in range(3)]
        epochs: list[int] = []
        fences = []
        sessions = [await m.open_session(target.ttl_s) for m in metastores]
        for round_ in range(3):
            live = [i for i, s in enumerate(sessions) if s.state is not SessionState.LOST]
            tasks = {
                i: asyncio.ensure_future(LeaderElection(metastores[i], "epochs").nominate(sessions[i], f"c{i}"))
                for i in live
            }
            done, _ = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED, timeout=30)
            assert len(done) == 1, f"round {round_}: {len(done)} candidates won at once"
            winner = next(i for i, task in tasks.items() if task in done)
            fence = tasks[winner].result()
            leader = await LeaderElection(metastores[0], "epochs").leader()
            assert leader is not None and leader.candidate == f"c{winner}" and leader.epoch == fence.epoch
            epochs.append(fence.epoch)
            fences.append(fence)
            storage = Storage(metastores[winner])
            await storage.fenced_put(fence, f"epochs/by/{fence.epoch}", b"x", 0)
            for old in fences[:-1]:
                try:
                    await storage.fenced_put(old, "epochs/stale", b"x", 0)
                except FencedError:
                    continue
                raise AssertionError(f"a write fenced by old epoch {old.epoch} succeeded in epoch {fence.epoch}")
            for i, task in tasks.items():
                if i != winner:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await sessions[winner].close()
            sessions[winner] = await metastores[winner].open_session(target.ttl_s)
        assert epochs == sorted(set(epochs)), f"epochs must strictly increase: {epochs}"
        for session in sessions:
            await session.close()


async def check_deposed_leader_cannot_write(target: Target) -> None:
    async with opened(target) as first, opened(target) as second:
        session_a = await first.open_session(target.ttl_s)
        fence_a = await LeaderElection(first, "fenced").nominate(session_a, "a")
        storage_a = Storage(first)
        assert await storage_a.fenced_put(fence_a, "fenced/state", b"a", 0) == 1
        await session_a.close()

        async def seat_empty() -> bool:
            return await LeaderElection(second, "fenced").leader() is None

        await eventually(seat_empty, target.vanish_slack_s, "the closed leader's key to go")
        try:
            await storage_a.fenced_put(fence_a, "fenced/state", b"a2", 1)
        except FencedError:
            pass
        else:
            raise AssertionError("a fenced write succeeded with no leader in the seat")
        session_b = await second.open_session(target.ttl_s)
        fence_b = await LeaderElection(second, "fenced").nominate(session_b, "b")
        assert fence_b.epoch == fence_a.epoch + 1
        try:
            await storage_a.fenced_put(fence_a, "fenced/state", b"a3", 1)
        except FencedError:
            pass
        else:
            raise AssertionError("the deposed leader's fenced write succeeded")
        assert await Storage(second).fenced_put(fence_b, "fenced/state", b"b", 1) == 2
        assert await LeaderElection(second, "fenced").resign(fence_b)
        assert not await LeaderElection(first, "fenced").resign(fence_a)
        await session_b.close()


async def check_killed_leader_is_replaced(target: Target) -> None:
    async with opened(target) as metastore:
        process, line = await _start_member(target, "leaders", "old", elect="killed")
        old_epoch = int(line[3])
        session = await metastore.open_session(target.ttl_s)
        try:
            election = LeaderElection(metastore, "killed")
            leader = await election.leader()
            assert leader is not None and leader.candidate == "old" and leader.epoch == old_epoch
            process.send_signal(signal.SIGKILL)
            await process.wait()
            async with asyncio.timeout(target.ttl_s + target.vanish_slack_s + 5):
                fence = await election.nominate(session, "new")
            assert fence.epoch > old_epoch
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await session.close()


# -- Group membership --------------------------------------------------------------------------


async def check_group_membership(target: Target) -> None:
    async with opened(target) as first, opened(target) as second:
        session_1 = await first.open_session(target.ttl_s)
        session_2 = await second.open_session(target.ttl_s)
        group_1, group_2 = GroupMembership(first, "g"), GroupMembership(second, "g")
        await group_1.join(session_1, "m1", b"one")
        await group_2.join(session_2, "m2", b"two")
        assert await group_1.members() == {"m1": b"one", "m2": b"two"}
        await group_1.join(session_1, "m1", b"one-updated")
        assert (await group_2.members())["m1"] == b"one-updated"
        try:
            await group_2.join(session_2, "m1", b"taken", wait_s=0.3)
        except KeyExistsError:
            pass
        else:
            raise AssertionError("joined with an id another live session holds")
        waiting = asyncio.ensure_future(group_2.join(session_2, "m1", b"mine now", wait_s=30))
        assert await group_1.leave(session_1, "m1")
        async with asyncio.timeout(target.notify_timeout_s):
            await waiting
        assert await group_1.members() == {"m1": b"mine now", "m2": b"two"}
        assert not await group_1.leave(session_1, "m1"), "only the holding session can leave"
        await session_2.close()

        async def empty() -> bool:
            return await group_1.members() == {}

        await eventually(empty, target.vanish_slack_s, "members of a closed session to go")
        await session_1.close()


# -- Watches and listeners ---------------------------------------------------------------------


async def check_watch_names_changes_under_its_prefix_only(target: Target) -> None:
    """Puts, deletes and a session's end under the prefix are named; nothing outside it ever is.

    Changes may be coalesced and a Resync may come between (hints, not deltas). Keys that only share
    the prefix's first characters stay outside. A consumer that was away is told all it missed, and
    every watch starts with its own Resync; closing one leaves the others working.
    """
    async with opened(target) as metastore, opened(target) as writer:
        watch = metastore.watch("w/")
        try:
            await first_event_is_resync(watch, target.notify_timeout_s)
            timeout_s = target.notify_timeout_s
            await writer.commit([Check("wx", 0), Check("v/w/a", 0)], [Put("wx", b""), Put("v/w/a", b"")])
            await writer.commit([Check("w/a", 0)], [Put("w/a", b"1")])
            await named(watch, "w/", {"w/a"}, timeout_s)
            await writer.commit([Check("w/a", 1)], [Put("w/a", b"2")])
            await named(watch, "w/", {"w/a"}, timeout_s)
            await writer.commit(
                [Check("w/a", 2), Check("w/b", 0), Check("wx", 1)], [Delete("w/a"), Put("w/b", b"1"), Delete("wx")]
            )
            await named(watch, "w/", {"w/a", "w/b"}, timeout_s)
            session = await writer.open_session(target.ttl_s)
            await writer.commit([Check("w/e", 0)], [Put("w/e", b"", session)])
            await named(watch, "w/", {"w/e"}, timeout_s)
            await session.close()
            await named(watch, "w/", {"w/e"}, timeout_s)

            missed = {f"w/many/{i}" for i in range(10)}
            for key in sorted(missed):
                await writer.commit([Check(key, 0), Check(f"v/{key}", 0)], [Put(key, b""), Put(f"v/{key}", b"")])
            await named(watch, "w/", missed, timeout_s)

            second = metastore.watch("")
            await first_event_is_resync(second, timeout_s)
            await second.aclose()
            await writer.commit([Check("w/c", 0)], [Put("w/c", b"")])
            await named(watch, "w/", {"w/c"}, timeout_s)
        finally:
            await watch.aclose()


async def check_watch_consumer_converges(target: Target) -> None:
    """A consumer re-reading the prefix on every event ends with the true state of racing writers.

    Three writers race creates, updates, deletes, absence checks, ephemeral keys and keys that live
    for an instant, with writes beside the prefix; then the ephemeral keys' session closes.
    """
    seed = time.time_ns()
    async with contextlib.AsyncExitStack() as stack:
        consumer = await stack.enter_async_context(opened(target))
        writers = [await stack.enter_async_context(opened(target)) for _ in range(3)]
        # The check is about the watch, not expiry: a longer lease rides out a loaded machine's slow
        # renewals (a 2 s Cassandra lease was lost once under two test workers).
        session = await writers[0].open_session(target.ttl_s * 3)
        view: dict[str, Versioned] | None = None

        async def consume() -> None:
            nonlocal view
            watch = consumer.watch("c/")
            try:
                async for _ in watch:
                    view = await consumer.list("c/")
            finally:
                await watch.aclose()

        async def write(writer: Metastore, rng: random.Random) -> None:
            for _ in range(30):
                key = rng.choice(("c/1", "c/2", "c/3", "c/4/deep", "c-beside", "d/outside"))
                current = await writer.get(key)
                roll = rng.random()
                with contextlib.suppress(VersionConflictError):
                    if roll < 0.1:
                        await writer.commit([Check(key, current.version if current else 0)], [])
                    elif current is None:
                        owner = session if writer is writers[0] and roll < 0.5 else None
                        await writer.commit([Check(key, 0)], [Put(key, b"new", owner)])
                        if roll < 0.3:  # a key that lives for an instant
                            await writer.commit([Check(key, 1)], [Delete(key)])
                    elif roll < 0.4:
                        await writer.commit([Check(key, current.version)], [Delete(key)])
                    else:
                        await writer.commit([Check(key, current.version)], [Put(key, b"%d" % rng.randrange(1000))])

        async def converged(what: str) -> None:
            truth = await writers[1].list("c/")

            async def same() -> bool:
                return view == truth

            await eventually(same, target.notify_timeout_s, f"{what} (seed {seed}): {view} == {truth}")

        consuming = asyncio.create_task(consume())
        try:
            await eventually(_is_set(lambda: view), target.notify_timeout_s, "the consumer's first read")
            await asyncio.gather(*(write(writer, random.Random(f"{seed}/{i}")) for i, writer in enumerate(writers)))
            await converged("the consumer to see the writers' final state")
            await session.close()
            await converged("the consumer to see the closed session's keys go")
        finally:
            consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)


def _is_set(value: Callable[[], object]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return value() is not None

    return check


async def check_watch_ends_when_the_metastore_closes(target: Target) -> None:
    """A watch parked for its next event ends (StopAsyncIteration) when its metastore closes; a new one is refused."""
    metastore = await open_metastore(target.url)
    watch = metastore.watch("")
    try:
        async with asyncio.timeout(target.notify_timeout_s):
            assert isinstance(await anext(watch), Resync), "a watch starts with Resync"
        waiting = asyncio.ensure_future(anext(watch))
        await asyncio.sleep(0)  # parked in the watch before the close
    finally:
        await metastore.close()
    try:
        async with asyncio.timeout(target.notify_timeout_s):
            await waiting
    except StopAsyncIteration:
        pass
    else:
        raise AssertionError("a watch went on after its metastore closed")
    try:
        await anext(metastore.watch(""))
    except (UnavailableError, StopAsyncIteration):
        pass
    else:
        raise AssertionError("a closed metastore started a watch")


async def _converged(registry_state: dict[str, Any], expected: dict[str, Any], timeout_s: float, what: str) -> None:
    async def done() -> bool:
        return registry_state == expected

    await eventually(done, timeout_s, what)


async def check_listeners_converge(target: Target) -> None:
    async with opened(target) as listening, opened(target) as writing:
        seen: dict[str, Any] = {}
        registry = ListenerRegistry(listening)

        def on_value(value: Versioned | None) -> None:
            seen["value"] = None if value is None else value.value

        def on_keys(found: dict[str, Versioned]) -> None:
            seen["keys"] = sorted(found)

        registry.add_value_listener("lsn/value", on_value)
        registry.add_keyset_listener("lsn/set/", on_keys)
        await _converged(seen, {"value": None, "keys": []}, target.notify_timeout_s, "listeners' first call")
        storage = Storage(writing)
        await storage.put_if_absent("lsn/value", b"0")
        for i in range(1, 20):
            await storage.update_if_exists("lsn/value", str(i).encode())
        for i in range(5):
            await storage.put_if_absent(f"lsn/set/{i}", b"")
        await storage.delete("lsn/set/2")
        expected = {"value": b"19", "keys": ["lsn/set/0", "lsn/set/1", "lsn/set/3", "lsn/set/4"]}
        await _converged(seen, expected, target.notify_timeout_s, "listeners to see the final state")
        await registry.close()


async def check_concurrent_storage_history_is_linearizable(target: Target) -> None:
    """Four clients race random Storage calls over two keys; the Porcupine-style checker must accept."""

    async def open_storage() -> Storage:
        return Storage(await open_metastore(target.url))  # closed by run_concurrent_history

    history = await run_concurrent_history(open_storage, clients=4, ops_per_client=60, keys=2, seed=time.time_ns())
    assert len(history) == 4 * 60
    result = check_linearizable(history)
    assert result.ok, result.explanation


async def _increment(metastore: Metastore, key: str, times: int) -> None:
    """Add one to the number in ``key``, ``times`` times, by read and compare-and-set (retrying conflicts)."""
    for _ in range(times):
        while True:
            current = await metastore.get(key)
            assert current is not None, f"{key} vanished"
            try:
                await metastore.commit([Check(key, current.version)], [Put(key, b"%d" % (int(current.value) + 1))])
                break
            except VersionConflictError:
                continue


async def check_racing_writers_lose_nothing(target: Target) -> None:
    """Racing creates of a key: exactly one wins, the others get KeyExistsError. Racing increments all land."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(opened(target)) for _ in range(3)]
        for attempt in range(3):
            key = f"race/{attempt}"
            results = await asyncio.gather(
                *(client.commit([Check(key, 0)], [Put(key, b"%d" % i)]) for i, client in enumerate(clients * 2)),
                return_exceptions=True,
            )
            winners = [i for i, result in enumerate(results) if result == {key: 1}]
            assert len(winners) == 1, f"racing creates of {key}: {results}"
            losers = [result for result in results if result != {key: 1}]
            assert all(isinstance(result, KeyExistsError) for result in losers), losers
            assert await clients[0].get(key) == Versioned(b"%d" % winners[0], 1, None)
        await clients[0].commit([Check("race/n", 0)], [Put("race/n", b"0")])
        await asyncio.gather(*(_increment(client, "race/n", 10) for client in clients))
        assert await clients[1].get("race/n") == Versioned(b"30", 31, None), "an increment was lost or doubled"


ALL_CHECKS: tuple[Callable[[Target], Awaitable[None]], ...] = (
    check_versions_start_at_one_and_grow_by_one,
    check_conflicts_raise_the_right_errors,
    check_every_conflict_is_its_own_error_on_its_key,
    check_commit_is_atomic,
    check_uncovered_ops_are_value_errors,
    check_list_is_the_prefix_in_key_order,
    check_racing_writers_lose_nothing,
    check_ephemeral_keys_follow_their_session,
    check_killed_member_vanishes_within_its_ttl,
    check_paused_member_loses_its_session_within_its_ttl,
    check_a_member_that_joined_again_at_once_is_seen_back,
    check_one_leader_per_epoch_and_epochs_increase,
    check_deposed_leader_cannot_write,
    check_killed_leader_is_replaced,
    check_group_membership,
    check_watch_names_changes_under_its_prefix_only,
    check_watch_consumer_converges,
    check_watch_ends_when_the_metastore_closes,
    check_listeners_converge,
    check_concurrent_storage_history_is_linearizable,
)
