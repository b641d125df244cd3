"""Which ``__consumer_offsets`` partition holds a group: Kafka's ``abs(groupId.hashCode) % N``.

Kafka hashes with Java's ``String.hashCode`` (31·h + UTF-16 code unit, in 32-bit arithmetic)
and ``Utils.abs`` (``n & 0x7fffffff``), so a group lands on the partition Kafka would pick.
"""

from __future__ import annotations

__all__ = ["java_string_hash", "partition_for"]


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions
