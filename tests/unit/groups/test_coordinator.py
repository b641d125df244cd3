"""The group coordinator's state machine in memory: joins, the leader's assignment, heartbeats, session
expiry, static members, commits and reloading, against a GroupLog kept in a list.

The coordinator is pure but for its timers (the event loop's) and its clock (injected: the loop's time
here, so both agree). Timeouts are small and every wait is for an outcome the coordinator produces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from barnabas.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
    MemberIdentity,
    OffsetCommitValue,
    partition_for,
)
from barnabas.protocol import ErrorCode

PARTITIONS = 4
SESSION_MS = 300
REBALANCE_MS = 2000
T = TypeVar("T")
RecordPair = tuple[bytes, bytes | None]


@dataclass
class ListLog:
    """``__consumer_offsets`` as a list per partition; ``error`` makes every append fail with it."""

    records: dict[int, list[RecordPair]] = field(default_factory=dict)
    error: ErrorCode = ErrorCode.none

    async def append(self, partition: int, records: Sequence[RecordPair]) -> ErrorCode:
        if self.error is ErrorCode.none:
            self.records.setdefault(partition, []).extend(records)
        return self.error


def coordinator(group_log: ListLog, *, owned: bool = True, **config: Any) -> GroupCoordinator:
    loop = asyncio.get_running_loop()
    settings = {"min_session_timeout_ms": 100, "initial_rebalance_delay_ms": 0, **config}
    made = GroupCoordinator(1, GroupConfig(**settings), group_log, lambda: PARTITIONS, lambda: int(loop.time() * 1000))
    if owned:
        for partition in range(PARTITIONS):
            made.begin_loading(partition, 0)
            made.finish_loading(partition, 0, group_log.records.get(partition, []))
    return made


def join(
    c: GroupCoordinator, group: str, member_id: str = "", *, instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None, require_known_member_id: bool = False,
    session_ms: int = SESSION_MS,
) -> Awaitable[JoinResult]:  # fmt: skip
    return c.join_group(
        group, member_id, instance, require_known_member_id=require_known_member_id, client_id="client",
        client_host="/127.0.0.1", rebalance_timeout_ms=REBALANCE_MS, session_timeout_ms=session_ms,
        protocol_type="consumer", protocols=protocols or [("range", b"meta-" + group.encode())],
    )  # fmt: skip


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 30))


async def stable_group(c: GroupCoordinator, group: str, size: int) -> list[JoinResult]:
    """``size`` members joined at once and synced with an assignment naming each: their join results."""
    joined = list(await asyncio.gather(*(join(c, group) for _ in range(size))))
    leader = joined[0].leader
    assignment = {r.member_id: r.member_id.encode() for r in joined}
    synced = await asyncio.gather(
        *(c.sync_group(group, r.generation, r.member_id, None, assignment=assignment if r.member_id == leader else {})
          for r in joined)
    )  # fmt: skip
    assert [s.error for s in synced] == [ErrorCode.none] * size
    assert [s.assignment for s in synced] == [r.member_id.encode() for r in joined]
    return joined


def test_a_new_member_gets_its_id_first_then_leads_a_group_of_one() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        first = await join(c, "g", require_known_member_id=True)
        assert first.error is ErrorCode.member_id_required and first.member_id.startswith("client-")
        joined = await join(c, "g", first.member_id, require_known_member_id=True)
        assert (joined.error, joined.generation, joined.leader) == (ErrorCode.none, 1, first.member_id)
        assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
        assert joined.members == [(first.member_id, None, b"meta-g")], "the leader gets every member's metadata"
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE

    run(scenario)


def test_the_leaders_assignment_reaches_every_member_and_is_written_before_the_group_is_stable() -> None:
    async def scenario() -> None:
        group_log = ListLog()
        c = coordinator(group_log)
        joined = await stable_group(c, "g", 3)
        assert len({r.generation for r in joined}) == 1
        assert sum(1 for r in joined if r.members) == 1, "only the leader gets the members"
        assert c.groups["g"].state is GroupState.STABLE
        assert group_log.records[partition_for("g", PARTITIONS)], "the assignment went to __consumer_offsets"

    run(scenario)


def test_a_failed_write_of_the_assignment_sends_everyone_back_to_join() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog(error=ErrorCode.not_coordinator))
        joined = await join(c, "g")
        synced = await c.sync_group("g", joined.generation, joined.member_id, None, assignment={joined.member_id: b"a"})
        assert synced.error is ErrorCode.not_coordinator
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE

    run(scenario)


def test_a_second_member_makes_the_first_rejoin_in_a_new_generation() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        (first,) = await stable_group(c, "g", 1)
        second = asyncio.ensure_future(join(c, "g"))
        await asyncio.sleep(0)  # let the join land: the group is now rebalancing
        assert c.heartbeat("g", first.member_id, None, first.generation) is ErrorCode.rebalance_in_progress
        rejoined = await join(c, "g", first.member_id)
        newcomer = await second
        assert rejoined.generation == newcomer.generation == first.generation + 1
        assert {rejoined.leader} == {newcomer.leader}
        assert c.heartbeat("g", first.member_id, None, first.generation) is ErrorCode.illegal_generation

    run(scenario)


def test_a_member_that_stops_heartbeating_is_removed_and_the_rest_rebalance() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        alive, silent = await stable_group(c, "g", 2)
        group = c.groups["g"]
        while silent.member_id in group.members:  # the survivor heartbeats; the other does not
            code = c.heartbeat("g", alive.member_id, None, alive.generation)
            if code is ErrorCode.rebalance_in_progress:
                break
            await asyncio.sleep(SESSION_MS / 3000)
        rejoined = await join(c, "g", alive.member_id)
        assert rejoined.generation == alive.generation + 1 and list(group.members) == [alive.member_id]
        assert c.heartbeat("g", silent.member_id, None, alive.generation) is ErrorCode.unknown_member_id

    run(scenario)


def test_heartbeats_answer_for_the_group_state_and_the_coordinator_s_ownership() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        (member,) = await stable_group(c, "g", 1)
        assert c.heartbeat("g", member.member_id, None, member.generation) is ErrorCode.none
        assert c.heartbeat("g", "stranger", None, member.generation) is ErrorCode.unknown_member_id
        assert c.heartbeat("g", member.member_id, None, member.generation + 5) is ErrorCode.illegal_generation
        partition = partition_for("g", PARTITIONS)
        c.begin_loading(partition, 1)
        assert c.heartbeat("g", member.member_id, None, member.generation) is ErrorCode.none, "blind while loading"
        assert c.group_status("g") is ErrorCode.coordinator_load_in_progress
        assert not c.finish_loading(partition, 0, []), "a load for an older leader epoch is dropped"
        c.unload(partition)
        assert c.heartbeat("g", member.member_id, None, member.generation) is ErrorCode.not_coordinator
        assert c.group_status("") is ErrorCode.invalid_group_id

    run(scenario)


def test_a_restarted_static_member_takes_its_place_and_fences_its_old_incarnation() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        old = await join(c, "g", instance="pod-0")
        await c.sync_group("g", old.generation, old.member_id, "pod-0", assignment={old.member_id: b"p0"})
        new = await join(c, "g", instance="pod-0")
        assert new.member_id != old.member_id
        assert new.generation == old.generation, "same protocols: no rebalance"
        assert c.heartbeat("g", old.member_id, "pod-0", old.generation) is ErrorCode.fenced_instance_id
        assert c.heartbeat("g", new.member_id, "pod-0", new.generation) is ErrorCode.none
        assert c.groups["g"].members[new.member_id].assignment == b"p0"

    run(scenario)


def test_a_member_with_no_protocol_in_common_is_refused() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        await stable_group(c, "g", 1)
        refused = await join(c, "g", protocols=[("sticky", b"")])
        assert refused.error is ErrorCode.inconsistent_group_protocol

    run(scenario)


def test_leaving_rebalances_the_rest_and_the_last_one_out_empties_the_group() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog())
        first, second = await stable_group(c, "g", 2)
        error, each = c.leave_group("g", [MemberIdentity(second.member_id), MemberIdentity("stranger")])
        assert (error, each) == (ErrorCode.none, [ErrorCode.none, ErrorCode.unknown_member_id])
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        rejoined = await join(c, "g", first.member_id)
        assert rejoined.generation == first.generation + 1
        c.leave_group("g", [MemberIdentity(first.member_id)])
        assert c.groups["g"].state is GroupState.EMPTY

    run(scenario)


def test_commits_need_the_current_generation_except_in_an_empty_group() -> None:
    async def scenario() -> None:
        c = coordinator(ListLog(), max_metadata_bytes=8)
        (member,) = await stable_group(c, "g", 1)
        value = OffsetCommitValue(offset=42, leader_epoch=0, metadata="", commit_timestamp=0)
        assert await c.commit_offsets("g", member.member_id, None, member.generation, {("t", 0): value}) == {
            ("t", 0): ErrorCode.none
        }
        stale = await c.commit_offsets("g", member.member_id, None, member.generation - 1, {("t", 0): value})
        assert stale == {("t", 0): ErrorCode.illegal_generation}
        big = OffsetCommitValue(offset=1, leader_epoch=0, metadata="x" * 9, commit_timestamp=0)
        too_large = await c.commit_offsets("g", member.member_id, None, member.generation, {("t", 1): big})
        assert too_large == {("t", 1): ErrorCode.offset_metadata_too_large}
        simple = await c.commit_offsets("standalone", "", None, -1, {("t", 0): value})
        assert simple == {("t", 0): ErrorCode.none}, "a consumer without group management commits to an empty group"
        error, committed = c.fetch_offsets("g", [("t", 0), ("t", 1)])
        assert error is ErrorCode.none and committed[("t", 0)] == value and committed[("t", 1)] is None

    run(scenario)


def test_a_new_coordinator_loads_the_groups_and_offsets_the_old_one_wrote() -> None:
    async def scenario() -> None:
        group_log = ListLog()
        old = coordinator(group_log)
        (member,) = await stable_group(old, "g", 1)
        value = OffsetCommitValue(offset=7, leader_epoch=3, metadata="m", commit_timestamp=1)
        await old.commit_offsets("g", member.member_id, None, member.generation, {("t", 2): value})
        new = coordinator(group_log)  # the partition's next leader reads the same records
        assert new.fetch_offsets("g", None) == (ErrorCode.none, {("t", 2): value})
        loaded = new.groups["g"]
        assert (loaded.generation, list(loaded.members)) == (member.generation, [member.member_id])
        assert new.heartbeat("g", member.member_id, None, member.generation) is ErrorCode.none

    run(scenario)
