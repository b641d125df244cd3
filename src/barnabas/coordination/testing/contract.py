"""The contract every coordination backend must meet, as checks runnable against any URL.

Like trio's ``check_one_way_stream`` or Pulsar PIP-45's shared suite: each ``check_*`` takes a
:class:`Target` (a URL naming a fresh, empty namespace on a real server, plus how that backend
behaves in time) and raises AssertionError when the backend breaks the contract in api.py. The
parametrised pytest module is tests/contract/test_contract.py; a new backend only adds a fixture.

Checks that need a process to die really kill one (SIGKILL of ``python -m
barnabas.coordination.testing.member``): only a dead process proves a backend notices death
without its cooperation. Waits are on conditions with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..api import Changed, Check, Delete, Metastore, Put, Resync, SessionState, Versioned
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

__all__ = ["ALL_CHECKS", "Target"]

T = TypeVar("T")


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
    #: Restarts the server (blocking); None when the backend has no server to restart.
    restart: Callable[[], None] | None = None
    #: Kills the server cluster's current leader (blocking) and returns what restarts it; None when
    #: the backend is not a replicated cluster.
    kill_server_leader: Callable[[], Callable[[], object]] | None = None


@contextlib.asynccontextmanager
async def opened(target: Target) -> AsyncIterator[Metastore]:
    metastore = await open_metastore(target.url)
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


async def check_list_is_scoped_to_the_prefix(target: Target) -> None:
    async with opened(target) as metastore:
        storage = Storage(metastore)
        for key in ("l/a/2", "l/a/1", "l/ab", "l/b", "l/a"):
            await storage.put_if_absent(key, key.encode())
        found = await storage.list("l/a/")
        assert list(found) == ["l/a/1", "l/a/2"], list(found)
        assert found["l/a/1"].value == b"l/a/1"
        assert set(await storage.list("l/")) == {"l/a/2", "l/a/1", "l/ab", "l/b", "l/a"}


# -- Sessions and ephemeral keys ---------------------------------------------------------------


async def check_ephemeral_keys_follow_their_session(target: Target) -> None:
    async with opened(target) as metastore, opened(target) as observer:
        session = await metastore.open_session(target.ttl_s)
        assert session.state is SessionState.CONNECTED
        storage = Storage(metastore)
        await storage.put_if_absent("e/k", b"1", session)
        found = await observer.get("e/k")
        assert found is not None and found.session_id == session.id, found
        await storage.update_if_exists("e/k", b"2")
        found = await observer.get("e/k")
        assert found is not None and found.session_id == session.id, "an update keeps the key's session"
        states: list[SessionState] = []
        session.add_state_listener(states.append)
        await session.close()
        assert states == [SessionState.LOST], states
        assert session.state.value == SessionState.LOST.value

        async def gone() -> bool:
            return await observer.get("e/k") is None

        await eventually(gone, target.vanish_slack_s, "a closed session's ephemeral key to vanish")
        try:
            await storage.put_if_absent("e/late", b"x", session)
        except SessionLostError:
            pass
        else:
            raise AssertionError("an ephemeral put with a closed session succeeded")


async def _start_member(target: Target, group: str, member: str, elect: str | None = None) -> tuple[Any, list[str]]:
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


async def check_killed_member_vanishes_within_its_ttl(target: Target) -> None:
    async with opened(target) as metastore:
        group = GroupMembership(metastore, "kill9")
        process, _ = await _start_member(target, "kill9", "victim")
        try:
            assert "victim" in await group.members()
        finally:
            process.send_signal(signal.SIGKILL)
            await process.wait()

        async def vanished() -> bool:
            return "victim" not in await group.members()

        limit = target.ttl_s + target.vanish_slack_s
        took = await eventually(vanished, limit, "a kill -9'd member to vanish")
        assert took <= limit


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
        old_epoch = int(line[2])
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


async def check_watch_hints(target: Target) -> None:
    async with opened(target) as metastore:
        storage = Storage(metastore)
        watch = metastore.watch("w/")
        try:
            async with asyncio.timeout(target.notify_timeout_s):
                assert isinstance(await anext(watch), Resync), "a watch starts with Resync"
            await storage.put_if_absent("v/outside", b"x")
            await storage.put_if_absent("w/a", b"1")
            seen: set[str] = set()
            async with asyncio.timeout(target.notify_timeout_s):
                while "w/a" not in seen:
                    event = await anext(watch)
                    if isinstance(event, Changed):
                        seen |= event.keys
            assert all(key.startswith("w/") for key in seen), f"a watch on w/ reported {seen}"
            await storage.delete("w/a")
            async with asyncio.timeout(target.notify_timeout_s):
                while True:
                    event = await anext(watch)
                    if isinstance(event, Resync) or "w/a" in event.keys:
                        break
        finally:
            await watch.aclose()


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


async def check_listeners_resync_after_server_restart(target: Target) -> None:
    if target.restart is None:
        raise AssertionError(f"{target.name} has no server to restart; do not run this check for it")
    async with opened(target) as listening:
        seen: dict[str, Any] = {}
        registry = ListenerRegistry(listening)
        registry.add_keyset_listener("rs/", lambda found: seen.__setitem__("keys", sorted(found)))
        await _converged(seen, {"keys": []}, target.notify_timeout_s, "the listener's first call")
        await asyncio.to_thread(target.restart)
        async with opened(target) as writing:
            storage = Storage(writing)
            await storage.put_if_absent("rs/after-restart", b"x")
        await _converged(
            seen, {"keys": ["rs/after-restart"]}, target.notify_timeout_s + 30, "the listener to resync after a restart"
        )
        await registry.close()


async def check_concurrent_storage_history_is_linearizable(target: Target) -> None:
    """Four clients race random Storage calls over two keys; the Porcupine-style checker must accept."""

    async def open_storage() -> Storage:
        return Storage(await open_metastore(target.url))  # closed by run_concurrent_history

    history = await run_concurrent_history(open_storage, clients=4, ops_per_client=60, keys=2, seed=time.time_ns())
    assert len(history) == 4 * 60
    result = check_linearizable(history)
    assert result.ok, result.explanation


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` again after UnavailableError, as any client riding out a server fail-over does."""
    while True:
        try:
            return await call()
        except UnavailableError:
            await asyncio.sleep(0.05)


async def check_election_survives_server_leader_kill(target: Target) -> None:
    """The coordination cluster's own leader dies mid-term: our leader keeps its session and seat.

    Its fenced writes go on after the fail-over (one caught in it may fail as unavailable and is
    retried), a waiting candidate does not win meanwhile, and once the leader resigns the candidate
    wins with the next epoch and the old fence is refused.
    """
    if target.kill_server_leader is None:
        raise AssertionError(f"{target.name} is not a cluster; do not run this check for it")
    async with opened(target) as first, opened(target) as second:
        session_a = await first.open_session(target.ttl_s)
        states_a: list[SessionState] = []
        session_a.add_state_listener(states_a.append)
        fence_a = await LeaderElection(first, "failover").nominate(session_a, "a")
        storage_a = Storage(first)
        assert await storage_a.fenced_put(fence_a, "failover/state", b"0", 0) == 1
        session_b = await second.open_session(target.ttl_s)
        election_b = LeaderElection(second, "failover")
        contender = asyncio.create_task(_retrying(lambda: election_b.nominate(session_b, "b")))
        restart = await asyncio.to_thread(target.kill_server_leader)
        try:
            for value in (str(i).encode() for i in range(1, 11)):
                await _retrying(functools.partial(storage_a.fenced_put, fence_a, "failover/state", value, None))

            async def connected() -> bool:
                return session_a.state is SessionState.CONNECTED and session_b.state is SessionState.CONNECTED

            await eventually(connected, target.ttl_s + target.vanish_slack_s, "both sessions CONNECTED again")
            assert SessionState.LOST not in states_a, f"the leader's session was lost: {states_a}"
            state = await _retrying(lambda: storage_a.get("failover/state"))
            assert state is not None and state.value == b"10" and state.version >= 11, state
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
            contender.cancel()
            await asyncio.gather(contender, return_exceptions=True)
            await asyncio.to_thread(restart)


ALL_CHECKS: tuple[Callable[[Target], Awaitable[None]], ...] = (
    check_versions_start_at_one_and_grow_by_one,
    check_conflicts_raise_the_right_errors,
    check_every_conflict_is_its_own_error_on_its_key,
    check_commit_is_atomic,
    check_uncovered_ops_are_value_errors,
    check_list_is_scoped_to_the_prefix,
    check_ephemeral_keys_follow_their_session,
    check_killed_member_vanishes_within_its_ttl,
    check_one_leader_per_epoch_and_epochs_increase,
    check_deposed_leader_cannot_write,
    check_killed_leader_is_replaced,
    check_group_membership,
    check_watch_hints,
    check_watch_ends_when_the_metastore_closes,
    check_listeners_converge,
    check_concurrent_storage_history_is_linearizable,
)
