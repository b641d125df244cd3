"""Consumer groups (the classic protocol) and their offsets, kept in ``__consumer_offsets``."""

from .consumer_protocol import subscribed_topics
from .coordinator import GroupConfig, GroupCoordinator, GroupLog, JoinResult, MemberIdentity, SyncResult
from .group import Group, GroupState, Member
from .partitioner import partition_for
from .records import OffsetCommitValue

__all__ = [
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupLog",
    "GroupState",
    "JoinResult",
    "Member",
    "MemberIdentity",
    "OffsetCommitValue",
    "SyncResult",
    "partition_for",
    "subscribed_topics",
]
