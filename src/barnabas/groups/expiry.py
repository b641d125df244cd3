"""Which committed offsets have expired (KIP-211, Kafka's GroupMetadata.removeExpiredOffsets).

``offsets.retention.minutes`` counts from:

- for an Empty group, the moment it became empty (so offsets live as long as anyone uses them);
- for a group without group management (no protocol type), each offset's commit time;
- for a live "consumer" group, each offset's commit time, and only for topics no member
  subscribes to any more;
- other live groups keep everything.

An Empty group left without offsets is removed as well (its metadata gets a tombstone).
"""

from __future__ import annotations

from collections.abc import Callable

from .group import Group, GroupState

__all__ = ["expired_offsets"]

TopicPartition = tuple[str, int]


def expired_offsets(
    group: Group, now_ms: int, retention_ms: int, subscribed: Callable[[Group], set[str]]
) -> list[TopicPartition]:
    if group.is_in(GroupState.EMPTY) and group.protocol_type:
        since = group.state_timestamp_ms
        return list(group.offsets) if since >= 0 and now_ms - since >= retention_ms else []
    if group.protocol_type and not group.is_in(GroupState.EMPTY):
        if group.protocol_type != "consumer" or not group.is_in(GroupState.STABLE):
            return []
        topics = subscribed(group)
        candidates = [tp for tp in group.offsets if tp[0] not in topics]
    else:
        candidates = list(group.offsets)
    return [tp for tp in candidates if now_ms - group.offsets[tp].commit_timestamp >= retention_ms]
