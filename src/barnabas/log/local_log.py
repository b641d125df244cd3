"""One partition's segment list and its files (Kafka's LocalLog, with LogSegments folded in).

Rules this module keeps:

- The list and its base offsets change together: every change to the segments goes through a
  method here, so the floor lookup (:meth:`LocalLog.floor_index`) never sees a stale base.
- Only segments and their files: no offsets beyond segment bases, no producer state, epochs,
  high watermark or recovery point. :class:`~barnabas.log.log.PartitionLog` keeps those, waits
  for the writes in flight before any change made here, and bumps its structure version.
- Deleted segments are renamed ``.deleted`` at once and their files removed once
  ``file.delete.delay.ms`` has passed (:meth:`LocalLog.remove_due_files`), as in Kafka, so a
  reader holding one of their files is not cut off.
- Swapping cleaned segments in keeps Kafka's crash-safe rename order (``.cleaned`` -> ``.swap``
  -> final, with the old ones renamed ``.deleted`` in between), and the list changes in one step.
- Single-threaded, like the log: the owner's thread calls every method.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from .config import LogConfig
from .files import CLEANED_SUFFIX, SWAP_SUFFIX, fsync_dir
from .scheduler import LogScheduler, remove_files, run_soon
from .segment import LogSegment

__all__ = ["LocalLog"]

logger = logging.getLogger(__name__)


class LocalLog:
    """The segments of one partition's log, oldest first, the last one active."""

    def __init__(self, directory: Path, segments: Sequence[LogSegment]) -> None:
        """Hold the segments recovery loaded from ``directory`` (at least one)."""
        self.directory = directory
        self._segments = list(segments)
        self._bases = [s.base_offset for s in segments]
        #: Files of deleted segments: (when they are due for removal, their paths).
        self._pending_deletions: list[tuple[int, list[Path]]] = []

    @property
    def segments(self) -> list[LogSegment]:
        """The segment list itself, not a copy: read it, never change it."""
        return self._segments

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    def floor_index(self, offset: int) -> int:
        """The index of the segment whose base offset is the largest at or below ``offset`` (0 if none)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def roll(self, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """Close the active segment for appends and start a new one at ``base_offset``; return it."""
        self.active.on_become_inactive()
        segment = _create_segment(self.directory, base_offset, config, now_ms)
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def delete_segments(self, base_offsets: list[int], now_ms: int, delete_delay_ms: int) -> None:
        """Rename the segments at ``base_offsets`` ``.deleted`` and drop them from the list.

        Their files are removed by :meth:`remove_due_files` once ``delete_delay_ms`` has passed.
        The active segment is never among them (retention rolls first).
        """
        doomed = set(base_offsets)
        keep = []
        for segment in self._segments:
            if segment.base_offset in doomed:
                renamed = segment.mark_deleted()
                self._pending_deletions.append((now_ms + delete_delay_ms, renamed))
                logger.info("deleting segment %d of %s", segment.base_offset, self.directory)
            else:
                keep.append(segment)
        self._segments = keep
        self._bases = [s.base_offset for s in keep]

    @property
    def deleting(self) -> bool:
        """Whether deleted segments' files wait for ``file.delete.delay.ms`` to pass."""
        return bool(self._pending_deletions)

    def remove_due_files(self, now_ms: int, scheduler: LogScheduler | None) -> list[Path]:
        """Remove (with a scheduler: have removed) the deleted segments' files that are due; return them."""
        if not self._pending_deletions:
            return []
        removed: list[Path] = []
        pending = []
        for deadline, paths in self._pending_deletions:
            if deadline <= now_ms:
                removed.extend(paths)
            else:
                pending.append((deadline, paths))
        self._pending_deletions = pending
        if removed:
            run_soon(scheduler, partial(remove_files, removed))
        return removed

    def truncate_to(self, end: int) -> None:
        """Delete every segment above the one holding ``end`` and cut that one back to ``end`` (a batch boundary)."""
        keep = [s for s in self._segments if s.base_offset <= end]
        for segment in self._segments[len(keep) :]:
            segment.delete()
        self._segments = keep
        self._bases = [s.base_offset for s in keep]
        self.active.truncate_to(end)

    def reset_at(self, offset: int, config: LogConfig, now_ms: int) -> None:
        """Delete every segment and start over with one empty segment at ``offset``."""
        for segment in self._segments:
            segment.delete()
        segment = _create_segment(self.directory, offset, config, now_ms)
        self._segments = [segment]
        self._bases = [offset]
        fsync_dir(self.directory)

    def replaced_range(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> range:
        """Where in the list ``old_segments`` are, checked before :meth:`replace_segments` changes anything.

        Raises:
            ValueError: no new segments, or the old ones are not consecutive closed segments of this log.
        """
        doomed = {id(s) for s in old_segments}
        positions = [i for i, s in enumerate(self._segments[:-1]) if id(s) in doomed]
        if (
            not new_segments
            or not positions
            or len(positions) != len(doomed)
            or positions[-1] - positions[0] + 1 != len(positions)
        ):
            raise ValueError("cleaned segments must replace consecutive closed segments of this log")
        return range(positions[0], positions[-1] + 1)

    def replace_segments(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        where: range,
        now_ms: int,
        delete_delay_ms: int,
    ) -> None:
        """Swap ``new_segments`` in for ``old_segments`` at ``where`` (from :meth:`replaced_range`), crash-safely.

        Every new segment goes from ``.cleaned`` to ``.swap`` (a ``.log.swap`` is a finished
        segment that recovery completes the swap with), the old segments are renamed ``.deleted``,
        then the new ones lose their suffix (Kafka's LocalLog.replaceSegments).
        """
        for segment in reversed(new_segments):
            segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.directory)
        self._segments[where.start : where.stop] = sorted(new_segments, key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        for segment in old_segments:
            renamed = segment.mark_deleted()
            self._pending_deletions.append((now_ms + delete_delay_ms, renamed))
        for segment in new_segments:
            segment.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.directory)

    def close(self) -> None:
        """Release every segment's files (nothing is flushed here)."""
        for segment in self._segments:
            segment.close()


def _create_segment(directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    return LogSegment.create(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        now_ms=now_ms,
    )
