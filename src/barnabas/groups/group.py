"""One consumer group of the classic protocol: members, generation, chosen protocol, offsets.

Kafka's GroupMetadata and MemberMetadata (core/.../coordinator/group in 3.x):

- States and the moves between them: Empty → PreparingRebalance → CompletingRebalance →
  Stable → PreparingRebalance …, and any state → Dead (unloaded or deleted). A move from a
  state not listed as its predecessor is a bug, so it raises.
- The first member fixes the group's protocol type; every member must share it, and the group
  protocol is one every member supports, chosen by the members' first preferences (votes).
- The leader is a member awaiting join; when the leader leaves, the next one awaiting join
  takes over. Static members (``group.instance.id``) map an instance id to the current member id.
- A member "awaits join" while its JoinGroup is parked (``join_future``) and "awaits sync"
  while its SyncGroup is (``sync_future``); the coordinator completes those futures.
- Offsets live with the group: (topic, partition) → the committed value, as on Kafka's
  GroupMetadata; ``offsets.OffsetStore`` is what changes them once loaded.
- After a rebalance every member must send SyncGroup within the rebalance timeout; those that
  have not yet are ``pending_sync`` (newer Kafka removes them when the time is up).

Nothing here schedules or writes anything: the coordinator does, with this as its state.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .records import GroupMetadataValue, MemberRecord, OffsetCommitValue

__all__ = ["Group", "GroupState", "Member", "Protocol"]

Protocol = tuple[str, bytes]  # (name, metadata)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.DEAD: set(GroupState),
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    assignment: bytes = b""
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
    #: Joined in the rebalance under way (its session is not yet watched).
    is_new: bool = False
    #: When the session ends unless a heartbeat (or a join/sync) comes first, in ms.
    expires_at_ms: int = 0

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        return list(protocols) == self.protocols

    def metadata_for(self, protocol: str) -> bytes:
        return next((data for name, data in self.protocols if name == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    generation: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    #: Members of this generation that have not sent SyncGroup yet (Kafka's pendingSyncMembers).
    pending_sync: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetCommitValue] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    #: A member joined during the initial delay of a rebalance from Empty (it may be extended).
    new_member_added: bool = False

    # -- state ---------------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: {self.state.value} cannot move to {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members -------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            awaiting = [m.member_id for m in self.members.values() if m.awaiting_join]
            self.leader_id = awaiting[0] if awaiting else next(iter(self.members), None)
        return member

    def replace_static_member(self, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: it keeps its place, the old id is gone."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member known under another member id (a duplicate or a zombie instance)."""
        if instance_id is None or instance_id not in self.static_members:
            return False
        return self.static_members[instance_id] != member_id

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        first_member = next(iter(self.members.values()))
        return next(name for name, _ in first_member.protocols if votes.get(name) == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.new_member_added = False

    # -- persistence ---------------------------------------------------------------------------

    def to_record(self, assignment: dict[str, bytes], now_ms: int) -> GroupMetadataValue:
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(self.protocol_name or ""),
                assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "", self.generation, self.protocol_name, self.leader_id, now_ms, members
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
        """A group as loaded from its last metadata record: Stable with its members, else Empty."""
        group = cls(group_id, protocol_type=value.protocol_type or None, generation=value.generation)
        group.protocol_name = value.protocol
        for record in value.members:
            member = Member(
                record.member_id, record.group_instance_id, record.client_id, record.client_host,
                record.rebalance_timeout_ms, record.session_timeout_ms, value.protocol_type,
                [(value.protocol or "", record.subscription)], assignment=record.assignment,
            )  # fmt: skip
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
        return group
