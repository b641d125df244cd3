"""Offset JSON and range planning: pure functions, the arithmetic of Spark's Kafka source.

Rules this module keeps:
- An offset map is `{TopicPartition: next offset to read}`; in a checkpoint it is Kafka's JSON
  `{"topic": {"partition": offset}}` (KafkaSourceOffset), partition numbers as strings.
- A range is `[start, end)`; empty ranges are dropped, never read.
- Nothing here talks to a broker; the caller resolves earliest/latest/timestamps first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "OffsetRange",
    "TopicPartition",
    "new_records",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "rate_limit",
    "split_ranges",
]

# KafkaOffsetRangeLimit.LATEST / EARLIEST: the sentinels in startingOffsets/endingOffsets JSON.
LATEST = -1
EARLIEST = -2


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        # org.apache.kafka.common.TopicPartition.toString, as Spark's messages print it.
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class OffsetRange:
    """Offsets `[start, end)` of one partition: one Spark input partition (KafkaOffsetRange)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range; records may be fewer (compaction), as KafkaOffsetRange.size warns."""
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class DataLossError(Exception):
    """Offsets the query should have read are gone (failOnDataLoss=true turns this into a failure)."""


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Kafka's offset JSON (KafkaSourceOffset / JsonUtils.partitionOffsets), topics and partitions sorted."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of `offsets_to_json` (partition keys may be str or int)."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_for_new: Mapping[TopicPartition, int],
) -> tuple[list[OffsetRange], list[str]]:
    """The ranges between two offset maps, as KafkaMicroBatchStream.planInputPartitions finds them.

    Partitions only in `end` are new and start at their earliest offset; partitions only in `start`
    were deleted; an end below its start means the offsets were reset. Those are data loss.

    Args:
        start: where the batch starts.
        end: where it ends.
        earliest_for_new: earliest offsets of the partitions that are new in `end`.

    Returns:
        The non-empty ranges, ordered by topic and partition, and a message per data-loss finding.
    """
    problems: list[str] = []
    ranges: list[OffsetRange] = []
    for tp in sorted(set(start) - set(end)):
        problems.append(f"{tp} is gone. Some data may have been missed.")
    for tp in sorted(end):
        if tp in start:
            first = start[tp]
        elif tp in earliest_for_new:
            first = earliest_for_new[tp]
            if first != 0:
                problems.append(
                    f"Added partition {tp} starts from {first} instead of 0. Some data may have been missed"
                )
        else:
            problems.append(f"Cannot find earliest offsets of {tp}. Some data may have been missed")
            continue
        last = end[tp]
        if last < first:
            problems.append(
                f"Partition {tp}'s offset was changed from {first} to {last}, some data may have been missed"
            )
            continue
        if last > first:
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    return ranges, problems


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None = None
) -> list[OffsetRange]:
    """Split large ranges so there are about `min_partitions` tasks (KafkaOffsetRangeCalculator.getRanges).

    Without `min_partitions`, or with at least that many non-empty ranges, each Kafka partition is one
    task. Otherwise each range gets `round(size / total * min_partitions)` parts (at least one), after
    small ranges that would get one part anyway are set aside. `max_records_per_partition` then caps
    every task's size (the newer Spark option).
    """
    offset_ranges = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(offset_ranges) < min_partitions:
        total = sum(r.size for r in offset_ranges)
        unsplit = [r for r in offset_ranges if _part_count(r.size, total, min_partitions) == 1]
        unsplit_keys = {r.topic_partition for r in unsplit}
        split_total = total - sum(r.size for r in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        result: list[OffsetRange] = []
        for r in offset_ranges:
            parts = 1 if r.topic_partition in unsplit_keys else _part_count(r.size, split_total, split_min)
            result.extend(_divide(r, parts))
        offset_ranges = [r for r in result if r.size > 0]
    if max_records_per_partition is not None:
        offset_ranges = [
            piece for r in offset_ranges for piece in _divide(r, math.ceil(r.size / max_records_per_partition))
        ]
    return offset_ranges


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round rounds half up.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Cut a range into `parts` nearly equal pieces; the last one absorbs the rounding."""
    pieces: list[OffsetRange] = []
    remaining, first = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        last = min(first + this, r.end)
        pieces.append(OffsetRange(r.topic, r.partition, first, last))
        first = last
    return pieces


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_for_new: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Cap a batch at about `limit` offsets, pro-rated by backlog (KafkaMicroBatchStream.rateLimit).

    Each partition with a backlog gets `limit * size / total` offsets, rounded down, but at least one
    (Spark's "don't completely starve small partitions"); partitions with no backlog keep their end.

    Args:
        limit: maxOffsetsPerTrigger.
        start: the batch's start offsets.
        latest: the newest offsets available.
        earliest_for_new: start offsets of partitions absent from `start`.

    Returns:
        The end offsets of the batch.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_for_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    limited: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        begin = start.get(tp, earliest_for_new.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, begin + share)
    return limited


def new_records(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_for_new: Mapping[TopicPartition, int],
) -> int:
    """Offsets available past `start`: what minOffsetsPerTrigger compares (KafkaMicroBatchStream.delayBatch)."""
    return sum(max(0, end - start.get(tp, earliest_for_new.get(tp, end))) for tp, end in latest.items())
