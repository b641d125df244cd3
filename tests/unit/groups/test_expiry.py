"""Offsets expiry (KIP-211): what counts from when, for each kind of group."""

from __future__ import annotations

import struct

from barnabas.groups.consumer_protocol import subscribed_topics
from barnabas.groups.expiry import expired_offsets
from barnabas.groups.group import Group, GroupState, Member
from barnabas.groups.records import OffsetCommitValue

RETENTION = 1000


def committed(at_ms: int) -> OffsetCommitValue:
    return OffsetCommitValue(offset=1, leader_epoch=-1, metadata="", commit_timestamp=at_ms)


def subscription(*topics: str) -> bytes:
    body = b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + body + struct.pack(">i", -1)


def test_an_empty_groups_offsets_expire_together_from_when_it_emptied() -> None:
    group = Group("g", protocol_type="consumer", state_timestamp_ms=5000)
    group.offsets = {("a", 0): committed(0), ("b", 0): committed(4900)}
    assert expired_offsets(group, 5999, RETENTION, subscribed_topics) == []
    assert sorted(expired_offsets(group, 6000, RETENTION, subscribed_topics)) == [("a", 0), ("b", 0)]


def test_standalone_offsets_expire_one_by_one_from_their_commit() -> None:
    group = Group("g")  # no protocol type: commits without group management
    group.offsets = {("a", 0): committed(0), ("b", 0): committed(900)}
    assert expired_offsets(group, 1500, RETENTION, subscribed_topics) == [("a", 0)]


def test_a_stable_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to() -> None:
    group = Group("g", protocol_type="consumer", protocol_name="range", state=GroupState.STABLE)
    group.add(Member("m", None, "c", "/h", 1000, 6000, "consumer", [("range", subscription("a"))]))
    group.offsets = {("a", 0): committed(0), ("b", 0): committed(0)}
    assert expired_offsets(group, 10_000, RETENTION, subscribed_topics) == [("b", 0)]
    group.state = GroupState.PREPARING_REBALANCE
    assert expired_offsets(group, 10_000, RETENTION, subscribed_topics) == [], "nothing expires mid-rebalance"
