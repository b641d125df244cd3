"""FaultyMetastore over the real SQLite backend: every control, seen by Storage, watches, listeners, sessions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from barnabas.coordination import (
    Changed,
    Check,
    ListenerRegistry,
    Metastore,
    Op,
    Put,
    Resync,
    SessionLostError,
    SessionState,
    Storage,
    UnavailableError,
    Versioned,
    WatchEvent,
    open_metastore,
)
from barnabas.coordination.testing.faults import FaultyMetastore
from tests.support.polling import until

DEADLINE_S = 10.0


def run(scenario: Callable[[str], Coroutine[Any, Any, None]], tmp_path: Path) -> None:
    asyncio.run(scenario(f"sqlite://{tmp_path / 'c.db'}"))


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[tuple[FaultyMetastore, Storage]]:
    """A faulty client, and a second, healthy client of the same database."""
    faulty = FaultyMetastore(await open_metastore(url))
    other = Storage(await open_metastore(url))
    try:
        yield faulty, other
    finally:
        faulty.heal()
        await faulty.close()
        await other.close()


async def next_event(watch: AsyncGenerator[WatchEvent, None]) -> WatchEvent:
    async with asyncio.timeout(DEADLINE_S):
        return await anext(watch)


async def elapsed(call: Coroutine[Any, Any, object]) -> float:
    start = time.monotonic()
    await call
    return time.monotonic() - start


def test_delay_slows_only_the_chosen_operations(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, _):
            faulty.delay(0.3, ops=["get"])
            assert await elapsed(faulty.get("k")) >= 0.3
            assert await elapsed(faulty.list("")) < 0.3
            faulty.delay(0, ops=["get"])
            assert await elapsed(faulty.get("k")) < 0.3

    run(scenario, tmp_path)


def test_fail_raises_count_times_before_reaching_the_backend(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            storage = Storage(faulty)
            faulty.fail(["commit"], count=2)
            for _ in range(2):
                with pytest.raises(UnavailableError):
                    await storage.put_if_absent("k", b"v")
            assert await other.get("k") is None  # never applied
            assert await storage.put_if_absent("k", b"v") == 1
            assert await storage.get("k") == Versioned(b"v", 1)

    run(scenario, tmp_path)


def test_fail_without_count_lasts_until_heal(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, _):
            faulty.fail(["get", "list"])
            for _ in range(3):
                with pytest.raises(UnavailableError):
                    await faulty.get("k")
                with pytest.raises(UnavailableError):
                    await faulty.list("")
            await faulty.commit([Check("k", 0)], [Put("k", b"v")])  # commits are unaffected
            faulty.heal()
            assert await faulty.get("k") == Versioned(b"v", 1)

    run(scenario, tmp_path)


def test_fail_applied_loses_only_the_answer(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            storage = Storage(faulty)
            faulty.fail(["commit"], count=1, applied=True)
            with pytest.raises(UnavailableError):
                await storage.put_if_absent("k", b"v")
            assert await other.get("k") == Versioned(b"v", 1)  # it did apply
            faulty.fail(["commit"], count=1, applied=True)
            with pytest.raises(UnavailableError):  # not KeyExistsError: that answer is lost too
                await storage.put_if_absent("k", b"w")

    run(scenario, tmp_path)


def test_unknown_operation_names_are_refused(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, _):
            with pytest.raises(ValueError, match="unknown operations"):
                faulty.fail(["put"])  # type: ignore[list-item]

    run(scenario, tmp_path)


def test_partition_fails_every_operation_and_suspends_sessions_until_heal(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            storage = Storage(faulty)
            assert await storage.put_if_absent("k", b"1") == 1
            session = await faulty.open_session(30.0)
            states: list[SessionState] = []
            session.add_state_listener(states.append)
            faulty.partition()
            assert session.state is SessionState.SUSPENDED
            calls: Sequence[Coroutine[Any, Any, object]] = [
                storage.get("k"),
                storage.list(""),
                storage.put_if_absent("x", b"1"),
                storage.update_if_exists("k", b"2"),
                storage.compare_and_set("k", b"2", 1),
                storage.delete("k"),
                faulty.open_session(30.0),
            ]
            for call in calls:
                with pytest.raises(UnavailableError):
                    await call
            with pytest.raises(UnavailableError):
                await anext(faulty.watch(""))
            assert await other.get("k") == Versioned(b"1", 1)  # the backend itself is fine
            faulty.heal()
            assert session.state is SessionState.CONNECTED
            assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert await storage.compare_and_set("k", b"2", 1) == 2
            assert await storage.delete("k", 2)

    run(scenario, tmp_path)


class GatedMetastore(FaultyMetastore):
    """Holds each commit until released, so a test can act while one is in flight."""

    def __init__(self, inner: Metastore) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        self.entered.set()
        await self.release.wait()
        return await super().commit(checks, ops)


def test_a_call_in_flight_when_the_partition_starts_loses_its_answer(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (_, other):
            gated = GatedMetastore(await open_metastore(url))
            faulty = FaultyMetastore(gated)
            try:
                write = asyncio.ensure_future(Storage(faulty).put_if_absent("k", b"v"))
                await gated.entered.wait()
                faulty.partition()
                gated.release.set()
                with pytest.raises(UnavailableError):
                    await write
                assert await other.get("k") == Versioned(b"v", 1)  # applied all the same
            finally:
                await faulty.close()

    run(scenario, tmp_path)


@pytest.mark.parametrize("fault", ["partition", "drop_watch_events"])
def test_open_watches_go_silent_then_resync_after_heal(tmp_path: Path, fault: str) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            watch = faulty.watch("w/")
            try:
                assert await next_event(watch) == Resync()
                await other.put_if_absent("w/a", b"1")
                assert await next_event(watch) == Changed(frozenset({"w/a"}))
                getattr(faulty, fault)()
                await other.put_if_absent("w/b", b"1")
                await until(lambda: faulty.dropped_events >= 1, "the change to be dropped", DEADLINE_S)
                if fault == "drop_watch_events":
                    assert await faulty.get("w/b") == Versioned(b"1", 1)  # only hints are lost
                faulty.heal()
                assert await next_event(watch) == Resync()
                await other.put_if_absent("w/c", b"1")
                assert await next_event(watch) == Changed(frozenset({"w/c"}))
            finally:
                await watch.aclose()

    run(scenario, tmp_path)


def test_closing_the_wrapper_ends_its_watches(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        faulty = FaultyMetastore(await open_metastore(url))
        watch = faulty.watch("")
        assert await next_event(watch) == Resync()
        await faulty.close()
        with pytest.raises(StopAsyncIteration):
            await next_event(watch)

    run(scenario, tmp_path)


@pytest.mark.parametrize("fault", ["partition", "drop_watch_events"])
def test_listener_registry_converges_after_heal(tmp_path: Path, fault: str) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            registry = ListenerRegistry(faulty)
            seen: list[Versioned | None] = []
            registry.add_value_listener("cfg", seen.append)
            try:
                await until(lambda: seen == [None], "the initial value", DEADLINE_S)
                getattr(faulty, fault)()
                await other.put_if_absent("cfg", b"1")
                await other.update_if_exists("cfg", b"2")
                await until(lambda: faulty.dropped_events >= 1, "the hint to be dropped", DEADLINE_S)
                assert seen == [None]  # no hint, so no re-read
                faulty.heal()
                await until(lambda: seen[-1] == Versioned(b"2", 2), "the listener to converge", DEADLINE_S)
            finally:
                await registry.close()

    run(scenario, tmp_path)


def test_expire_removes_ephemeral_keys_and_loses_the_session(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            storage = Storage(faulty)
            session = await faulty.open_session(30.0)
            states: list[SessionState] = []
            session.add_state_listener(states.append)
            assert await storage.put_if_absent("eph", b"x", session) == 1
            found = await other.get("eph")
            assert found is not None and found.session_id == session.id
            await faulty.expire(session)
            assert session.state is SessionState.LOST
            assert states == [SessionState.LOST]
            assert await other.get("eph") is None
            with pytest.raises(SessionLostError):
                await storage.put_if_absent("eph2", b"x", session)
            faulty.partition()
            faulty.heal()
            assert session.state is SessionState.LOST  # LOST is final

    run(scenario, tmp_path)


def test_a_session_expired_during_a_partition_stays_lost_after_heal(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            session = await faulty.open_session(30.0)
            await Storage(faulty).put_if_absent("eph", b"x", session)
            faulty.partition()
            await faulty.expire(session)
            assert session.state is SessionState.LOST
            faulty.heal()
            assert session.state is SessionState.LOST
            assert await other.get("eph") is None

    run(scenario, tmp_path)


def test_expire_refuses_a_session_of_another_metastore(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with opened(url) as (faulty, other):
            foreign = await other.metastore.open_session(30.0)
            with pytest.raises(ValueError, match="not opened through"):
                await faulty.expire(foreign)

    run(scenario, tmp_path)
