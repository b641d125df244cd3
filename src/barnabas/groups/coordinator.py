"""The group coordinator: classic-protocol consumer groups, and who may commit their offsets.

Kafka's GroupCoordinator (3.x, the classic protocol), on one event loop instead of locks and
purgatories:

- A group belongs to partition ``partition_for(group)`` of ``__consumer_offsets``; this broker
  coordinates the groups of the partitions it leads, once it has loaded them
  (COORDINATOR_LOAD_IN_PROGRESS meanwhile, NOT_COORDINATOR for the rest).
- JoinGroup parks each member (its ``join_future``) until every known member has rejoined or
  the rebalance timeout ends; a group rebalancing from Empty waits
  ``group.initial.rebalance.delay.ms`` more for each new member, up to the rebalance timeout.
  Members that did not rejoin are dropped, the generation moves on, the protocol is voted, and
  the leader gets every member's metadata.
- SyncGroup parks members until the leader's assignment is written to ``__consumer_offsets``;
  then every member gets its share and the group is Stable. Members that send no SyncGroup
  within the rebalance timeout are removed and the group rebalances (Kafka 3's pending sync).
- A member whose session timeout passes without a heartbeat (or join, sync, commit) is removed,
  and the group rebalances. Members parked in a join or sync are kept alive meanwhile.
- Version 4+ joins without a member id get MEMBER_ID_REQUIRED with a new id; static members
  (``group.instance.id``) keep their place across restarts, and an old instance gets
  FENCED_INSTANCE_ID.
- A member commits offsets only in its current generation (Stable or PreparingRebalance); anyone
  commits to an Empty group with generation -1 (consumers without group management), which creates
  the group if need be. Storing, fetching, deleting and expiring offsets is ``offsets.OffsetStore``'s
  (Kafka's GroupMetadataManager); the coordinator checks the request, then delegates.

Writes go through ``GroupLog.append``; everything else is in memory and rebuilt by ``load``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from barnabas.protocol import ErrorCode

from .group import Group, GroupState, Member, Protocol
from .loader import load_groups
from .offsets import OffsetStore
from .partitioner import partition_for
from .records import GroupLog, GroupMetadataKey, OffsetCommitValue, RecordPair, encode_key, encode_value

__all__ = [
    "GroupConfig",
    "GroupCoordinator",
    "GroupLog",
    "JoinResult",
    "MemberIdentity",
    "SyncResult",
]

log = logging.getLogger(__name__)

#: A new member's JoinGroup is dropped after this long if the rebalance never completes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    max_metadata_bytes: int = 4096


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    #: (member id, group instance id, metadata) of every member, for the leader only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None


def _join_error(member_id: str, error: ErrorCode) -> JoinResult:
    return JoinResult(error, member_id)


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        config: GroupConfig,
        group_log: GroupLog,
        partition_count: Callable[[], int],
        clock_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._log = group_log
        self._partition_count = partition_count
        self._now = clock_ms
        self.groups: dict[str, Group] = {}
        self._offsets = OffsetStore(
            group_log, self.groups, self.partition_for, max_metadata_bytes=config.max_metadata_bytes
        )
        self.owned: set[int] = set()
        self._loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._member_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._join_timers: dict[str, asyncio.TimerHandle] = {}
        self._initial_delay: set[str] = set()  # groups whose first rebalance waits for more members
        self._sync_timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[object]] = set()

    # -- ownership -----------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self._partition_count())

    def begin_loading(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads ``partition``: its groups are loading until ``finish_loading``."""
        self.unload(partition)
        self._loading[partition] = leader_epoch

    def finish_loading(self, partition: int, leader_epoch: int, records: Iterable[RecordPair]) -> bool:
        """Install the groups read from ``partition``; False if leadership moved on meanwhile."""
        if self._loading.get(partition) != leader_epoch:
            return False
        del self._loading[partition]
        now = self._now()
        loaded = load_groups(records, now)
        for group in loaded.values():
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._schedule_expiry(group, member, member.session_timeout_ms)
        self.owned.add(partition)
        log.log(logging.INFO if loaded else logging.DEBUG, "loaded %d groups from __consumer_offsets-%d",
                len(loaded), partition)  # fmt: skip
        return True

    def unload(self, partition: int) -> None:
        """This broker no longer leads ``partition``: drop its groups, answering parked requests."""
        self._loading.pop(partition, None)
        if partition not in self.owned:
            return
        self.owned.discard(partition)
        for group in [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]:
            self._drop(group, ErrorCode.not_coordinator)
        log.debug("unloaded the groups of __consumer_offsets-%d", partition)

    def _drop(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            _complete(member.join_future, _join_error(member.member_id, error))
            _complete(member.sync_future, SyncResult(error))
            self._cancel_expiry(group.group_id, member.member_id)
        if (timer := self._join_timers.pop(group.group_id, None)) is not None:
            timer.cancel()
        self._initial_delay.discard(group.group_id)
        self._cancel_pending_sync(group)
        group.transition_to(GroupState.DEAD, self._now())
        self.groups.pop(group.group_id, None)

    def group_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode:
        """Whether this broker serves ``group_id`` now: NONE, or the error the request gets."""
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.invalid_group_id
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return ErrorCode.none

    # -- JoinGroup -----------------------------------------------------------------------------

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        *,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[Protocol],
    ) -> JoinResult:
        error = self.group_status(group_id)
        if error is not ErrorCode.none:
            return _join_error(member_id, error)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return _join_error(member_id, ErrorCode.invalid_session_timeout)
        unknown_member = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown_member:
                return _join_error(member_id, ErrorCode.unknown_member_id)
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now())
        if unknown_member and len(group.members) >= self.config.max_size:
            return _join_error("", ErrorCode.group_max_size_reached)
        join = _Join(
            member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols,
        )  # fmt: skip
        if unknown_member:
            future = self._join_unknown_member(group, join, require_known_member_id)
        else:
            future = self._join_known_member(group, join)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return await future

    def _join_unknown_member(
        self, group: Group, join: _Join, require_known_member_id: bool
    ) -> asyncio.Future[JoinResult]:
        if group.is_in(GroupState.DEAD):
            return _done(_join_error("", ErrorCode.coordinator_not_available))
        if not group.supports(join.protocol_type, [name for name, _ in join.protocols]):
            return _done(_join_error("", ErrorCode.inconsistent_group_protocol))
        new_id = f"{join.group_instance_id or join.client_id}-{uuid.uuid4()}"
        instance = join.group_instance_id
        if instance is not None and instance in group.static_members:
            return self._rejoin_static_member(group, join, new_id)
        if require_known_member_id and instance is None:
            group.pending_members.add(new_id)
            self._schedule_pending_expiry(group, new_id, join.session_timeout_ms)
            return _done(_join_error(new_id, ErrorCode.member_id_required))
        return self._add_member_and_rebalance(group, join, new_id)

    def _rejoin_static_member(self, group: Group, join: _Join, new_id: str) -> asyncio.Future[JoinResult]:
        """A static member restarted (unknown member id, known instance id): it takes its old place."""
        assert join.group_instance_id is not None
        old_id = group.static_members[join.group_instance_id]
        log.info("static member %s of group %s rejoins as %s", join.group_instance_id, group.group_id, new_id)
        old = group.members[old_id]
        _complete(old.join_future, _join_error(old_id, ErrorCode.fenced_instance_id))
        _complete(old.sync_future, SyncResult(ErrorCode.fenced_instance_id))
        self._cancel_expiry(group.group_id, old_id)
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(old_id, new_id)
        changed = not member.matches(join.protocols)
        member.protocols, member.client_id, member.client_host = join.protocols, join.client_id, join.client_host
        member.rebalance_timeout_ms, member.session_timeout_ms = join.rebalance_timeout_ms, join.session_timeout_ms
        self._schedule_expiry(group, member, member.session_timeout_ms)
        future = member.join_future = _future()
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE) and not changed:
            # No rebalance: the old leader id is returned, so this member never assigns alone.
            _complete(future, self._join_result(group, member, leader_override=previous_leader, with_members=False))
        else:
            self._maybe_prepare_rebalance(group, f"static member {join.group_instance_id} rejoined")
        return future

    def _join_known_member(self, group: Group, join: _Join) -> asyncio.Future[JoinResult]:
        member_id = join.member_id
        if group.is_in(GroupState.DEAD):
            return _done(_join_error(member_id, ErrorCode.coordinator_not_available))
        if not group.supports(join.protocol_type, [name for name, _ in join.protocols]):
            return _done(_join_error(member_id, ErrorCode.inconsistent_group_protocol))
        if member_id in group.pending_members:
            return self._add_member_and_rebalance(group, join, member_id)
        if group.static_member_fenced(member_id, join.group_instance_id):
            return _done(_join_error(member_id, ErrorCode.fenced_instance_id))
        member = group.members.get(member_id)
        instance_unknown = join.group_instance_id is not None and join.group_instance_id not in group.static_members
        if member is None or instance_unknown:
            return _done(_join_error(member_id, ErrorCode.unknown_member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, join)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(join.protocols):  # it missed the JoinGroup answer: send it again
                return _done(self._join_result(group, member, with_members=group.is_leader(member_id)))
            return self._update_member_and_rebalance(group, member, join)
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(join.protocols):
                return self._update_member_and_rebalance(group, member, join)
            return _done(self._join_result(group, member, with_members=False))
        log.warning("member %s rejoined group %s in state %s", member_id, group.group_id, group.state.value)
        return _done(_join_error(member_id, ErrorCode.unknown_member_id))

    def _add_member_and_rebalance(self, group: Group, join: _Join, member_id: str) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id, join.group_instance_id, join.client_id, join.client_host, join.rebalance_timeout_ms,
            join.session_timeout_ms, join.protocol_type, join.protocols, is_new=True,
        )  # fmt: skip
        future = member.join_future = _future()
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        return future

    def _update_member_and_rebalance(self, group: Group, member: Member, join: _Join) -> asyncio.Future[JoinResult]:
        member.protocols = join.protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = join.rebalance_timeout_ms, join.session_timeout_ms
        _complete(member.join_future, _join_error(member.member_id, ErrorCode.rebalance_in_progress))
        future = member.join_future = _future()
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        return future

    def _join_result(
        self, group: Group, member: Member, *, with_members: bool, leader_override: str | None = None
    ) -> JoinResult:
        members = []
        if with_members:
            protocol = group.protocol_name or ""
            members = [(m.member_id, m.group_instance_id, m.metadata_for(protocol)) for m in group.members.values()]
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            leader_override if leader_override is not None else group.leader_id or "",
            members,
        )

    # -- rebalancing -----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._propagate_assignment(group, ErrorCode.rebalance_in_progress, reset=True)
        from_empty = group.is_in(GroupState.EMPTY)
        self._cancel_pending_sync(group)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        log.info("group %s rebalances from generation %d: %s", group.group_id, group.generation, reason)
        if from_empty:
            self._initial_delay.add(group.group_id)
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._set_join_timer(group, delay, lambda: self._initial_delay_over(group, delay, remaining))
        else:
            self._initial_delay.discard(group.group_id)
            self._set_join_timer(group, group.rebalance_timeout_ms, lambda: self._complete_join(group))

    def _set_join_timer(self, group: Group, delay_ms: int, callback: Callable[[], None]) -> None:
        if (timer := self._join_timers.pop(group.group_id, None)) is not None:
            timer.cancel()
        self._join_timers[group.group_id] = asyncio.get_running_loop().call_later(delay_ms / 1000, callback)

    def _initial_delay_over(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: new members joined meanwhile buy another delay, within the timeout."""
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            next_delay = min(delay_ms, remaining_ms)
            self._set_join_timer(
                group, next_delay, lambda: self._initial_delay_over(group, delay_ms, max(remaining_ms - next_delay, 0))
            )
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        """Kafka's DelayedJoin.tryComplete: done once every member rejoined (never during the initial delay)."""
        if group.group_id in self._initial_delay:
            return
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._initial_delay.discard(group.group_id)
        if (timer := self._join_timers.pop(group.group_id, None)) is not None:
            timer.cancel()
        if not group.is_in(GroupState.PREPARING_REBALANCE) or self.groups.get(group.group_id) is not group:
            return
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                log.info("member %s of group %s did not rejoin in time; removing it", member.member_id, group.group_id)
                self._cancel_expiry(group.group_id, member.member_id)
                group.remove(member.member_id)
        if not group.elect_joined_leader() and group.members:
            self._set_join_timer(group, group.rebalance_timeout_ms, lambda: self._complete_join(group))
            return
        group.init_next_generation(self._now())
        if group.is_in(GroupState.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation)
            self._spawn(self._store_group(group, {}))
            return
        log.info(
            "group %s stabilised at generation %d with %d members (protocol %s)",
            group.group_id, group.generation, len(group.members), group.protocol_name,
        )  # fmt: skip
        for member in list(group.members.values()):
            _complete(
                member.join_future, self._join_result(group, member, with_members=group.is_leader(member.member_id))
            )
            self._schedule_expiry(group, member, member.session_timeout_ms)
            member.is_new = False
        self._await_syncs(group)

    def _await_syncs(self, group: Group) -> None:
        """Every member must now send SyncGroup within the rebalance timeout (Kafka's DelayedSync)."""
        self._cancel_pending_sync(group)
        group.pending_sync = set(group.members)
        generation = group.generation
        self._sync_timers[group.group_id] = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms / 1000, self._pending_sync_expired, group, generation
        )

    def _cancel_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        if (timer := self._sync_timers.pop(group.group_id, None)) is not None:
            timer.cancel()

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and (timer := self._sync_timers.pop(group.group_id, None)) is not None:
            timer.cancel()

    def _pending_sync_expired(self, group: Group, generation: int) -> None:
        self._sync_timers.pop(group.group_id, None)
        if self.groups.get(group.group_id) is not group or group.generation != generation or not group.pending_sync:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: removing members that never sent SyncGroup: %s", group.group_id, ", ".join(missing))
        for member_id in missing:
            if member_id in group.members:
                self._cancel_expiry(group.group_id, member_id)
                group.remove(member_id)
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    # -- SyncGroup -------------------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        assignment: Mapping[str, bytes],
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        error = self.group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return SyncResult(ErrorCode.rebalance_in_progress)  # the rebalance is lost: rejoin
        if error is not ErrorCode.none:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        error = self._member_error(group, member_id, group_instance_id, generation)
        if error is not ErrorCode.none:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = group.members[member_id]
        if group.is_in(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        self._synced(group, member_id)
        if group.is_in(GroupState.STABLE):
            self._schedule_expiry(group, member, member.session_timeout_ms)
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        future: asyncio.Future[SyncResult] = _future()
        member.sync_future = future
        if group.is_leader(member_id):
            log.info("group %s: assignment received from the leader for generation %d", group_id, generation)
            full = {m: bytes(assignment.get(m, b"")) for m in group.members}
            self._spawn(self._store_assignment(group, generation, full))
        return await future

    async def _store_assignment(self, group: Group, generation: int, assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            return  # someone joined or left meanwhile: a new rebalance is under way
        if error is not ErrorCode.none:
            self._propagate_assignment(group, error, reset=True)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.none, reset=False)
        group.transition_to(GroupState.STABLE, self._now())

    def _propagate_assignment(self, group: Group, error: ErrorCode, *, reset: bool) -> None:
        for member in group.members.values():
            if reset:
                member.assignment = b""
            if member.awaiting_sync:
                result = SyncResult(error, member.assignment, group.protocol_type, group.protocol_name)
                _complete(member.sync_future, result)
                self._schedule_expiry(group, member, member.session_timeout_ms)

    def _member_error(self, group: Group, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    # -- Heartbeat and LeaveGroup ----------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> ErrorCode:
        error = self.group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # answered blindly while loading, as Kafka does
        if error is not ErrorCode.none:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = self._member_error(group, member_id, group_instance_id, generation)
        if error is not ErrorCode.none:
            return error
        member = group.members[member_id]
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        self._schedule_expiry(group, member, member.session_timeout_ms)
        return ErrorCode.rebalance_in_progress if group.is_in(GroupState.PREPARING_REBALANCE) else ErrorCode.none

    def leave_group(self, group_id: str, leaving: Sequence[MemberIdentity]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members; the top-level error and one error per member, in order."""
        error = self.group_status(group_id)
        if error is not ErrorCode.none:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in leaving]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, [self._leave_one(group, identity) for identity in leaving]

    def _leave_one(self, group: Group, identity: MemberIdentity) -> ErrorCode:
        member_id, instance_id = identity.member_id, identity.group_instance_id
        if member_id and group.static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel_expiry(group.group_id, member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._try_complete_join(group)
            return ErrorCode.none
        if instance_id is not None and instance_id in group.static_members:
            member_id = group.static_members[instance_id]
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        log.info("member %s left group %s", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} left")
        return ErrorCode.none

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        _complete(member.join_future, _join_error("", ErrorCode.unknown_member_id))
        _complete(member.sync_future, SyncResult(ErrorCode.unknown_member_id))
        self._cancel_expiry(group.group_id, member.member_id)
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            # Kafka's tryCompleteElseWatch: with every remaining member rejoined (or none left), at once.
            self._try_complete_join(group)

    # -- sessions --------------------------------------------------------------------------------

    def _schedule_expiry(self, group: Group, member: Member, timeout_ms: int) -> None:
        member.expires_at_ms = self._now() + timeout_ms
        key = (group.group_id, member.member_id)
        if (timer := self._member_timers.pop(key, None)) is not None:
            timer.cancel()
        self._member_timers[key] = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._member_expired, group, member.member_id
        )

    def _cancel_expiry(self, group_id: str, member_id: str) -> None:
        if (timer := self._member_timers.pop((group_id, member_id), None)) is not None:
            timer.cancel()

    def _member_expired(self, group: Group, member_id: str) -> None:
        self._member_timers.pop((group.group_id, member_id), None)
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        parked = (member.awaiting_join and not member.is_new) or member.awaiting_sync
        if parked or member.expires_at_ms > self._now():
            self._schedule_expiry(group, member, member.session_timeout_ms)
            return
        log.info("member %s of group %s has failed (session timeout); removing it", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} session expired")

    def _schedule_pending_expiry(self, group: Group, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            self._member_timers.pop((group.group_id, member_id), None)
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)

        self._cancel_expiry(group.group_id, member_id)
        self._member_timers[(group.group_id, member_id)] = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, expire
        )

    # -- offsets ---------------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        offsets: Mapping[TopicPartition, OffsetCommitValue],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self.group_status(group_id, allow_empty_id=True)
        if error is ErrorCode.none:
            error = self._commit_error(group_id, member_id, group_instance_id, generation)
        if error is not ErrorCode.none:
            return dict.fromkeys(offsets, error)
        group = self.groups.get(group_id)
        if group is None:  # a consumer without group management: the group exists for its offsets
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now())
        if member_id in group.members:
            member = group.members[member_id]
            self._schedule_expiry(group, member, member.session_timeout_ms)
        return await self._offsets.commit(group, offsets)

    def _commit_error(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none if generation < 0 else ErrorCode.illegal_generation
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.none
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetCommitValue | None]]:
        """Committed offsets of ``partitions`` (None: all of the group's); None where nothing is committed."""
        error = self.group_status(group_id, allow_empty_id=True)
        if error is not ErrorCode.none:
            return error, {}
        return ErrorCode.none, self._offsets.fetch(group_id, partitions)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], subscribed: Callable[[Group], set[str]]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: remove committed offsets the group no longer consumes."""
        error = self.group_status(group_id)
        if error is not ErrorCode.none:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        topics: set[str] = set()
        if not group.is_in(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.non_empty_group, {}
            topics = subscribed(group)
        results = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions if tp[0] in topics}
        removable = [tp for tp in partitions if tp[0] not in topics]
        if removable:
            results.update(dict.fromkeys(removable, await self._offsets.delete(group, removable)))
        return ErrorCode.none, {tp: results[tp] for tp in partitions}

    async def expire_offsets(self, retention_ms: int) -> int:
        """Delete expired offsets (``expiry``) and the Empty groups left without any; return how many offsets."""
        now = self._now()
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in self.owned or group.is_in(GroupState.DEAD):
                continue
            expiry = await self._offsets.expire(group, now, retention_ms)
            removed += expiry.removed
            if expiry.group_tombstoned and self.groups.get(group.group_id) is group and not group.members:
                self._drop(group, ErrorCode.coordinator_not_available)
                log.info("group %s expired with its %d offsets", group.group_id, expiry.removed)
        return removed

    async def forget_topics(self, topics: set[str]) -> int:
        """Delete the committed offsets of deleted topics (Kafka's handleDeletedPartitions); return how many."""
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) in self.owned:
                removed += await self._offsets.forget(group, topics)
        if removed:
            log.info("removed %d offsets of deleted topics %s", removed, ", ".join(sorted(topics)))
        return removed

    # -- admin -----------------------------------------------------------------------------------

    def loading(self) -> bool:
        return bool(self._loading)

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if self.partition_for(g.group_id) in self.owned]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        error = self.group_status(group_id, allow_empty_id=True)
        if error is not ErrorCode.none:
            return error, None
        return ErrorCode.none, self.groups.get(group_id)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self.group_status(group_id, allow_empty_id=True)
            group = self.groups.get(group_id)
            if error is ErrorCode.none and (group is None or group.is_in(GroupState.DEAD)):
                error = ErrorCode.group_id_not_found
            elif error is ErrorCode.none and group is not None and not group.is_in(GroupState.EMPTY):
                error = ErrorCode.non_empty_group
            if error is not ErrorCode.none or group is None:
                results[group_id] = error
                continue
            records: list[RecordPair] = [(encode_key(GroupMetadataKey(group_id)), None)]
            records += self._offsets.tombstones(group)
            stored = await self._log.append(self.partition_for(group_id), records)
            if stored is ErrorCode.none and self.groups.get(group_id) is group:
                self._drop(group, ErrorCode.coordinator_not_available)
                log.info("group %s deleted with %d offsets", group_id, len(group.offsets))
            results[group_id] = stored
        return results

    # -- storage ---------------------------------------------------------------------------------

    async def _store_group(self, group: Group, assignment: dict[str, bytes]) -> ErrorCode:
        value = encode_value(group.to_record(assignment, self._now()))
        error = await self._log.append(
            self.partition_for(group.group_id), [(encode_key(GroupMetadataKey(group.group_id)), value)]
        )
        if error is not ErrorCode.none:
            log.warning("group %s: storing generation %d failed: %s", group.group_id, group.generation, error.name)
        return error

    def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for partition in list(self.owned | set(self._loading)):
            self.unload(partition)
        for task in list(self._tasks):
            task.cancel()
        for timer in [*self._member_timers.values(), *self._sync_timers.values()]:
            timer.cancel()
        self._member_timers.clear()
        self._sync_timers.clear()


@dataclass(frozen=True, slots=True)
class _Join:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


def _done(result: JoinResult) -> asyncio.Future[JoinResult]:
    future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
    future.set_result(result)
    return future


def _complete(future: asyncio.Future[object] | None, result: object) -> None:
    if future is not None and not future.done():
        future.set_result(result)
