"""What the partition log's operations return (Kafka's LogAppendInfo, FetchDataInfo and friends).

Rules this module keeps:

- Plain values only: no I/O, no reference back to the log. A :class:`PendingAppend` is the one
  mutable type; only :class:`~barnabas.log.log.PartitionLog` settles it, on the owner's thread.
- Results are frozen and slotted where they cross into the broker (Produce, Fetch, ListOffsets,
  OffsetForLeaderEpoch answers), so a handler can hold one without a copy.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from barnabas.protocol import RecordBatchHeader

from .file_slice import FileSlice
from .retention import RetentionReason
from .segment import LogSegment

__all__ = [
    "AppendResult",
    "EpochEndOffset",
    "FollowerAppendResult",
    "MaintenanceResult",
    "OffsetAndTimestamp",
    "PendingAppend",
    "ReadResult",
    "SliceResult",
]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a produced batch went: what the Produce response reports for the partition."""

    base_offset: int
    last_offset: int
    #: The broker's timestamp under LogAppendTime, else -1.
    log_append_time_ms: int
    log_start_offset: int
    #: True when the batch was a producer retry already in the log: nothing was appended.
    duplicate: bool
    max_timestamp: int


@dataclass(slots=True, eq=False)
class PendingAppend:
    """A leader append whose offsets are assigned and whose write may still be in flight.

    ``landed`` completes once the writer thread has written it (None when nothing is in
    flight: a duplicate, or a log without a writer). The append counts only after
    :meth:`PartitionLog.complete_appends` has set ``done``; ``error`` then says whether it failed.
    """

    result: AppendResult
    landed: Future[None] | None = None
    header: RecordBatchHeader | None = None
    segment: LogSegment | None = None
    position: int = -1
    done: bool = False
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class FollowerAppendResult:
    """What one :meth:`PartitionLog.append_as_follower` call wrote (Kafka's LogAppendInfo, trimmed)."""

    #: Base offset of the first batch appended; None when nothing was.
    first_offset: int | None
    #: Last offset of the last batch appended; None when nothing was.
    last_offset: int | None
    #: Whole batches appended, and their bytes.
    batches: int
    size_bytes: int
    #: Leading batches skipped because the log already held them (a re-fetch overlap).
    skipped_batches: int
    log_end_offset: int

    @property
    def appended(self) -> bool:
        return self.batches > 0


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches read from one segment, and the offsets a Fetch response reports."""

    #: A view when the read was trimmed to whole batches, so the bytes are never copied twice.
    records: bytes | memoryview
    #: The offset after the last batch returned (the requested offset when nothing was).
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class SliceResult:
    """Whole batches of one segment as a file range (None when nothing was read), and the Fetch offsets."""

    records: FileSlice | None
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class OffsetAndTimestamp(NamedTuple):
    """ListOffsets' answer at batch granularity: a batch's base offset and its maxTimestamp."""

    offset: int
    timestamp: int


class EpochEndOffset(NamedTuple):
    """OffsetForLeaderEpoch's answer: (-1, -1) when the epoch is unknown."""

    epoch: int
    end_offset: int


@dataclass
class MaintenanceResult:
    """What one :meth:`PartitionLog.maintain` call did, for logging and tests."""

    deleted_segments: list[tuple[int, RetentionReason]] = field(default_factory=list)
    rolled: bool = False
    flushed: bool = False
    expired_producers: list[int] = field(default_factory=list)
    removed_files: list[Path] = field(default_factory=list)
    log_start_offset: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.deleted_segments or self.rolled or self.flushed or self.expired_producers or self.removed_files
        )
