"""One cleaning pass over one log: map the dirty section, rewrite the segments (Kafka's Cleaner).

Rules this module keeps:

- The pass works from a :class:`CleaningJob`, plain data taken from the log on the caller's
  thread (:func:`barnabas.log.cleaner_manager.plan_cleaning`). It never touches the
  :class:`~barnabas.log.log.PartitionLog` or its segment objects: it opens the segment files by
  path and reads only the byte ranges the job names, so it may run on a worker thread while the
  log keeps appending and serving reads. Its only output is new ``.cleaned`` segment files.
- Kafka's order (Cleaner.doClean): build the offset map from the first dirty offset up to the
  first uncleanable offset, stopping early when the map is full; the pass then covers every
  segment that begins below ``offset_map.latest_offset + 1``, which becomes the new first dirty
  offset. Those segments are grouped (groupSegmentsBySize: a group's logs stay within
  ``segment.bytes``, its indexes within ``segment.index.bytes``, its offsets within int32 of
  the first base) and each group is filtered (``record_filter``) into one segment named after
  the group's first base offset.
- Offsets never change: batches keep their base and last offsets, so a compacted log has gaps.
- Every batch read is CRC-checked, and its records are read with the parser produce validation
  uses for compacted topics (``scan_record_keys`` / ``decode_batch_records``, which accept the
  same batches), decompressing to at most the topic's ``max_records_bytes``. A batch they refuse
  (one written before the topic was compacted, when batches stay opaque) fails the pass as
  corrupt, as in Kafka's cleaner. ``should_abort`` is polled once per batch; when it says so,
  or anything fails, the pass deletes what it wrote and raises.
- A cleaned segment is flushed and given its last source segment's modification time before it
  is handed back (Cleaner.cleanSegments).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from barnabas.protocol import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_RECORDS_BYTES,
    CorruptRecordError,
    RecordBatchHeader,
    batch_crc,
    parse_batch_header,
    scan_record_keys,
)

from .cleaner_config import CleanerConfig
from .files import CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TopicPartition, offset_path
from .offset_map import OffsetMap
from .record_filter import CleanerFilter, FilterStats, filter_batch
from .segment import LogSegment

__all__ = [
    "CleanedGroup",
    "Cleaner",
    "CleaningAbortedError",
    "CleaningJob",
    "CleaningResult",
    "SegmentSource",
    "group_segments_by_size",
]

logger = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1


class CleaningAbortedError(Exception):
    """The pass was told to stop (the log changed, closed, or the broker is stopping)."""


@dataclass(frozen=True, slots=True)
class SegmentSource:
    """One closed segment as the cleaner reads it: a file, a byte length and its neighbours."""

    base_offset: int
    path: Path
    size: int
    #: The next segment's base offset: every offset of this segment is below it.
    next_base_offset: int
    last_modified_ms: int
    offset_index_bytes: int
    time_index_bytes: int


@dataclass(frozen=True, slots=True)
class CleaningJob:
    """Everything one pass needs, copied from the log so the pass can run on another thread."""

    topic_partition: TopicPartition
    directory: Path
    #: The closed segments from the log start up to the first uncleanable offset, in order.
    segments: tuple[SegmentSource, ...]
    first_dirty_offset: int
    #: Segment-aligned: the base offset of the first segment the pass may not touch.
    first_uncleanable_offset: int
    #: Where mapping starts in the segment holding the first dirty offset (its index lookup).
    map_start_position: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    #: Producer id -> last offset of its last batch (UnifiedLog.lastRecordsOfActiveProducers).
    active_producers: Mapping[int, int]
    #: The log's structure version when the job was taken; a swap checks it is unchanged.
    structure_version: int
    #: The most a batch's records may decompress to (LogConfig.max_records_bytes).
    max_records_bytes: int = MAX_RECORDS_BYTES

    @property
    def name(self) -> str:
        return str(self.topic_partition)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A cleaned segment (``.cleaned`` files, flushed) and the base offsets of the segments it replaces."""

    segment: LogSegment
    replaces: tuple[int, ...]


@dataclass(slots=True)
class CleaningResult:
    """What a pass produced: cleaned groups, the next first dirty offset, and statistics."""

    job: CleaningJob
    groups: list[CleanedGroup]
    #: Everything below it is now clean: the new cleaner checkpoint.
    end_offset: int
    stats: FilterStats = field(default_factory=FilterStats)
    map_size: int = 0
    map_utilization: float = 0.0

    def discard(self) -> None:
        """Delete the cleaned files (the swap was refused or abandoned)."""
        for group in self.groups:
            group.segment.delete()
        self.groups = []


def group_segments_by_size(
    segments: Sequence[SegmentSource], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[SegmentSource]]:
    """Group consecutive segments so each group fits one segment (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentSource]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index_bytes
        time_index_size = segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            # The last offset of the candidate, bounded by what follows it (lastOffsetForFirstSegment).
            bound = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
            if (
                log_size + candidate.size > max_size
                or index_size + candidate.offset_index_bytes > max_index_size
                or time_index_size + candidate.time_index_bytes > max_index_size
                or (candidate.size != 0 and bound - group[0].base_offset > _INT32_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += candidate.offset_index_bytes
            time_index_size += candidate.time_index_bytes
            i += 1
        groups.append(group)
    return groups


class Cleaner:
    """Runs cleaning passes; safe to call from a worker thread (it shares nothing with the log)."""

    def __init__(self, config: CleanerConfig) -> None:
        self.config = config

    def clean(self, job: CleaningJob, should_abort: Callable[[], bool] = lambda: False) -> CleaningResult:
        """Run one pass (Cleaner.doClean) and return the cleaned segments, not yet swapped in.

        Raises:
            CleaningAbortedError: ``should_abort`` returned True; nothing is left behind.
            CorruptRecordError: a batch failed its CRC-32C or did not decode.
            OSError: a segment file could not be read or a cleaned one written.
        """
        offset_map = OffsetMap(self.config.max_map_entries)
        self._build_offset_map(job, offset_map, should_abort)
        end_offset = offset_map.latest_offset + 1
        result = CleaningResult(job, [], max(end_offset, job.first_dirty_offset))
        result.map_size, result.map_utilization = offset_map.size, offset_map.utilization
        if end_offset <= 0:
            return result
        rules = CleanerFilter(
            offset_map=offset_map,
            now_ms=job.now_ms,
            delete_retention_ms=job.delete_retention_ms,
            active_producers=job.active_producers,
            upper_bound_offset=job.first_uncleanable_offset,
            max_records_bytes=job.max_records_bytes,
        )
        sources = [s for s in job.segments if s.base_offset < end_offset]
        groups = group_segments_by_size(
            sources, job.segment_bytes, job.segment_index_bytes, job.first_uncleanable_offset
        )
        try:
            for group in groups:
                segment = self._clean_group(job, group, rules, result.stats, should_abort)
                result.groups.append(CleanedGroup(segment, tuple(s.base_offset for s in group)))
        except BaseException:
            result.discard()
            raise
        return result

    # --- the offset map ------------------------------------------------------------------------

    def _build_offset_map(self, job: CleaningJob, offset_map: OffsetMap, should_abort: Callable[[], bool]) -> None:
        """Map every key from the first dirty offset to the first uncleanable one (buildOffsetMap)."""
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        dirty = [s for s in job.segments if s.next_base_offset > start and s.base_offset < end]
        for segment in dirty:
            position = job.map_start_position if segment.base_offset <= start < segment.next_base_offset else 0
            for header, batch in self._batches(segment, position, should_abort):
                if not header.is_control:
                    for record in scan_record_keys(batch, verify_crc=False, max_records_bytes=job.max_records_bytes):
                        if record.key is not None and record.offset >= start:
                            if offset_map.full:
                                return
                            offset_map.put(record.key, record.offset)
                if header.last_offset >= start:
                    offset_map.update_latest_offset(header.last_offset)
            # In the case of offset gaps, fast forward to the end of this segment (Kafka does too).
            offset_map.update_latest_offset(min(segment.next_base_offset, end) - 1)

    # --- rewriting -----------------------------------------------------------------------------

    def _clean_group(
        self,
        job: CleaningJob,
        group: Sequence[SegmentSource],
        rules: CleanerFilter,
        stats: FilterStats,
        should_abort: Callable[[], bool],
    ) -> LogSegment:
        """Filter a group of segments into one ``.cleaned`` segment (Cleaner.cleanSegments)."""
        base = group[0].base_offset
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            offset_path(job.directory, base, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)  # an older pass's
        cleaned = LogSegment.create(
            job.directory,
            base,
            index_interval_bytes=job.index_interval_bytes,
            max_index_bytes=job.segment_index_bytes,
            now_ms=job.now_ms,
            file_suffix=CLEANED_SUFFIX,
        )
        try:
            for source in group:
                for header, batch in self._batches(source, 0, should_abort):
                    kept = filter_batch(batch, header, rules, stats)
                    if kept is not None:
                        cleaned.append(kept, parse_batch_header(kept) if kept is not batch else header)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms)
        except BaseException:
            cleaned.delete()
            raise
        return cleaned

    def _batches(
        self, source: SegmentSource, position: int, should_abort: Callable[[], bool]
    ) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        """Each whole batch of ``source`` from ``position`` to its recorded size, CRC-checked.

        Raises:
            CleaningAbortedError: ``should_abort`` said so.
            CorruptRecordError: a batch is cut short or fails its CRC-32C (the file changed or
                is damaged).
        """
        chunk = self.config.io_buffer_size
        fd = os.open(source.path, os.O_RDONLY)
        try:
            end = source.size
            while position < end:
                data = os.pread(fd, min(chunk, end - position), position)
                if len(data) < BATCH_HEADER_SIZE:
                    raise CorruptRecordError(f"{source.path}: a batch at byte {position} is cut short")
                header = parse_batch_header(data)
                if header.size > len(data):  # a batch bigger than the I/O buffer: read it whole
                    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
                        raise CorruptRecordError(f"{source.path}: a batch at byte {position} runs past the end")
                    data = os.pread(fd, header.size, position)
                view = memoryview(data)
                offset = 0
                while len(view) - offset >= BATCH_HEADER_SIZE:
                    header = parse_batch_header(view, offset)
                    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
                        raise CorruptRecordError(f"{source.path}: bad batch length at byte {position + offset}")
                    if offset + header.size > len(view):
                        break
                    if should_abort():
                        raise CleaningAbortedError(f"cleaning of {source.path} was aborted")
                    if batch_crc(view, offset, header.size) != header.crc:
                        raise CorruptRecordError(f"{source.path}: CRC-32C mismatch at byte {position + offset}")
                    yield header, view[offset : offset + header.size]
                    offset += header.size
                if offset == 0:
                    raise CorruptRecordError(f"{source.path}: no whole batch at byte {position}")
                position += offset
        finally:
            os.close(fd)
