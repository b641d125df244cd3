"""A broker's claim on its log dirs, against embedded (SQLite) coordination: what starts, what is refused, why."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TypeVar

import pytest

from barnabas.cluster.claims import CLAIMS_PREFIX, BrokerClaim, ClaimRefusedError, check_claim, record_claim
from barnabas.coordination import Storage, open_storage

T = TypeVar("T")
CLUSTER = "c1"
A, B, C = Path("/data/a"), Path("/data/b"), Path("/data/c")


def run(tmp_path: Path, scenario: Callable[[Storage], Awaitable[T]]) -> T:
    async def main() -> T:
        storage = await open_storage(f"sqlite://{tmp_path / 'coordination.db'}")
        try:
            return await scenario(storage)
        finally:
            await storage.close()

    return asyncio.run(main())


async def claim_log_dirs(
    storage: Storage,
    broker_id: int,
    cluster_id: str,
    directory_ids: dict[Path, str],
    fresh_dirs: Collection[Path],
    *,
    replace: bool = False,
) -> BrokerClaim:
    """What a start does: check before registering, write once registered; the claim it leaves."""
    pending = await check_claim(storage, broker_id, cluster_id, directory_ids, fresh_dirs, replace=replace)
    if pending is not None:
        await record_claim(storage, pending)
    claim = await stored_claim(storage, broker_id)
    assert claim is not None
    return claim


async def stored_claim(storage: Storage, broker_id: int) -> BrokerClaim | None:
    found = await storage.get(f"{CLAIMS_PREFIX}{broker_id}")
    return None if found is None else BrokerClaim.from_bytes(found.value)


def test_the_first_start_claims_its_dirs_and_the_next_start_on_them_passes(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        first = await claim_log_dirs(storage, 1, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        assert first == BrokerClaim(1, CLUSTER, frozenset({"dir-a"}))
        assert await stored_claim(storage, 1) == first
        assert await claim_log_dirs(storage, 1, CLUSTER, {A: "dir-a"}, fresh_dirs=()) == first

    run(tmp_path, scenario)


def test_an_added_log_dir_joins_the_claim(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 1, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        await claim_log_dirs(storage, 1, CLUSTER, {A: "dir-a", B: "dir-b"}, fresh_dirs={B})
        assert await stored_claim(storage, 1) == BrokerClaim(1, CLUSTER, frozenset({"dir-a", "dir-b"}))

    run(tmp_path, scenario)


def test_new_empty_dirs_under_a_claimed_id_are_refused_with_one_line(tmp_path: Path) -> None:
    """The PVC was deleted and the pod came back on a new volume: its data is elsewhere or gone."""

    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 2, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        with pytest.raises(ClaimRefusedError) as refused:
            await claim_log_dirs(storage, 2, CLUSTER, {B: "dir-new"}, fresh_dirs={B})
        message = str(refused.value)
        assert "\n" not in message
        assert "broker 2's log dirs are new" in message and "dir-a" in message and "--replace" in message
        assert await stored_claim(storage, 2) == BrokerClaim(2, CLUSTER, frozenset({"dir-a"})), "the claim moved"

    run(tmp_path, scenario)


def test_a_dir_of_another_claim_is_refused(tmp_path: Path) -> None:
    """Broker 2 started on a volume that was not new and is not the one it claimed."""

    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 2, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        with pytest.raises(ClaimRefusedError) as refused:
            await claim_log_dirs(storage, 2, CLUSTER, {C: "dir-c"}, fresh_dirs=())
        assert str(refused.value).startswith(f"{C} (directory dir-c) is not broker 2's"), refused.value

    run(tmp_path, scenario)


def test_one_claimed_dir_missing_among_several_is_refused(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 3, CLUSTER, {A: "dir-a", B: "dir-b"}, fresh_dirs={A, B})
        with pytest.raises(ClaimRefusedError, match="dir-b"):
            await claim_log_dirs(storage, 3, CLUSTER, {A: "dir-a", C: "dir-c"}, fresh_dirs={C})

    run(tmp_path, scenario)


def test_replace_rewrites_the_claim_to_the_new_dirs(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 2, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        replaced = await claim_log_dirs(storage, 2, CLUSTER, {B: "dir-new"}, fresh_dirs={B}, replace=True)
        assert replaced == BrokerClaim(2, CLUSTER, frozenset({"dir-new"}))
        assert await stored_claim(storage, 2) == replaced
        # From now on the new dirs are the broker's, and the old ones would be refused.
        assert await claim_log_dirs(storage, 2, CLUSTER, {B: "dir-new"}, fresh_dirs=()) == replaced
        with pytest.raises(ClaimRefusedError):
            await claim_log_dirs(storage, 2, CLUSTER, {A: "dir-a"}, fresh_dirs=())

    run(tmp_path, scenario)


def test_claims_are_per_broker_id(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 1, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        await claim_log_dirs(storage, 2, CLUSTER, {B: "dir-b"}, fresh_dirs={B})
        assert await stored_claim(storage, 1) == BrokerClaim(1, CLUSTER, frozenset({"dir-a"}))
        assert await stored_claim(storage, 2) == BrokerClaim(2, CLUSTER, frozenset({"dir-b"}))

    run(tmp_path, scenario)


def test_a_start_refused_later_leaves_the_claim_where_it_was(tmp_path: Path) -> None:
    """The check writes nothing: a --replace start that then finds the id live elsewhere moved no claim."""

    async def scenario(storage: Storage) -> None:
        await claim_log_dirs(storage, 2, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        pending = await check_claim(storage, 2, CLUSTER, {B: "dir-new"}, fresh_dirs={B}, replace=True)
        assert pending is not None and pending.given_up == {"dir-a"} and pending.added == {"dir-new"}
        assert await stored_claim(storage, 2) == BrokerClaim(2, CLUSTER, frozenset({"dir-a"}))

    run(tmp_path, scenario)


def test_two_starts_racing_to_write_one_claim_leave_one_of_them_refused(tmp_path: Path) -> None:
    async def scenario(storage: Storage) -> None:
        first = await check_claim(storage, 4, CLUSTER, {A: "dir-a"}, fresh_dirs={A})
        second = await check_claim(storage, 4, CLUSTER, {B: "dir-b"}, fresh_dirs={B})
        assert first is not None and second is not None
        await record_claim(storage, first)
        with pytest.raises(ClaimRefusedError, match="changed while it started"):
            await record_claim(storage, second)
        assert await stored_claim(storage, 4) == BrokerClaim(4, CLUSTER, frozenset({"dir-a"}))

    run(tmp_path, scenario)
