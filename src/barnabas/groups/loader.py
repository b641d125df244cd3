"""Rebuild groups from the records of one ``__consumer_offsets`` partition (Kafka's loadGroupsAndOffsets).

Records are applied in log order: the latest value of each key wins and a tombstone removes
it. A group exists afterwards if it has a metadata record or committed offsets; one with only
offsets (consumers that assign partitions themselves) is Empty. Records this code cannot read
are skipped with a warning, so one bad record never hides a partition's groups.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .group import Group
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
)

__all__ = ["load_groups"]

log = logging.getLogger(__name__)


def load_groups(records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> dict[str, Group]:
    metadata: dict[str, GroupMetadataValue] = {}
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
    for key_bytes, value_bytes in records:
        try:
            key = decode_key(key_bytes)
            value = decode_value(key, value_bytes) if value_bytes is not None else None
        except RecordFormatError as exc:
            log.warning("skipping an unreadable __consumer_offsets record: %s", exc)
            continue
        if isinstance(key, OffsetCommitKey):
            committed = offsets.setdefault(key.group, {})
            if isinstance(value, OffsetCommitValue):
                committed[(key.topic, key.partition)] = value
            else:
                committed.pop((key.topic, key.partition), None)
        elif isinstance(key, GroupMetadataKey):
            if isinstance(value, GroupMetadataValue):
                metadata[key.group] = value
            else:
                metadata.pop(key.group, None)
    groups: dict[str, Group] = {}
    for group_id in sorted({*metadata, *(g for g, o in offsets.items() if o)}):
        record = metadata.get(group_id)
        group = Group.from_record(group_id, record, now_ms) if record else Group(group_id, state_timestamp_ms=now_ms)
        group.offsets = offsets.get(group_id, {})
        groups[group_id] = group
    return groups
