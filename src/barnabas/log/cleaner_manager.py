"""Which log to clean next, what range, and the cleaner's checkpoints (Kafka's LogCleanerManager).

Rules this module keeps:

- Only logs whose ``cleanup.policy`` includes ``compact`` are cleaned, one pass at a time.
- The dirty section starts at the checkpointed first dirty offset (``cleaner-offset-checkpoint``
  per log dir), reset to the log start offset when it is below it or past the log end. It ends
  at the first uncleanable offset: the lowest of the high watermark (barnabas has no
  transactions, so it is the last stable offset), the active segment's base, and the first
  dirty segment whose largest timestamp is younger than ``min.compaction.lag.ms``; then aligned
  down to a segment base.
- A log is picked when its cleanable ratio (dirty cleanable bytes over clean + cleanable bytes)
  exceeds ``min.cleanable.dirty.ratio``, or when ``max.compaction.lag.ms`` has passed for its
  oldest dirty batch and there are cleanable bytes; the dirtiest such log goes first.
- Planning and swapping run on the caller's thread, which owns the logs. Only
  :meth:`CleanerManager.clean` may run elsewhere: it reads nothing but the job.
- A pass is swapped in only if its log's segment list is unchanged since planning (a truncation,
  retention or deletion in between discards it: Kafka aborts cleaning for those). A pass that
  fails for another reason marks the partition uncleanable until the log is reopened, as Kafka's
  markPartitionUncleanable does.
- A truncation lowers the checkpoint to the active segment's base (maybeTruncateCheckpoint).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .cleaner import Cleaner, CleaningAbortedError, CleaningJob, CleaningResult, SegmentSource
from .cleaner_config import CleanerConfig
from .errors import CorruptCheckpointError
from .files import TopicPartition
from .log import PartitionLog
from .offset_index import OffsetIndex
from .segment import LogSegment
from .time_index import TimeIndex

__all__ = [
    "CleanerManager",
    "LogToClean",
    "cleanable_offsets",
    "log_to_clean",
    "max_compaction_delay",
    "plan_cleaning",
]

logger = logging.getLogger(__name__)

_NO_TIMESTAMP_MAX = (1 << 63) - 1


def _segments_from(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the segment holding ``offset`` (the floor segment), 0 when it is below them all."""
    return max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)


def _overlapping(segments: Sequence[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Segments that hold offsets in [start, end) (UnifiedLog.logSegments(from, to))."""
    return [s for s in segments[_segments_from(segments, start) :] if s.base_offset < end]


def cleanable_offsets(log: PartitionLog, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint must be rewritten).

    LogCleanerManager.cleanableOffsets; the uncleanable offset is not segment-aligned yet.
    """
    log_start, log_end = log.log_start_offset, log.log_end_offset
    first_dirty, force = (checkpoint, False) if checkpoint is not None else (log_start, False)
    if first_dirty < log_start or first_dirty > log_end:
        first_dirty, force = log_start, True
    segments = log.segments
    candidates = [log.high_watermark, log.active_segment.base_offset]
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in segments[_segments_from(segments, first_dirty) : -1]:
            if segment.largest_timestamp > now_ms - min_lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), force


def max_compaction_delay(log: PartitionLog, first_dirty_offset: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty batch is; 0 when it is not."""
    segments = log.segments
    stamps = [
        stamp
        for segment in segments[_segments_from(segments, first_dirty_offset) : -1]
        if (stamp := segment.rolling_based_timestamp()) is not None and stamp > 0
    ]
    earliest = min(stamps) if stamps else _NO_TIMESTAMP_MAX
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A candidate log and the numbers its turn is decided by (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    log: PartitionLog
    first_dirty_offset: int
    #: Segment-aligned: the base of the first segment the pass may not touch.
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def log_to_clean(tp: TopicPartition, log: PartitionLog, checkpoint: int | None, now_ms: int) -> LogToClean:
    """The candidate for ``log`` given its checkpoint (LogToClean and calculateCleanableBytes)."""
    first_dirty, uncleanable, _ = cleanable_offsets(log, checkpoint, now_ms)
    segments = log.segments
    # nonActiveLogSegmentsFrom(uncleanable).headOption.getOrElse(activeSegment): the segment
    # holding the uncleanable offset, or the active one.
    first_uncleanable = segments[_segments_from(segments, uncleanable)].base_offset
    clean_bytes = sum(s.size for s in _overlapping(segments, -1, first_dirty))
    cleanable_bytes = sum(
        s.size for s in _overlapping(segments, min(first_dirty, first_uncleanable), first_uncleanable)
    )
    delay = max_compaction_delay(log, first_dirty, now_ms)
    return LogToClean(tp, log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, delay > 0)


def plan_cleaning(candidate: LogToClean, now_ms: int) -> CleaningJob:
    """Copy what a pass over ``candidate`` needs out of the log, so it can run on another thread."""
    log = candidate.log
    segments = log.segments
    chosen = [s for s in segments[:-1] if s.base_offset < candidate.first_uncleanable_offset]
    sources = []
    for i, segment in enumerate(chosen):
        following = segments[i + 1]
        sources.append(
            SegmentSource(
                base_offset=segment.base_offset,
                path=segment.path,
                size=segment.size,
                next_base_offset=following.base_offset,
                last_modified_ms=segment.last_modified_ms,
                offset_index_bytes=segment.offset_index.entries * OffsetIndex.ENTRY_SIZE,
                time_index_bytes=segment.time_index.entries * TimeIndex.ENTRY_SIZE,
            )
        )
    start = candidate.first_dirty_offset
    holder = segments[_segments_from(segments, start)]
    config = log.config
    return CleaningJob(
        topic_partition=candidate.topic_partition,
        directory=log.directory,
        segments=tuple(sources),
        first_dirty_offset=start,
        first_uncleanable_offset=candidate.first_uncleanable_offset,
        map_start_position=holder.offset_index.lookup(start).position,
        now_ms=now_ms,
        delete_retention_ms=config.delete_retention_ms,
        segment_bytes=config.segment_bytes,
        segment_index_bytes=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        active_producers={pid: entry.last_offset for pid, entry in log.producer_state.producers.items()},
        structure_version=log.structure_version,
        max_records_bytes=config.max_records_bytes,
    )


@dataclass(slots=True)
class _InProgress:
    """A pass in flight: its log, and the segments the job names, to swap out by base offset."""

    log_dir: Path
    log: PartitionLog
    segments: dict[int, LogSegment]


class CleanerManager:
    """Picks compacted logs to clean, keeps their checkpoints, and swaps passes in."""

    def __init__(self, config: CleanerConfig) -> None:
        self.config = config
        self.cleaner = Cleaner(config)
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._in_progress: dict[TopicPartition, _InProgress] = {}
        self._uncleanable: set[TopicPartition] = set()
        #: Set when the owner is closing: passes in flight stop at their next batch.
        self.stopping = False

    # --- checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        """The first dirty offsets recorded for ``log_dir`` (read once, then kept in memory)."""
        found = self._checkpoints.get(log_dir)
        if found is None:
            try:
                found = OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read()
            except CorruptCheckpointError as exc:
                logger.warning("ignoring %s: %s", log_dir / CLEANER_OFFSET_CHECKPOINT, exc)
                found = {}
            self._checkpoints[log_dir] = found
        return found

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Record (or with None, forget) a log's first dirty offset and rewrite the dir's file."""
        entries = self.checkpoints(log_dir)
        if offset is None:
            if entries.pop(tp, None) is None:
                return
        else:
            entries[tp] = offset
        OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).write(entries)

    def forget(self, log_dir: Path, tp: TopicPartition) -> None:
        """A log was deleted: drop its checkpoint and any mark against it."""
        self._uncleanable.discard(tp)
        self.update_checkpoint(log_dir, tp, None)

    # --- one pass ------------------------------------------------------------------------------

    def begin(self, logs: Mapping[TopicPartition, tuple[Path, PartitionLog]], now_ms: int) -> CleaningJob | None:
        """Pick the filthiest compacted log and plan a pass over it (grabFilthiestCompactedLog).

        Returns None when no log needs cleaning or a pass is already in progress.
        """
        if not self.config.enable or self._in_progress:
            return None
        candidates: list[tuple[Path, LogToClean]] = []
        for tp, (log_dir, log) in sorted(logs.items()):
            if not log.config.compact or log.closed or tp in self._uncleanable:
                continue
            checkpoint = self._checkpoint_after_truncation(log_dir, tp, log)
            first_dirty, _, force = cleanable_offsets(log, checkpoint, now_ms)
            if force:
                self.update_checkpoint(log_dir, tp, first_dirty)
            candidate = log_to_clean(tp, log, first_dirty, now_ms)
            if candidate.total_bytes > 0:
                candidates.append((log_dir, candidate))
        ready = [
            (log_dir, c)
            for log_dir, c in candidates
            if (c.need_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        if not ready:
            return None
        log_dir, chosen = max(ready, key=lambda item: item[1].cleanable_ratio)
        job = plan_cleaning(chosen, now_ms)
        log = chosen.log
        log.cleaning = True
        self._in_progress[chosen.topic_partition] = _InProgress(log_dir, log, {s.base_offset: s for s in log.segments})
        logger.info(
            "cleaning %s: dirty section [%d, %d), cleanable ratio %.2f",
            job.name,
            job.first_dirty_offset,
            job.first_uncleanable_offset,
            chosen.cleanable_ratio,
        )
        return job

    def _checkpoint_after_truncation(self, log_dir: Path, tp: TopicPartition, log: PartitionLog) -> int | None:
        checkpoint = self.checkpoints(log_dir).get(tp)
        floor, log.truncated_below = log.truncated_below, None
        if floor is not None and checkpoint is not None and checkpoint > floor:
            self.update_checkpoint(log_dir, tp, floor)
            return floor
        return checkpoint

    def should_abort(self, job: CleaningJob) -> bool:
        """Whether a pass in flight is wasted work: the broker stops, or its log changed or closed.

        Safe to call from the thread running the pass (it only reads attributes).
        """
        entry = self._in_progress.get(job.topic_partition)
        return (
            self.stopping or entry is None or entry.log.closed or entry.log.structure_version != job.structure_version
        )

    def clean(self, job: CleaningJob, should_abort: Callable[[], bool] | None = None) -> CleaningResult:
        """Run the pass (the heavy part): the only method meant for a worker thread.

        Raises:
            CleaningAbortedError, CorruptRecordError, OSError: see :meth:`Cleaner.clean`.
        """
        return self.cleaner.clean(job, should_abort or (lambda: self.should_abort(job)))

    def finish(self, result: CleaningResult, now_ms: int) -> bool:
        """Swap a finished pass in and advance the checkpoint; False when the log changed meanwhile."""
        job = result.job
        tp = job.topic_partition
        entry = self._in_progress.pop(tp, None)
        if entry is None:
            result.discard()
            return False
        log = entry.log
        log.cleaning = False
        if log.closed or log.structure_version != job.structure_version:
            logger.info("discarding the cleaning of %s: the log changed while it ran", job.name)
            result.discard()
            return False
        if result.groups:
            # The groups cover consecutive segments, so one swap (two directory fsyncs) takes them all.
            old = [entry.segments[base] for group in result.groups for base in group.replaces]
            log.replace_segments([group.segment for group in result.groups], old, now_ms)
        self.update_checkpoint(entry.log_dir, tp, result.end_offset)
        stats = result.stats
        logger.info(
            "cleaned %s up to offset %d: %d of %d records kept, %d -> %d bytes, %d keys mapped",
            job.name,
            result.end_offset,
            stats.messages_retained,
            stats.messages_read,
            stats.bytes_read,
            stats.bytes_retained,
            result.map_size,
        )
        return True

    def abandon(self, job: CleaningJob, error: BaseException | None = None) -> None:
        """A pass failed or was aborted: release the log; a real failure marks it uncleanable."""
        tp = job.topic_partition
        entry = self._in_progress.pop(tp, None)
        if entry is None:
            return
        entry.log.cleaning = False
        stale = entry.log.closed or entry.log.structure_version != job.structure_version
        if error is None or isinstance(error, CleaningAbortedError) or stale or self.stopping:
            logger.info("cleaning of %s stopped before it finished", job.name)
            return
        logger.warning("cleaning of %s failed; not cleaning it again until it is reopened: %s", job.name, error)
        self._uncleanable.add(tp)

    def reopened(self, tp: TopicPartition) -> None:
        """A log was opened afresh: a past failure no longer rules it out."""
        self._uncleanable.discard(tp)

    def clean_once(self, logs: Mapping[TopicPartition, tuple[Path, PartitionLog]], now_ms: int) -> bool:
        """Plan, run and swap one pass on this thread; return whether a log was cleaned (for tests and tools)."""
        job = self.begin(logs, now_ms)
        if job is None:
            return False
        try:
            result = self.clean(job)
        except BaseException as exc:
            self.abandon(job, exc)
            raise
        return self.finish(result, now_ms)

    @property
    def in_progress(self) -> bool:
        return bool(self._in_progress)
