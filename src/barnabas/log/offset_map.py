"""Key -> latest offset for the dirty section of a log being cleaned (Kafka's OffsetMap).

Rules this module keeps:

- Keys of up to 16 bytes are stored as they are; longer ones as their MD5 digest, as Kafka's
  SkimpyOffsetMap stores every key. A long key whose digest equals another key is Kafka's own
  accepted risk (2^-128), and it bounds the memory a key can take.
- ``put`` keeps the larger offset seen for a key; the cleaner feeds offsets in increasing order,
  so the last put wins as in Kafka.
- ``latest_offset`` is the last offset the map covers, -1 when empty (OffsetMap.latestOffset);
  a record above it is past the mapped section and is always kept.
- The capacity is a number of entries fixed at construction; :attr:`OffsetMap.full` says when
  the cleaner must stop mapping (Kafka stops at slots x load factor).
"""

from __future__ import annotations

import hashlib

__all__ = ["OffsetMap"]

_MAX_RAW_KEY = 16


def _map_key(key: bytes) -> bytes:
    return key if len(key) <= _MAX_RAW_KEY else hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    """The latest offset of each key in the section a cleaning pass maps."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an offset map needs room for at least one key, not {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self._latest_offset = -1

    @property
    def size(self) -> int:
        """Distinct keys mapped."""
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    @property
    def latest_offset(self) -> int:
        """The highest offset the map covers, -1 when nothing is mapped."""
        return self._latest_offset

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest for ``key`` (and as covered by the map)."""
        self._offsets[_map_key(key)] = offset
        self._latest_offset = max(self._latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1 (Kafka's answer for an unknown key)."""
        return self._offsets.get(_map_key(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        """Mark everything up to ``offset`` as covered, keys or not (OffsetMap.updateLatestOffset)."""
        self._latest_offset = max(self._latest_offset, offset)

    def clear(self) -> None:
        self._offsets.clear()
        self._latest_offset = -1
