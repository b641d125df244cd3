"""Committed offsets: commit, fetch, delete and expire them, writing the records through the GroupLog.

Kafka's GroupMetadataManager, its offset half (storeOffsets, getOffsets, cleanupGroupMetadata,
handleDeletedPartitions), beside the GroupCoordinator:

- The table is each group's ``Group.offsets``, (topic, partition) → the committed value, as Kafka
  keeps it on GroupMetadata. ``load_groups`` builds it from the records; after that this store is the
  only code that changes it.
- The groups are the coordinator's: this store reads its registry and never adds, drops or moves a
  group. Whether a member may commit (generation, membership, fencing) is the coordinator's check,
  made before it calls ``commit``.
- A change is written first and applied once the GroupLog acknowledged it (replicated, like
  acks=all); a failed write changes nothing. A commit whose group was unloaded or deleted while it
  was being written is not applied to the group that is gone.
- A deletion writes a tombstone (a null value) for each offset actually committed, so deleting an
  offset that was never committed writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from barnabas.protocol import ErrorCode

from .consumer_protocol import subscribed_topics
from .expiry import expired_offsets
from .group import Group, GroupState
from .records import (
    GroupLog,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordPair,
    encode_key,
    encode_value,
)

__all__ = ["Expiry", "OffsetStore"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Expiry:
    """What expiring one group's offsets did."""

    #: How many committed offsets were removed.
    removed: int = 0
    #: The group was Empty and lost its last offsets: its metadata got a tombstone in the same write.
    group_tombstoned: bool = False


class OffsetStore:
    """The committed offsets of a coordinator's groups, and the ``__consumer_offsets`` records behind them.

    Args:
        group_log: where the records are written.
        groups: the coordinator's groups by id, read only here.
        partition_for: the ``__consumer_offsets`` partition of a group id.
        max_metadata_bytes: the longest metadata an offset may carry (``offset.metadata.max.bytes``).
    """

    def __init__(
        self,
        group_log: GroupLog,
        groups: Mapping[str, Group],
        partition_for: Callable[[str], int],
        *,
        max_metadata_bytes: int,
    ) -> None:
        self._log = group_log
        self._groups = groups
        self._partition_for = partition_for
        self._max_metadata_bytes = max_metadata_bytes

    async def commit(
        self, group: Group, offsets: Mapping[TopicPartition, OffsetCommitValue]
    ) -> dict[TopicPartition, ErrorCode]:
        """Write and apply the offsets whose metadata fits (Kafka's storeOffsets).

        Args:
            group: the group committing, already checked by the coordinator.
            offsets: the values to commit.

        Returns:
            The error of each partition in ``offsets``: OFFSET_METADATA_TOO_LARGE, or what the write gave.
        """
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self._max_metadata_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = value
        if accepted:
            records = [
                (encode_key(OffsetCommitKey(group.group_id, tp[0], tp[1])), encode_value(value))
                for tp, value in accepted.items()
            ]
            stored = await self._log.append(self._partition_for(group.group_id), records)
            if stored is ErrorCode.none and self._groups.get(group.group_id) is group:
                group.offsets.update(accepted)
            results.update(dict.fromkeys(accepted, stored))
        return {tp: results[tp] for tp in offsets}

    def fetch(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetCommitValue | None]:
        """Committed offsets of ``partitions`` (None: all of the group's, sorted); None where nothing is committed.

        An unknown group has nothing committed. The broker answers None as offset -1.
        """
        group = self._groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return dict(sorted(committed.items()))
        return {tp: committed.get(tp) for tp in partitions}

    async def delete(self, group: Group, partitions: Sequence[TopicPartition]) -> ErrorCode:
        """Remove the committed offsets of ``partitions`` (OffsetDelete).

        Returns:
            What the write of their tombstones gave; NONE if none was committed, so nothing was written.
        """
        records = self._tombstones(group.group_id, [tp for tp in partitions if tp in group.offsets])
        stored = ErrorCode.none
        if records:
            stored = await self._log.append(self._partition_for(group.group_id), records)
        if stored is ErrorCode.none:
            for tp in partitions:
                group.offsets.pop(tp, None)
        return stored

    async def expire(self, group: Group, now_ms: int, retention_ms: int) -> Expiry:
        """Remove the group's expired offsets (``expiry``); an Empty group left without any gets a tombstone too.

        Kafka's cleanupGroupMetadata. Dropping the tombstoned group is the coordinator's.

        Returns:
            What was removed; nothing if the write failed.
        """
        expired = expired_offsets(group, now_ms, retention_ms, subscribed_topics)
        records = self._tombstones(group.group_id, expired)
        tombstone_group = group.is_in(GroupState.EMPTY) and len(expired) == len(group.offsets)
        if tombstone_group:
            records.append((encode_key(GroupMetadataKey(group.group_id)), None))
        if not records or await self._log.append(self._partition_for(group.group_id), records) is not ErrorCode.none:
            return Expiry()
        for tp in expired:
            group.offsets.pop(tp, None)
        return Expiry(len(expired), tombstone_group)

    async def forget(self, group: Group, topics: set[str]) -> int:
        """Remove the group's offsets of deleted ``topics`` (Kafka's handleDeletedPartitions); return how many."""
        gone = [tp for tp in group.offsets if tp[0] in topics]
        if not gone:
            return 0
        records = self._tombstones(group.group_id, gone)
        if await self._log.append(self._partition_for(group.group_id), records) is not ErrorCode.none:
            return 0
        for tp in gone:
            group.offsets.pop(tp, None)
        return len(gone)

    def tombstones(self, group: Group) -> list[RecordPair]:
        """The records that delete every offset the group has committed (for deleting the group with them)."""
        return self._tombstones(group.group_id, group.offsets)

    @staticmethod
    def _tombstones(group_id: str, partitions: Iterable[TopicPartition]) -> list[RecordPair]:
        return [(encode_key(OffsetCommitKey(group_id, topic, partition)), None) for topic, partition in partitions]
