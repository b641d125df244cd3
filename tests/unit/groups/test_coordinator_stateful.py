"""The group coordinator driven by four consumers at random, on a clock the test moves.

The coordinator's timers are the event loop's and its clock is injected, so the loop here keeps
virtual time: a step lets what is due run, and ``tick`` moves time on, firing session expiries,
rebalance and sync timeouts at once. Consumers join, sync (the leader hands out an assignment naming
its generation), heartbeat, leave and commit in any order; every JoinGroup, SyncGroup and
OffsetCommit answer is recorded.

Invariants after every step:

- one generation at a time: every member that joined generation ``g`` was told the same leader and
  protocol, is among the members the leader got, and no answer names a generation the group has not
  reached;
- a member of a Stable group holds the assignment its leader sent for the group's generation, and
  every successful SyncGroup answered with that generation's assignment;
- committed offsets move only by commits: what the coordinator returns is what the successful
  commits wrote, last one winning.

``make fuzz`` runs this long (``tests/fuzz/profiles.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from barnabas.groups import GroupConfig, GroupCoordinator, GroupState, JoinResult, MemberIdentity, OffsetCommitValue
from barnabas.groups.coordinator import SyncResult
from barnabas.protocol import ErrorCode
from tests.fuzz.profiles import stateful_settings

GROUP = "g"
PARTITIONS = 1
SESSION_MS = 300
REBALANCE_MS = 1000
CONSUMERS = 4
T = TypeVar("T")
RecordPair = tuple[bytes, bytes | None]


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time moves only when the test says: timers fire as soon as they are due."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def time(self) -> float:
        return self.now


@dataclass
class ListLog:
    """``__consumer_offsets`` kept in a list; every write succeeds."""

    records: list[RecordPair] = field(default_factory=list)

    async def append(self, partition: int, records: Sequence[RecordPair]) -> ErrorCode:
        self.records.extend(records)
        return ErrorCode.none


@dataclass
class Consumer:
    name: str
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()
    joining: asyncio.Task[JoinResult] | None = None
    syncing: asyncio.Task[SyncResult] | None = None
    committing: asyncio.Task[dict[tuple[str, int], ErrorCode]] | None = None
    commit: tuple[int, dict[tuple[str, int], int]] = (-1, {})


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualClockLoop()
        self.log = ListLog()
        self.consumers = [Consumer(f"c{i}") for i in range(CONSUMERS)]
        self.coordinator = self.call(self._make)
        #: generation -> (leader, protocol, the members the leader was given)
        self.generations: dict[int, tuple[str, str | None, tuple[str, ...]]] = {}
        #: generation -> the assignment its leader sent
        self.assignments: dict[int, dict[str, bytes]] = {}
        self.committed: dict[tuple[str, int], int] = {}

    async def _make(self) -> GroupCoordinator:
        config = GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
        coordinator = GroupCoordinator(1, config, self.log, lambda: PARTITIONS, lambda: int(self.loop.time() * 1000))
        coordinator.begin_loading(0, 0)
        coordinator.finish_loading(0, 0, [])
        return coordinator

    def call(self, make: Callable[[], Awaitable[T]]) -> T:
        result = self.loop.run_until_complete(make())
        self.settle()
        return result

    def settle(self) -> None:
        """Run everything that is ready or due now, then record what finished."""

        async def rounds() -> None:
            for _ in range(30):
                await asyncio.sleep(0)

        self.loop.run_until_complete(rounds())
        for consumer in self.consumers:
            self.collect(consumer)

    def teardown(self) -> None:
        self.loop.run_until_complete(self.coordinator.close())
        for consumer in self.consumers:
            for task in (consumer.joining, consumer.syncing, consumer.committing):
                if task is not None and not task.done():
                    task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    # -- what the consumers were told ---------------------------------------------------------------

    def collect(self, consumer: Consumer) -> None:
        if consumer.joining is not None and consumer.joining.done():
            self.joined(consumer, consumer.joining.result())
            consumer.joining = None
        if consumer.syncing is not None and consumer.syncing.done():
            self.synced(consumer, consumer.syncing.result())
            consumer.syncing = None
        if consumer.committing is not None and consumer.committing.done():
            answers = consumer.committing.result()
            if all(code is ErrorCode.none for code in answers.values()):
                self.committed.update(consumer.commit[1])
                event("a commit stored")
            consumer.committing = None

    def joined(self, consumer: Consumer, result: JoinResult) -> None:
        if result.error is ErrorCode.member_id_required:
            consumer.member_id = result.member_id
            return
        if result.error is not ErrorCode.none:
            if result.error is ErrorCode.unknown_member_id:
                consumer.member_id, consumer.generation = "", -1
            return
        consumer.member_id, consumer.generation = result.member_id, result.generation
        consumer.leader = result.leader == result.member_id
        members = tuple(member for member, _, _ in result.members)
        if consumer.leader:
            consumer.members = members
        leader, protocol, seen = self.generations.get(result.generation, (result.leader, result.protocol_name, ()))
        assert (leader, protocol) == (result.leader, result.protocol_name), (
            f"generation {result.generation} has two leaders or protocols"
        )
        self.generations[result.generation] = (leader, protocol, seen + members)

    def synced(self, consumer: Consumer, result: SyncResult) -> None:
        if result.error is not ErrorCode.none:
            return
        sent = self.assignments.get(consumer.generation)
        assert sent is not None, f"a SyncGroup answered for generation {consumer.generation}, never assigned"
        assert result.assignment == sent.get(consumer.member_id, b""), "a member got another generation's share"

    # -- rules ----------------------------------------------------------------------------------------

    @rule(index=st.integers(0, CONSUMERS - 1), require_member_id=st.booleans())
    def join(self, index: int, require_member_id: bool) -> None:
        consumer = self.consumers[index]
        if consumer.joining is not None:
            return
        coordinator = self.coordinator

        settings: dict[str, Any] = {
            "require_known_member_id": require_member_id, "client_id": consumer.name, "client_host": "/127.0.0.1",
            "rebalance_timeout_ms": REBALANCE_MS, "session_timeout_ms": SESSION_MS, "protocol_type": "consumer",
            "protocols": [("range", b"m")],
        }  # fmt: skip

        async def start() -> None:
            consumer.joining = asyncio.ensure_future(
                coordinator.join_group(GROUP, consumer.member_id, None, **settings)
            )

        self.call(start)

    @rule(index=st.integers(0, CONSUMERS - 1))
    def sync(self, index: int) -> None:
        consumer = self.consumers[index]
        if consumer.syncing is not None or consumer.generation < 0:
            return
        assignment: dict[str, bytes] = {}
        if consumer.leader:
            assignment = {m: f"{consumer.generation}:{m}".encode() for m in consumer.members}
            self.assignments.setdefault(consumer.generation, assignment)
        coordinator, generation, member_id = self.coordinator, consumer.generation, consumer.member_id

        async def start() -> None:
            consumer.syncing = asyncio.ensure_future(
                coordinator.sync_group(GROUP, generation, member_id, None, assignment=assignment)
            )

        self.call(start)

    @rule(index=st.integers(0, CONSUMERS - 1))
    def heartbeat(self, index: int) -> None:
        consumer = self.consumers[index]
        if not consumer.member_id:
            return
        coordinator = self.coordinator

        async def beat() -> ErrorCode:
            return coordinator.heartbeat(GROUP, consumer.member_id, None, consumer.generation)

        if self.call(beat) is ErrorCode.unknown_member_id:
            consumer.member_id, consumer.generation = "", -1

    @rule(index=st.integers(0, CONSUMERS - 1))
    def leave(self, index: int) -> None:
        consumer = self.consumers[index]
        if not consumer.member_id:
            return
        coordinator = self.coordinator

        async def leave() -> tuple[ErrorCode, list[ErrorCode]]:
            return coordinator.leave_group(GROUP, [MemberIdentity(consumer.member_id)])

        self.call(leave)
        consumer.member_id, consumer.generation = "", -1

    @rule(index=st.integers(0, CONSUMERS - 1), partition=st.integers(0, 2), offset=st.integers(0, 1000))
    def commit(self, index: int, partition: int, offset: int) -> None:
        consumer = self.consumers[index]
        if consumer.committing is not None:
            return
        value = OffsetCommitValue(offset=offset, leader_epoch=0, metadata="", commit_timestamp=0)
        consumer.commit = (consumer.generation, {("t", partition): offset})
        coordinator = self.coordinator

        async def start() -> None:
            consumer.committing = asyncio.ensure_future(
                coordinator.commit_offsets(
                    GROUP, consumer.member_id, None, consumer.generation, {("t", partition): value}
                )
            )

        self.call(start)

    @rule(count=st.integers(1, CONSUMERS))
    def everyone_rejoins_then_syncs(self, count: int) -> None:
        """What consumers do together after a rebalance starts: join, wait for the round, sync."""
        for index in range(count):
            self.join(index, require_member_id=False)
        self.tick(1)
        if any(self.consumers[index].joining is not None for index in range(count)):
            self.tick(REBALANCE_MS)  # the round ends: members that did not rejoin are dropped
        for index in range(count):
            self.sync(index)

    @rule(ms=st.sampled_from([1, 50, 120, 301, 1001, 2500]))
    def tick(self, ms: int) -> None:
        self.loop.now += ms / 1000
        self.settle()

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def one_generation_at_a_time(self) -> None:
        group = self.coordinator.groups.get(GROUP)
        reached = group.generation if group is not None else 0
        assert all(g <= reached for g in self.generations), "a JoinGroup answer names a generation not reached"
        for generation, (_, _, members) in self.generations.items():
            leader_view = self.led_members(generation)
            if leader_view is not None:
                assert set(members) <= set(leader_view), f"a member of generation {generation} the leader was not told"

    def led_members(self, generation: int) -> tuple[str, ...] | None:
        leader = self.generations[generation][0]
        return next(
            (c.members for c in self.consumers if c.member_id == leader and c.generation == generation and c.leader),
            None,
        )

    @invariant()
    def stable_members_hold_their_generation_s_assignment(self) -> None:
        group = self.coordinator.groups.get(GROUP)
        event(f"group {group.state.value if group is not None else 'absent'}")
        if group is None or not group.is_in(GroupState.STABLE):
            return
        event(f"stable with {len(group.members)} members")
        sent = self.assignments.get(group.generation)
        assert sent is not None, f"generation {group.generation} is Stable without its leader's assignment"
        for member in group.members.values():
            assert member.assignment == sent.get(member.member_id, b""), f"{member.member_id} holds another share"

    @invariant()
    def committed_offsets_move_only_by_commits(self) -> None:
        error, offsets = self.coordinator.fetch_offsets(GROUP, None)
        assert error is ErrorCode.none
        held: dict[tuple[str, int], Any] = {tp: value.offset for tp, value in offsets.items() if value is not None}
        assert held == self.committed


GroupMachine.TestCase.settings = stateful_settings(max_examples=60, step_count=40)
TestGroupCoordinatorAgainstAModel = GroupMachine.TestCase
