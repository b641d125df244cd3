"""Which segments retention deletes: pure decisions over segment statistics (UnifiedLog.deleteOldSegments).

Rules this module keeps:

- No I/O and no clock: callers pass segment statistics and ``now_ms``, and act on the plan.
- Three rules run in Kafka's order, each on the segments the previous one left:
  1. log start offset: a segment goes when the *next* segment starts at or below the log start
     offset (after DeleteRecords or earlier deletions); this rule applies under every cleanup policy;
  2. ``retention.bytes``: delete the oldest segments while the log stays at least that big without
     them (``total - size >= retention.bytes``);
  3. ``retention.ms``: delete segments whose largest timestamp is more than ``retention.ms`` old.
  Rules 2 and 3 apply only when ``cleanup.policy`` includes ``delete``; -1 disables each.
- Deletion is always a prefix of the segments. A segment is only deletable when everything in it
  is below the high watermark, and an empty last segment never is.
- The active (last) segment may be deleted only by rolling first: the plan says so with
  ``roll_first`` and the caller rolls before deleting, as Kafka's deleteSegments does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .config import LogConfig

__all__ = ["RetentionPlan", "RetentionReason", "SegmentStats", "plan_retention"]

RetentionReason = Literal["log_start_offset", "retention_bytes", "retention_ms"]


class SegmentStats(NamedTuple):
    """What retention needs to know of one segment."""

    base_offset: int
    size: int
    largest_timestamp: int


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """Segments to delete, oldest first, each with the rule that chose it."""

    deletions: tuple[tuple[int, RetentionReason], ...] = ()
    roll_first: bool = False

    @property
    def base_offsets(self) -> list[int]:
        return [base for base, _ in self.deletions]


_Predicate = Callable[[SegmentStats, SegmentStats | None], bool]


def _deletable_prefix(
    segments: Sequence[SegmentStats], predicate: _Predicate, high_watermark: int, log_end_offset: int
) -> int:
    """How many leading segments satisfy ``predicate`` and may go (UnifiedLog.deletableSegments)."""
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size == 0
        if high_watermark >= upper_bound and predicate(segment, following) and not last_and_empty:
            count += 1
        else:
            break
    return count


def plan_retention(
    segments: Sequence[SegmentStats],
    *,
    config: LogConfig,
    log_start_offset: int,
    high_watermark: int,
    log_end_offset: int,
    now_ms: int,
) -> RetentionPlan:
    """Decide which segments the three retention rules delete.

    Args:
        segments: every segment of the log, oldest first; the last one is the active segment.
        config: supplies retention.ms, retention.bytes and cleanup.policy.
        log_start_offset: the log's current log start offset.
        high_watermark: nothing at or above it may be deleted.
        log_end_offset: the upper bound of the active segment.
        now_ms: the time retention.ms is measured against.
    """
    remaining = list(segments)
    deletions: list[tuple[int, RetentionReason]] = []

    def apply(predicate: _Predicate, reason: RetentionReason) -> None:
        count = _deletable_prefix(remaining, predicate, high_watermark, log_end_offset)
        deletions.extend((s.base_offset, reason) for s in remaining[:count])
        del remaining[:count]

    apply(
        lambda _s, following: following is not None and following.base_offset <= log_start_offset,
        "log_start_offset",
    )

    if config.delete_enabled:
        total = sum(s.size for s in remaining)
        if config.retention_bytes >= 0 and total >= config.retention_bytes:
            excess = total - config.retention_bytes

            def over_size(segment: SegmentStats, _following: SegmentStats | None) -> bool:
                nonlocal excess
                if excess - segment.size >= 0:
                    excess -= segment.size
                    return True
                return False

            apply(over_size, "retention_bytes")

        if config.retention_ms >= 0:
            retention_ms = config.retention_ms
            apply(lambda s, _f: now_ms - s.largest_timestamp > retention_ms, "retention_ms")

    roll_first = bool(segments) and len(deletions) == len(segments)
    return RetentionPlan(tuple(deletions), roll_first)
