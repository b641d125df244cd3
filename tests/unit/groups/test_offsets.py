"""The offset store on its own: commits, fetches, deletes, expiry and deleted topics, written through a GroupLog
kept in lists, and read back as the next coordinator loads them.

The groups are a plain dict standing in for the coordinator's registry: a test unloads a group by removing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from barnabas.groups.group import Group
from barnabas.groups.loader import load_groups
from barnabas.groups.offsets import Expiry, OffsetStore
from barnabas.groups.partitioner import partition_for
from barnabas.groups.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from barnabas.protocol import ErrorCode

PARTITIONS = 4
RETENTION_MS = 1000
T = TypeVar("T")
RecordPair = tuple[bytes, bytes | None]


@dataclass
class ListLog:
    """``__consumer_offsets`` as a list per partition; ``error`` fails every append, ``gate`` holds appends."""

    records: dict[int, list[RecordPair]] = field(default_factory=dict)
    error: ErrorCode = ErrorCode.none
    gate: asyncio.Event | None = None

    async def append(self, partition: int, records: Sequence[RecordPair]) -> ErrorCode:
        if self.gate is not None:
            await self.gate.wait()
        if self.error is ErrorCode.none:
            self.records.setdefault(partition, []).extend(records)
        return self.error

    def of(self, group_id: str) -> list[RecordPair]:
        """The records of the group's partition, in the order they were written."""
        return self.records.get(partition_for(group_id, PARTITIONS), [])

    def decoded(self, group_id: str) -> list[tuple[object, object]]:
        return [(decode_key(k), None if v is None else decode_value(decode_key(k), v)) for k, v in self.of(group_id)]


def store_over(group_log: ListLog, groups: dict[str, Group], *, max_metadata_bytes: int = 64) -> OffsetStore:
    return OffsetStore(
        group_log, groups, lambda group_id: partition_for(group_id, PARTITIONS), max_metadata_bytes=max_metadata_bytes
    )


def new_store(
    group_log: ListLog, *group_ids: str, max_metadata_bytes: int = 64
) -> tuple[OffsetStore, dict[str, Group]]:
    groups = {group_id: Group(group_id, state_timestamp_ms=0) for group_id in group_ids}
    return store_over(group_log, groups, max_metadata_bytes=max_metadata_bytes), groups


def committed(offset: int, *, at_ms: int = 0, metadata: str = "") -> OffsetCommitValue:
    return OffsetCommitValue(offset=offset, leader_epoch=0, metadata=metadata, commit_timestamp=at_ms)


def run(work: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(work, 10))


def tombstone(group_id: str, topic: str, partition: int) -> tuple[object, object]:
    return OffsetCommitKey(group_id, topic, partition), None


def test_committed_offsets_are_written_to_the_groups_partition_then_fetched() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    offsets = {("t", 1): committed(7), ("t", 0): committed(5, metadata="m")}
    assert run(store.commit(groups["g"], offsets)) == {("t", 1): ErrorCode.none, ("t", 0): ErrorCode.none}
    assert store.fetch("g", [("t", 0), ("t", 1)]) == {("t", 0): committed(5, metadata="m"), ("t", 1): committed(7)}
    assert list(store.fetch("g", None)) == [("t", 0), ("t", 1)], "all of the group's, sorted"
    assert group_log.decoded("g") == [
        (OffsetCommitKey("g", "t", 1), committed(7)),
        (OffsetCommitKey("g", "t", 0), committed(5, metadata="m")),
    ]


def test_fetching_what_was_never_committed_gives_none() -> None:
    """None is "no offset": the broker answers it as offset -1."""
    store, groups = new_store(ListLog(), "g")
    run(store.commit(groups["g"], {("t", 0): committed(5)}))
    assert store.fetch("g", [("t", 0), ("t", 9), ("u", 0)]) == {("t", 0): committed(5), ("t", 9): None, ("u", 0): None}
    assert store.fetch("unknown", [("t", 0)]) == {("t", 0): None}
    assert store.fetch("unknown", None) == {}


def test_too_large_metadata_is_refused_and_the_rest_commits() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g", max_metadata_bytes=4)
    offsets = {("t", 0): committed(1, metadata="é" * 3), ("t", 1): committed(2, metadata="four")}
    results = run(store.commit(groups["g"], offsets))
    assert results == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none}, "bytes, not chars"
    assert store.fetch("g", None) == {("t", 1): committed(2, metadata="four")}
    assert group_log.decoded("g") == [(OffsetCommitKey("g", "t", 1), committed(2, metadata="four"))]


def test_a_failed_write_commits_nothing() -> None:
    store, groups = new_store(ListLog(error=ErrorCode.not_coordinator), "g")
    assert run(store.commit(groups["g"], {("t", 0): committed(5)})) == {("t", 0): ErrorCode.not_coordinator}
    assert store.fetch("g", [("t", 0)]) == {("t", 0): None}


def test_a_commit_written_after_its_group_was_unloaded_is_not_applied() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        group_log = ListLog(gate=gate)
        store, groups = new_store(group_log, "g")
        group = groups["g"]
        commit = asyncio.ensure_future(store.commit(group, {("t", 0): committed(5)}))
        await asyncio.sleep(0)  # the commit now waits for its write
        del groups["g"]  # the coordinator unloads the partition meanwhile
        gate.set()
        assert await commit == {("t", 0): ErrorCode.none}, "the write itself succeeded"
        assert group.offsets == {}, "but the group that is gone does not change"
        assert len(group_log.of("g")) == 1

    run(scenario())


def test_an_unloaded_groups_offsets_are_gone_until_its_records_are_loaded_again() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("t", 0): committed(5)}))
    del groups["g"]
    assert store.fetch("g", None) == {}
    assert store.fetch("g", [("t", 0)]) == {("t", 0): None}
    groups.update(load_groups(group_log.of("g"), now_ms=0))
    assert store.fetch("g", None) == {("t", 0): committed(5)}


def test_loading_the_stores_records_replays_replacements_and_tombstones() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g", "h")
    g, h = groups["g"], groups["h"]
    run(store.commit(g, {("t", 0): committed(5), ("t", 1): committed(4), ("gone", 0): committed(1)}))
    run(store.commit(g, {("t", 0): committed(9)}))  # replaces offset 5
    run(store.delete(g, [("t", 1)]))
    run(store.forget(g, {"gone"}))
    run(store.commit(h, {("t", 0): committed(3)}))
    run(store.delete(h, [("t", 0)]))  # h has nothing left
    records = [record for partition in sorted(group_log.records) for record in group_log.records[partition]]
    loaded = load_groups(records, now_ms=0)
    assert sorted(loaded) == ["g"], "a group with neither metadata nor offsets is not loaded"
    assert loaded["g"].offsets == g.offsets == {("t", 0): committed(9)}
    assert store_over(ListLog(), loaded).fetch("g", None) == {("t", 0): committed(9)}


def test_deleting_writes_tombstones_for_the_committed_offsets_only() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("t", 0): committed(5), ("t", 1): committed(6)}))
    assert run(store.delete(groups["g"], [("t", 0), ("t", 5)])) is ErrorCode.none
    assert group_log.decoded("g")[2:] == [tombstone("g", "t", 0)]
    assert store.fetch("g", None) == {("t", 1): committed(6)}
    assert run(store.delete(groups["g"], [("t", 7)])) is ErrorCode.none
    assert len(group_log.of("g")) == 3, "nothing committed, nothing written"


def test_a_failed_delete_keeps_the_offsets() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("t", 0): committed(5)}))
    group_log.error = ErrorCode.not_coordinator
    assert run(store.delete(groups["g"], [("t", 0)])) is ErrorCode.not_coordinator
    assert store.fetch("g", None) == {("t", 0): committed(5)}


def test_expired_offsets_are_tombstoned_and_removed_and_the_rest_kept() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")  # no protocol type: each offset expires from its commit
    run(store.commit(groups["g"], {("a", 0): committed(1, at_ms=0), ("b", 0): committed(2, at_ms=900)}))
    assert run(store.expire(groups["g"], 1500, RETENTION_MS)) == Expiry(removed=1, group_tombstoned=False)
    assert store.fetch("g", None) == {("b", 0): committed(2, at_ms=900)}
    assert group_log.decoded("g")[2:] == [tombstone("g", "a", 0)]


def test_an_empty_group_losing_its_last_offsets_gets_a_tombstone_with_them() -> None:
    group_log = ListLog()
    groups = {"g": Group("g", protocol_type="consumer", state_timestamp_ms=0)}  # Empty since 0
    store = store_over(group_log, groups)
    run(store.commit(groups["g"], {("a", 0): committed(1, at_ms=999)}))
    assert run(store.expire(groups["g"], 999, RETENTION_MS)) == Expiry()
    assert len(group_log.of("g")) == 1, "nothing expired yet: nothing written"
    assert run(store.expire(groups["g"], 1000, RETENTION_MS)) == Expiry(removed=1, group_tombstoned=True)
    assert group_log.decoded("g")[1:] == [tombstone("g", "a", 0), (GroupMetadataKey("g"), None)]
    assert groups["g"].offsets == {}


def test_a_failed_expiry_write_removes_nothing() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("a", 0): committed(1, at_ms=0)}))
    group_log.error = ErrorCode.not_coordinator
    assert run(store.expire(groups["g"], 5000, RETENTION_MS)) == Expiry()
    assert store.fetch("g", None) == {("a", 0): committed(1, at_ms=0)}


def test_forgetting_deleted_topics_removes_only_their_offsets() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("gone", 0): committed(1), ("kept", 0): committed(2), ("gone", 1): committed(3)}))
    assert run(store.forget(groups["g"], {"gone", "other"})) == 2
    assert store.fetch("g", None) == {("kept", 0): committed(2)}
    assert group_log.decoded("g")[3:] == [tombstone("g", "gone", 0), tombstone("g", "gone", 1)]
    assert run(store.forget(groups["g"], {"gone"})) == 0
    assert len(group_log.of("g")) == 5, "nothing left of those topics: nothing written"


def test_tombstones_cover_every_committed_offset_without_writing_them() -> None:
    group_log = ListLog()
    store, groups = new_store(group_log, "g")
    run(store.commit(groups["g"], {("t", 0): committed(1), ("u", 3): committed(2)}))
    records = store.tombstones(groups["g"])
    assert [(decode_key(k), v) for k, v in records] == [tombstone("g", "t", 0), tombstone("g", "u", 3)]
    assert len(group_log.of("g")) == 2
    assert store.fetch("g", None) == {("t", 0): committed(1), ("u", 3): committed(2)}
