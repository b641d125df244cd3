"""One partition's log: segments, offsets, producer state and epochs (Kafka's UnifiedLog).

Rules this module keeps:

- Single-threaded: the broker calls from its event loop thread, so there are no locks. No clock
  is read: every method that needs the time takes ``now_ms``. The one exception is the ``os.write``
  of a leader's batch, which an attached :class:`AppendWriter` thread may do
  (:meth:`PartitionLog.begin_append_as_leader`): offsets and segment bytes are reserved in order
  on the owner's thread, the writes land in that order, and :meth:`PartitionLog.complete_appends`
  makes them readable in that order. The log end offset, high watermark and producer state move
  only at completion, so nothing (a consumer, a follower, acks) sees a batch before its write
  landed. Every other change to the log first waits for the writes in flight (``_drain``). A
  failed write fails its append and every later one in flight, and the segment is cut back to
  the last completed batch. A small batch (``INLINE_APPEND_MAX_BYTES``) with none of the log's
  writes in flight is written on the owner's thread instead: the hop to the writer thread and back
  costs two thread wake-ups, more than the write itself when the CPUs are busy.
- Batches stay opaque. A client's batch is checked through its v2 header (``validator``,
  Kafka's LogValidator), then only baseOffset, partitionLeaderEpoch and, for LogAppendTime,
  attributes + maxTimestamp (re-CRCed by ``stamp_log_append_time``) are patched in place. A
  follower's batches (:meth:`PartitionLog.append_as_follower`) carry the leader's offsets and
  epochs and are written unchanged, after every one of them passed its CRC and offset checks. Only
  a compacted topic looks inside (and decompresses) a client's batch: Kafka refuses keyless
  records there, and a batch its cleaner could not read would stop compaction.
- Follower offsets must increase, not continue the log exactly: a compacted leader's log has
  gaps where the cleaner removed whole batches (Kafka's UnifiedLog only rejects going back).
  Reads of an offset inside a gap return the next batch.
- The segment list and its files are a :class:`LocalLog`'s (Kafka's LocalLog); this class decides
  when it changes and keeps the offsets, producer state and epochs that go with it.
- Compaction (``cleaner``) rewrites closed segments elsewhere; :meth:`PartitionLog.replace_segments`
  swaps the result in with Kafka's ``.cleaned`` -> ``.swap`` -> final renames. Every change to the
  segment list other than appending bumps :attr:`PartitionLog.structure_version`, so a cleaning
  pass planned against an older list is discarded instead of swapped in; retention deletes nothing
  while a pass is in progress (:attr:`PartitionLog.cleaning`), as Kafka's cleaner owns retention of
  the logs it cleans.
- A reader never sees half a batch: the log end offset moves after the segment's readable size,
  which moves after the whole write. Reads return whole batches only, never span two segments,
  and stop below ``max_offset`` (the high watermark for consumers).
- Rolling writes a producer snapshot and fsyncs the old segment, so after a crash only the
  segments above the recovery point need recovery; the recovery point records what is known
  durable. With a :class:`LogScheduler` attached the fsyncs run on its thread (Kafka's async
  ``flush-log`` after a roll) and the recovery point moves once they are done; a truncation
  meanwhile voids them, as the data they covered may be gone.
- With a single replica the high watermark follows the log end offset. Replication clears
  :attr:`PartitionLog.hw_follows_log_end` and drives :attr:`PartitionLog.high_watermark` itself,
  starting from :attr:`PartitionLog.checkpointed_high_watermark` (``replication-offset-checkpoint``);
  follower appends never move it. :meth:`PartitionLog.truncate_to` is the follower's truncation and
  only ever cuts at a batch boundary.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial, wraps
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from barnabas.protocol import (
    RecordBatchHeader,
    iter_batch_headers,
    parse_batch_header,
    patch_batch,
    validate_produce_records,
)

from .append_writer import AppendWriter, WriteState
from .config import LogConfig
from .errors import (
    CorruptCheckpointError,
    InconsistentTopicIdError,
    LogError,
    OffsetOutOfRangeError,
)
from .file_slice import FileSlice
from .files import DELETE_DIR_SUFFIX, fsync_dir
from .leader_epoch import LeaderEpochCache
from .local_log import LocalLog
from .partition_metadata import PARTITION_METADATA, read_topic_id, write_topic_id
from .producer_state import ProducerStateManager
from .recovery import LoadedLog, load_log, rebuild_producer_state
from .results import (
    AppendResult,
    EpochEndOffset,
    FollowerAppendResult,
    MaintenanceResult,
    OffsetAndTimestamp,
    PendingAppend,
    ReadResult,
    SliceResult,
)
from .retention import SegmentStats, plan_retention
from .scheduler import LogScheduler, SegmentSync, run_soon
from .segment import LogSegment
from .validator import (
    check_follower_batches,
    check_timestamps,
    convert_compression,
    stamp_log_append_time,
    validate_client_batch,
)

__all__ = [
    "AppendResult",
    "EpochEndOffset",
    "FollowerAppendResult",
    "MaintenanceResult",
    "OffsetAndTimestamp",
    "PartitionLog",
    "PendingAppend",
    "ReadResult",
    "SliceResult",
]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _reports_write_failures(
    method: Callable[Concatenate[PartitionLog, _P], _R],
) -> Callable[Concatenate[PartitionLog, _P], _R]:
    """A log method whose OSError is a failed disk write: the failure channel hears of it, the caller gets it."""

    @wraps(method)
    def reporting(self: PartitionLog, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self._write_failed(exc)
            raise

    return reporting


#: DeleteRecordsRequest.HIGH_WATERMARK: "delete everything below the high watermark".
DELETE_TO_HIGH_WATERMARK = -1
#: Leader batches up to this size are written on the owner's thread when none of the log's writes
#: is in flight (a quiet partition); larger ones, and any behind a write in flight, go to the writer.
INLINE_APPEND_MAX_BYTES = 128 * 1024


class PartitionLog:
    """The durable log of one partition replica."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        loaded: LoadedLog,
        topic_id: uuid.UUID | None,
        now_ms: int,
        *,
        checkpointed_high_watermark: int | None = None,
        hw_follows_log_end: bool = True,
    ) -> None:
        """Use :meth:`open`; this only assembles what recovery loaded."""
        self.directory = directory
        self._topic_partition = directory.name
        self.topic_id = topic_id
        self._config = config
        self._local = LocalLog(directory, loaded.segments)
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        self._producers = loaded.producer_state
        self._epochs = loaded.leader_epochs
        #: The partition dir was created by this open: its files' names are not durable yet.
        self._created_unsynced = loaded.created
        if checkpointed_high_watermark is not None:
            # A crash may have lost data the checkpoint had seen: clamp as updateHighWatermark does.
            checkpointed_high_watermark = max(
                loaded.log_start_offset, min(checkpointed_high_watermark, loaded.log_end_offset)
            )
        #: The high watermark ``replication-offset-checkpoint`` held at load, clamped into the log;
        #: None without an entry. Replication starts from it when it clears ``hw_follows_log_end``.
        self.checkpointed_high_watermark = checkpointed_high_watermark
        self._high_watermark = loaded.log_end_offset
        if not hw_follows_log_end and checkpointed_high_watermark is not None:
            self._high_watermark = checkpointed_high_watermark
        self._last_flush_ms = now_ms
        self._closed = False
        self._structure_version = 0
        #: Bumped whenever the log start, the log end or the high watermark may have moved, and on close: one
        #: number tells a reader that remembered it whether what it read then still holds (read it, never set
        #: it: every move goes through ``_moved``, which also calls the ``on_next_move`` callbacks).
        self.offsets_version = 0
        #: Called once at the next bump of ``offsets_version``, then dropped (see :meth:`on_next_move`).
        self._on_next_move: dict[object, Callable[[], None]] | None = None
        #: Set by the cleaner while a pass over this log is in progress: retention waits.
        self.cleaning = False
        #: The lowest active-segment base a truncation left since the cleaner last looked (its
        #: checkpoint may not stay above it: Kafka's maybeTruncateCheckpoint); None if none.
        self.truncated_below: int | None = None
        #: True for a single replica: leader appends move the high watermark to the log end offset.
        self.hw_follows_log_end = hw_follows_log_end
        #: Writes leader batches off the owner's thread when set (:meth:`attach_writer`).
        self._writer: AppendWriter | None = None
        #: Told of every failed disk write (:meth:`attach_failure_channel`): the log dir goes offline.
        self._report_write_failure: Callable[[Path, BaseException], None] | None = None
        #: Leader batches up to this size skip the writer while none of this log's writes is in flight.
        self._inline_max_bytes = INLINE_APPEND_MAX_BYTES
        self._write_state = WriteState()
        self._inflight: deque[PendingAppend] = deque()
        #: The offset the next leader append gets: the log end offset plus the appends in flight.
        self._next_offset = loaded.log_end_offset
        #: Set while appends after a failed one are being failed and cut back.
        self._cutting_back: BaseException | None = None
        #: Syncs rolled segments and removes deleted files off the owner's thread when set.
        self._scheduler: LogScheduler | None = None
        #: Rolled segments' syncs under way: the future, the recovery point once done, the truncation count then.
        self._syncs: deque[tuple[Future[None], int, int]] = deque()
        #: Told when this log comes to need a maintenance tick (:meth:`attach_tending`).
        self._wants_tending: Callable[[], None] | None = None
        #: Bumped by every truncation: a sync started before one no longer proves anything.
        self._truncations = 0
        #: What recovery found, for logging and tests.
        self.load_report = loaded

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    def open(  # noqa: PLR0917 - the positional signature the broker was promised
        cls,
        directory: Path,
        config: LogConfig,
        now_ms: int,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        high_watermark: int | None = None,
        hw_follows_log_end: bool = True,
        clean_shutdown: bool = False,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``, recovering what a crash may have torn.

        Args:
            directory: the partition dir, ``<topic>-<partition>``.
            config: the topic's log config.
            now_ms: the current time (segment creation, producer expiration).
            recovery_point: from ``recovery-point-offset-checkpoint``; None trusts every
                segment but the last one, which is always recovered.
            log_start_offset: from ``log-start-offset-checkpoint``.
            topic_id: the topic id to record in ``partition.metadata``, or to check against it.
            high_watermark: from ``replication-offset-checkpoint``; kept as
                :attr:`checkpointed_high_watermark`, and the starting high watermark when
                ``hw_follows_log_end`` is False.
            hw_follows_log_end: True for a single replica (the high watermark is the log end).
            clean_shutdown: the log was closed cleanly; no segment is recovered (see ``load_log``).

        Raises:
            InconsistentTopicIdError: ``partition.metadata`` names another topic id.
        """
        try:
            existing = read_topic_id(directory)
        except CorruptCheckpointError as exc:
            if topic_id is None:
                raise
            logger.warning("rewriting unreadable partition metadata: %s", exc)
            existing = None
        if topic_id is not None and existing is not None and existing != topic_id:
            raise InconsistentTopicIdError(f"partition dir {directory} belongs to topic id {existing}, not {topic_id}")
        loaded = load_log(directory, config, now_ms, recovery_point, log_start_offset, clean_shutdown=clean_shutdown)
        if topic_id is not None and existing is None:
            write_topic_id(directory, topic_id, sync=not loaded.created)
        log = cls(
            directory,
            config,
            loaded,
            topic_id or existing,
            now_ms,
            checkpointed_high_watermark=high_watermark,
            hw_follows_log_end=hw_follows_log_end,
        )
        # One line per partition: INFO only when recovery had work to do (the broker sums up the rest).
        logger.log(
            logging.INFO if loaded.recovered_segments or loaded.truncated_bytes else logging.DEBUG,
            "opened log %s: offsets [%d, %d), %d segment(s), recovered %s, truncated %d bytes",
            directory,
            log.log_start_offset,
            log.log_end_offset,
            log.segment_count,
            loaded.recovered_segments,
            loaded.truncated_bytes,
        )
        return log

    # --- state -------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    def on_next_move(self, key: object, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, at the next move of the log start, log end or high watermark (or the close).

        A fetch session that found nothing to read here is told when reading again could find
        something, instead of looking at every partition it holds on every fetch. One callback per
        ``key``: a later one under the same key replaces it.
        """
        if self._on_next_move is None:
            self._on_next_move = {}
        self._on_next_move[key] = callback

    @property
    def next_move_callbacks(self) -> int:
        """How many callbacks wait for the next move (for tests and metrics)."""
        return len(self._on_next_move or ())

    def drop_on_next_move(self, key: object) -> None:
        """Forget the callback under ``key`` (its session closed or forgot the partition)."""
        if self._on_next_move is not None:
            self._on_next_move.pop(key, None)

    def touch(self) -> None:
        """Count as moved: what was read here before may no longer hold (a leader's state changed)."""
        self._moved()

    def _moved(self) -> None:
        self.offsets_version += 1
        if self._on_next_move:
            callbacks, self._on_next_move = self._on_next_move, None
            for callback in callbacks.values():
                callback()

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by replication; kept within [log start offset, log end offset] as Kafka does."""
        self._high_watermark = max(self._log_start_offset, min(offset, self._log_end_offset))
        self._moved()

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is known to be on disk."""
        self._settle_syncs()
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._local.segments)

    @property
    def segment_count(self) -> int:
        return len(self._local.segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epochs

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def structure_version(self) -> int:
        """Bumped by every change to the segment list other than an append or a roll."""
        return self._structure_version

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic config change; index sizes apply to segments created from now on."""
        self._config = config
        self._producers.producer_id_expiration_ms = config.producer_id_expiration_ms
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    # --- appending ---------------------------------------------------------------------------

    def attach_writer(self, writer: AppendWriter | None, *, inline_max_bytes: int = INLINE_APPEND_MAX_BYTES) -> None:
        """Write leader batches on ``writer``'s thread from now on (None: on the caller's thread).

        Batches up to ``inline_max_bytes`` are still written on the caller's thread while none of
        this log's writes is in flight (0: every batch goes to the writer).
        """
        self._drain()
        self._writer = writer
        self._inline_max_bytes = inline_max_bytes

    def attach_failure_channel(self, report: Callable[[Path, BaseException], None] | None) -> None:
        """Tell ``report(directory, error)`` of every disk write of this log that fails (Kafka's
        LogDirFailureChannel): the broker must not go on leading partitions on a disk it cannot write."""
        self._report_write_failure = report

    def attach_tending(self, wants_tending: Callable[[], None] | None) -> None:
        """Call ``wants_tending()`` whenever this log comes to need tending (:attr:`needs_tending`):
        the log manager's tick then visits the few logs that do, not every log it holds."""
        self._wants_tending = wants_tending

    def _needs_tending_now(self) -> None:
        if self._wants_tending is not None:
            self._wants_tending()

    def _write_failed(self, error: BaseException) -> None:
        if isinstance(error, OSError) and self._report_write_failure is not None:
            self._report_write_failure(self.directory, error)

    def attach_scheduler(self, scheduler: LogScheduler | None) -> None:
        """Sync rolled segments and remove deleted files on ``scheduler``'s thread (None: on the caller's).

        A log whose dir :meth:`open` created has its ``partition.metadata``, its dir and the log dir
        that holds it synced there first, as Kafka flushes a new log's partition.metadata on its
        scheduler: creating thousands of partitions waits on none of those fsyncs. A crash before
        that sync loses what any crash loses, the unflushed writes (here: maybe the whole new dir,
        which the next open creates again). Later syncs and checkpoints queued there land after it.
        """
        self._scheduler = scheduler
        if self._created_unsynced:
            self._created_unsynced = False
            if (future := run_soon(scheduler, self._created_files_sync().run)) is not None:
                self._syncs.append((future, self._recovery_point, self._truncations))  # settled as a roll's
                self._needs_tending_now()

    def _created_files_sync(self) -> SegmentSync:
        return SegmentSync([], [self.directory / PARTITION_METADATA], self.directory, with_parent=True)

    @property
    def appends_in_flight(self) -> int:
        """Leader appends whose offsets are assigned but which are not completed yet."""
        return len(self._inflight)

    def append_as_leader(self, records: bytearray | memoryview, leader_epoch: int, now_ms: int) -> AppendResult:
        """Validate, assign offsets and append one Produce partition's records, waiting for the write.

        :meth:`begin_append_as_leader` then :meth:`complete_appends`; raises what either would.
        """
        pending = self.begin_append_as_leader(records, leader_epoch, now_ms)
        if not pending.done:
            self._drain()
            self._maybe_flush_on_messages(now_ms)
        if pending.error is not None:
            raise pending.error
        return pending.result

    @_reports_write_failures
    def begin_append_as_leader(self, records: bytearray | memoryview, leader_epoch: int, now_ms: int) -> PendingAppend:
        """Validate one Produce partition's records, assign offsets and start appending them.

        ``records`` is patched in place (baseOffset, partitionLeaderEpoch, LogAppendTime) and must
        stay unchanged until the append is done. With a writer attached the write of a large batch,
        or of any batch behind a write in flight, runs on its thread: the caller waits for
        ``landed`` and calls :meth:`complete_appends`; otherwise the append is done when this returns.

        Raises:
            CorruptRecordError: bad magic, bad CRC-32C, or sizes that run past the records.
            InvalidRecordError: no batch or more than one, baseOffset not 0, a control batch.
            InvalidTxnStateError: a transactional batch.
            RecordTooLargeError: the batch exceeds max.message.bytes.
            RecordBatchTooLargeError: the batch exceeds segment.bytes.
            InvalidProducerEpochError, OutOfOrderSequenceError: idempotence checks failed.
            ValueError: ``leader_epoch`` is older than the log's latest epoch (a caller bug).
            OSError: the disk write failed; nothing was appended (with a writer, in ``error``).
        """
        self._check_open()
        self._settle_landed()
        if self._cutting_back is not None or self._write_state.failure is not None:
            self._drain()
        size = validate_produce_records(records)
        if size < len(records):
            # Bytes after the batch too short to be one: Kafka's iterator never sees them.
            records = memoryview(records)[:size]
        header = validate_client_batch(records, self._config, self._topic_partition)
        check_timestamps(header, self._config, now_ms)
        records, header = convert_compression(records, header, self._config)
        latest = self._epochs.latest_epoch
        if leader_epoch >= 0 and latest is not None and leader_epoch < latest:
            raise ValueError(f"leader epoch {leader_epoch} is older than the log's latest epoch {latest}")

        if header.has_producer_id and self._inflight:
            # Idempotence checks read the producer state, which moves at completion: let it.
            self._drain()
        duplicate = self._producers.check(header)
        if duplicate is not None:
            result = AppendResult(
                base_offset=duplicate.first_offset,
                last_offset=duplicate.last_offset,
                log_append_time_ms=duplicate.timestamp if self._config.log_append_time else -1,
                log_start_offset=self._log_start_offset,
                duplicate=True,
                max_timestamp=duplicate.timestamp,
            )
            return PendingAppend(result, done=True)

        log_append_time = stamp_log_append_time(records, header, self._config, now_ms)
        base_offset = self._next_offset
        patch_batch(records, 0, base_offset, leader_epoch)
        header = parse_batch_header(records)
        self._maybe_roll(header, now_ms)
        if self._next_offset != base_offset:  # the roll waited for a write that failed: cut back
            base_offset = self._next_offset
            patch_batch(records, 0, base_offset, leader_epoch)
            header = parse_batch_header(records)
        if leader_epoch >= 0:
            # Before the append, as UnifiedLog does: an entry without data is harmless, data
            # without its epoch entry is not.
            self._epochs.assign(leader_epoch, base_offset)
        result = AppendResult(
            base_offset=base_offset,
            last_offset=header.last_offset,
            log_append_time_ms=log_append_time,
            log_start_offset=self._log_start_offset,
            duplicate=False,
            max_timestamp=header.max_timestamp,
        )
        segment = self.active_segment
        if self._writer is None or (not self._inflight and header.size <= self._inline_max_bytes):
            segment.append(records, header)
            self._next_offset = header.next_offset
            self._after_leader_append(header)
            self._maybe_flush_on_messages(now_ms)
            return PendingAppend(result, header=header, done=True)
        position = segment.reserve(header)
        landed = self._writer.submit(segment, memoryview(records)[: header.size], position, self._write_state)
        self._next_offset = header.next_offset
        pending = PendingAppend(result, landed, header, segment, position)
        self._inflight.append(pending)
        self._needs_tending_now()
        return pending

    def complete_appends(self, now_ms: int) -> None:
        """Complete, in order, every leader append whose write has landed (the owner's thread)."""
        self._settle_landed()
        self._maybe_flush_on_messages(now_ms)

    def _settle_landed(self) -> None:
        inflight = self._inflight
        while inflight and inflight[0].landed is not None and inflight[0].landed.done():
            self._settle(inflight.popleft())
        if not inflight and self._cutting_back is not None:
            # Every write after the failed one has finished: nothing more can land.
            self.active_segment.cancel_reservations()
            self._next_offset = self._log_end_offset
            self._cutting_back = None
            self._write_state.clear()

    def _settle(self, pending: PendingAppend) -> None:
        assert pending.landed is not None and pending.header is not None and pending.segment is not None
        pending.done = True
        error: BaseException | None
        if pending.landed.cancelled():  # not written (AppendWriter): fails like a failed write
            error = LogError(f"append at offset {pending.result.base_offset} was cancelled before it was written")
        else:
            error = pending.landed.exception() or self._cutting_back
        if error is None:
            try:
                pending.segment.complete_reserved(pending.position, pending.header)
            except BaseException as exc:
                error = exc
        if error is not None:
            pending.error = error
            self._write_failed(error)
            if self._cutting_back is None:
                logger.error("append to %s at offset %d failed: %s", self.directory, pending.result.base_offset, error)
            self._cutting_back = error
            self._write_state.failure = error  # writes still queued skip the file
            return
        self._after_leader_append(pending.header)

    def _after_leader_append(self, header: RecordBatchHeader) -> None:
        self._log_end_offset = header.next_offset
        self._moved()
        self._producers.update(header)
        if self.hw_follows_log_end:
            self._high_watermark = self._log_end_offset

    def _maybe_flush_on_messages(self, now_ms: int) -> None:
        if self._log_end_offset - self._recovery_point >= self._config.flush_messages:
            self.flush(now_ms)

    def wait_for_appends(self) -> None:
        """Wait for the leader appends in flight and complete them (a role change: a new epoch starts after them)."""
        self._drain()

    def _drain(self) -> None:
        """Wait for every write in flight and complete them: the log holds no reservation afterwards."""
        while self._inflight:
            landed = self._inflight[0].landed
            if landed is not None:
                with contextlib.suppress(BaseException):  # settled as the append's error below
                    landed.result()
            self._settle_landed()

    @_reports_write_failures
    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int) -> FollowerAppendResult:
        """Append a leader's Fetch response records unchanged (Kafka's UnifiedLog.appendAsFollower).

        The leader assigned offsets and partitionLeaderEpoch and already applied its checks, so
        nothing is patched, and neither timestamp rules nor max.message.bytes apply (Kafka passes
        ignoreRecordSize). Every batch is checked before the first is written, so a bad one
        appends nothing. Producer state is recorded unvalidated (AppendOrigin.REPLICATION) so a
        promoted follower still answers retries as duplicates. The high watermark never moves: a
        follower learns it from its leader.

        Args:
            records: whole v2 batches; a partial batch at the end (a Fetch response cut at its
                byte limit) is ignored. Leading batches below the log end offset are skipped.
            now_ms: the current time (segment.ms, producer timestamps, flush policy).

        Returns:
            What was appended; ``appended`` is False when no batch was new.

        Raises:
            CorruptRecordError: a bad CRC-32C, magic or batch length.
            InvalidRecordError: a record count that contradicts the batch's offset delta.
            UnexpectedAppendOffsetError: the first new batch does not start at the log end
                offset, or a later one does not start where its predecessor ended.
            OSError: a write failed; the batches before the failing one stay appended.
        """
        self._check_open()
        self._drain()
        batches, skipped = check_follower_batches(records, self._log_end_offset)
        view = memoryview(records)
        size = 0
        for position, header in batches:
            self._maybe_roll(header, now_ms)
            epoch, latest = header.partition_leader_epoch, self._epochs.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                # maybeAssignEpochStartOffset, before the data as on the leader path, and like a new leader
                # epoch there synced before the recovery point passes it (``flush``), not here on the
                # request path: a follower's first batch of each epoch in each partition held the event loop
                # for a file write and two fsyncs (a sixth of a busy follower's time with 3,000 partitions).
                self._epochs.assign(epoch, header.base_offset, sync=False)
            self.active_segment.append(view[position : position + header.size], header)
            self._log_end_offset = self._next_offset = header.next_offset
            self._moved()
            if header.is_control:
                # Transaction markers carry no sequences; replay on load skips them too.
                self._producers.update_map_end_offset(header.next_offset)
            else:
                self._producers.update(header)
            size += header.size
        if batches and self._log_end_offset - self._recovery_point >= self._config.flush_messages:
            self.flush(now_ms)
        return FollowerAppendResult(
            first_offset=batches[0][1].base_offset if batches else None,
            last_offset=batches[-1][1].last_offset if batches else None,
            batches=len(batches),
            size_bytes=size,
            skipped_batches=skipped,
            log_end_offset=self._log_end_offset,
        )

    def _maybe_roll(self, header: RecordBatchHeader, now_ms: int) -> None:
        active = self.active_segment
        if active.should_roll(
            batch_size=header.size,
            max_timestamp=header.max_timestamp,
            last_offset=header.last_offset,
            now_ms=now_ms,
            segment_bytes=self._config.segment_bytes,
            segment_ms=self._config.segment_ms,
        ):
            self.roll(now_ms)

    @_reports_write_failures
    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset; a no-op when the active one is empty.

        The old segment is fsynced and a producer snapshot written first, so recovery after a
        crash only needs the new segment.
        """
        self._check_open()
        self._drain()
        active = self.active_segment
        if active.size == 0:
            return active
        base_offset = self._log_end_offset
        segment = self._local.roll(base_offset, self._config, now_ms)
        self._producers.update_map_end_offset(base_offset)
        snapshot = self._producers.take_snapshot(sync=False)
        paths = [active.offset_index.path, active.time_index.path, snapshot]
        if self._epochs.unsynced:  # before the recovery point passes the rolled segment
            paths.append(self._epochs.path)
            self._epochs.handed_to_sync()
        sync = SegmentSync([active.dup_fd()], paths, self.directory)
        future = run_soon(self._scheduler, sync.run)
        if future is None:  # synced here: no scheduler, or it is closing
            self._recovery_point = max(self._recovery_point, base_offset)
        else:
            self._syncs.append((future, base_offset, self._truncations))
            self._needs_tending_now()
        logger.info("rolled log %s to a new segment at offset %d", self.directory, base_offset)
        return segment

    def _settle_syncs(self) -> None:
        """Move the recovery point past every rolled segment whose sync finished (in roll order)."""
        syncs = self._syncs
        while syncs and syncs[0][0].done():
            future, offset, truncations = syncs.popleft()
            error = future.exception()
            if error is not None:
                logger.error("syncing %s up to offset %d failed: %s", self.directory, offset, error)
                self._write_failed(error)
            elif truncations == self._truncations:
                self._recovery_point = max(self._recovery_point, min(offset, self._log_end_offset))

    @_reports_write_failures
    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment that may hold data above the recovery point; advance it to the end."""
        self._check_open()
        self._drain()
        self._settle_syncs()
        if self._created_unsynced:  # never given a scheduler
            self._created_unsynced = False
            self._created_files_sync().run()
        self._epochs.sync_below(self._log_end_offset)
        for segment in self._local.segments[self._local.floor_index(self._recovery_point) :]:
            segment.flush()
        self._recovery_point = self._log_end_offset
        if now_ms is not None:
            self._last_flush_ms = now_ms

    # --- reading -----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from ``offset``: the batch holding it first, up to ``max_bytes``.

        Args:
            offset: the fetch offset; a batch holding it is returned whole.
            max_bytes: the byte budget; only whole batches are returned.
            max_offset: return only batches entirely below it (the high watermark for consumers).
            min_one_batch: return the first batch even when it exceeds ``max_bytes`` (KIP-74).

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the log start or above the log end.
        """
        self._check_open()
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
        if offset >= limit:
            return self._read_result(b"", offset)
        segments = self._local.segments
        index = self._local.floor_index(offset)
        while index < len(segments):
            segment = segments[index]
            found = segment.translate_offset(offset)
            if found is None:  # the offset is at or past this segment's end: try the next one
                index += 1
                continue
            first = found.header
            if first.last_offset >= limit:
                break
            budget = max(max_bytes, first.size) if min_one_batch else max_bytes
            if first.size > budget:
                break
            data = segment.read(found.position, budget)
            end, next_offset = 0, offset
            for position, header in iter_batch_headers(data):
                if header.last_offset >= limit:
                    break
                end, next_offset = position + header.size, header.next_offset
            return self._read_result(data if end == len(data) else memoryview(data)[:end], next_offset)
        return self._read_result(b"", offset)

    def read_slice(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> SliceResult:
        """What :meth:`read` returns, as a range of the segment file instead of its bytes (for sendfile).

        Only batch headers are read (from the offset index's nearest entry on). The slice holds a
        descriptor of the segment file of its own, so it stays readable if the segment is deleted
        or compacted away; a cut back is caught when it is opened to send it (:meth:`FileSlice.open`).

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the log start or above the log end.
        """
        self._check_open()
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
        segments = self._local.segments
        index = self._local.floor_index(offset)
        while offset < limit and index < len(segments):
            segment = segments[index]
            found = segment.translate_offset(offset)
            if found is None:  # the offset is at or past this segment's end: try the next one
                index += 1
                continue
            first = found.header
            budget = max(max_bytes, first.size) if min_one_batch else max_bytes
            if first.last_offset >= limit or first.size > budget:
                break
            end, next_offset = segment.whole_batches_end(found.position, first, found.position + budget, limit)
            records = FileSlice(segment, found.position, end - found.position)
            return SliceResult(records, next_offset, self._high_watermark, self._log_start_offset, self._log_end_offset)
        return SliceResult(None, offset, self._high_watermark, self._log_start_offset, self._log_end_offset)

    def _read_result(self, records: bytes | memoryview, next_offset: int) -> ReadResult:
        return ReadResult(records, next_offset, self._high_watermark, self._log_start_offset, self._log_end_offset)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first batch whose maxTimestamp is >= ``timestamp``: its base offset and maxTimestamp.

        Batch granularity: the broker may look inside the batch for the exact record. The offset
        is never below the log start offset. None when no batch is that recent. Special
        ListOffsets timestamps (-1 latest, -2 earliest, -3 max) are the caller's to map.
        """
        self._check_open()
        for segment in self._local.segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_batch_by_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                offset = max(found.header.base_offset, self._log_start_offset)
                return OffsetAndTimestamp(offset, found.header.max_timestamp)
        return None

    def max_timestamp_batch(self) -> OffsetAndTimestamp | None:
        """The first batch holding the log's largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734).

        Batch granularity, found through each segment's max timestamp rather than a full scan.
        None for an empty log.
        """
        self._check_open()
        best: LogSegment | None = None
        for segment in self._local.segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        found = best.find_batch_by_timestamp(best.max_timestamp, self._log_start_offset)
        if found is None:
            return None
        return OffsetAndTimestamp(max(found.header.base_offset, self._log_start_offset), found.header.max_timestamp)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch: the end offset of ``epoch`` (LeaderEpochFileCache.endOffsetFor)."""
        found_epoch, end_offset = self._epochs.end_offset_for(epoch, self._log_end_offset)
        return EpochEndOffset(found_epoch, end_offset)

    # --- deleting ----------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset``; return the new log start offset.

        ``-1`` means the high watermark. Whole segments below the new log start are deleted by the
        next :meth:`maintain`.

        Raises:
            OffsetOutOfRangeError: ``offset`` is negative or above the high watermark.
        """
        self._check_open()
        if offset == DELETE_TO_HIGH_WATERMARK:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._high_watermark, "high watermark")
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._moved()
            self._epochs.truncate_from_start(offset)
        return self._log_start_offset

    @property
    def needs_tending(self) -> bool:
        """Whether a maintenance tick has work here though no periodic duty is due: deleted files to
        remove, writes or segment syncs to settle."""
        return bool(self._syncs or self._inflight) or self._cutting_back is not None or self._local.deleting

    def maintain(
        self, now_ms: int, *, retention: bool = True, flush: bool = True, expire_producers: bool = True
    ) -> MaintenanceResult:
        """Delayed file deletion, and retention, time-based flush and producer expiration when asked.

        Writes in flight are not waited for: they go to the active segment, which retention only
        deletes after a roll (and a roll waits for them). The log manager asks for each duty as
        Kafka's schedule has it due.
        """
        self._check_open()
        self._settle_landed()
        self._settle_syncs()
        result = MaintenanceResult()
        result.removed_files = self._remove_due_files(now_ms)

        if retention:
            self._retain(now_ms, result)
        if flush and now_ms - self._last_flush_ms >= self._config.flush_ms:
            if self._log_end_offset > self._recovery_point:
                self.flush(now_ms)
                result.flushed = True
            self._last_flush_ms = now_ms
        if expire_producers:
            result.expired_producers = self._producers.remove_expired(now_ms)
        result.log_start_offset = self._log_start_offset
        return result

    def _retain(self, now_ms: int, result: MaintenanceResult) -> None:
        """Delete the segments retention (time, size, the log start offset) has done with."""
        plan = plan_retention(
            [SegmentStats(s.base_offset, s.size, s.largest_timestamp) for s in self._local.segments],
            config=self._config,
            log_start_offset=self._log_start_offset,
            high_watermark=self._high_watermark,
            log_end_offset=self._log_end_offset,
            now_ms=now_ms,
        )
        if plan.deletions and not self.cleaning:
            if plan.roll_first:
                self.roll(now_ms)
                result.rolled = True
            self._delete_segments(plan.base_offsets, now_ms)
            result.deleted_segments = list(plan.deletions)
            result.removed_files += self._remove_due_files(now_ms)

    def _delete_segments(self, base_offsets: list[int], now_ms: int) -> None:
        self._structure_version += 1
        self._local.delete_segments(base_offsets, now_ms, self._config.file_delete_delay_ms)
        self._needs_tending_now()
        first = self._local.segments[0].base_offset
        if first > self._log_start_offset:
            self._log_start_offset = first
            self._moved()
            self._epochs.truncate_from_start(first)
        self._producers.delete_snapshots_before(first)

    def _remove_due_files(self, now_ms: int) -> list[Path]:
        """Remove (with a scheduler: have removed) the deleted segments' files that are due."""
        return self._local.remove_due_files(now_ms, self._scheduler)

    @_reports_write_failures
    def truncate_to(self, offset: int, now_ms: int) -> bool:
        """Remove every record at or above ``offset`` (Kafka's UnifiedLog.truncateTo); return whether the log changed.

        Batches are opaque, so the batch holding ``offset`` goes whole and :attr:`log_end_offset`
        becomes its base offset, which is below ``offset`` when ``offset`` was inside it (Kafka's
        targets, epoch end offsets and high watermarks, are batch boundaries, where the two agree).
        When ``offset`` is below the log start offset, or that batch began below it, nothing
        readable remains and the log restarts empty at the lower of the two
        (:meth:`truncate_fully_and_start_at`), as Kafka does. Epochs, producer state and the high
        watermark follow the new log end.

        Raises:
            ValueError: ``offset`` is negative.
        """
        self._check_open()
        self._drain()
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        self._structure_version += 1
        end = self._batch_boundary_at_or_below(offset)
        if offset < self._log_start_offset or end < self._log_start_offset:
            self.truncate_fully_and_start_at(min(offset, self._log_start_offset), now_ms)
            return True
        self._local.truncate_to(end)
        self._note_truncation()
        self._log_end_offset = self._next_offset = end
        self._recovery_point = min(self._recovery_point, end)
        self._high_watermark = min(self._high_watermark, end)
        self._moved()
        self._epochs.truncate_from_end(end)
        self._producers.delete_snapshots_after(end)
        start = self._producers.truncate_and_reload(self._log_start_offset, end, now_ms)
        rebuild_producer_state(self._producers, self._local.segments, start, end)
        logger.info("truncated log %s to offset %d (asked for %d)", self.directory, end, offset)
        return True

    def _note_truncation(self) -> None:
        self._truncations += 1
        base = self.active_segment.base_offset
        self.truncated_below = base if self.truncated_below is None else min(self.truncated_below, base)

    # --- compaction --------------------------------------------------------------------------

    def replace_segments(
        self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment], now_ms: int
    ) -> None:
        """Swap cleaned segments in for the ones they were cleaned from (Kafka's LocalLog.replaceSegments).

        Crash safety comes from the order of renames, as in Kafka: every new segment goes from
        ``.cleaned`` to ``.swap`` (a ``.log.swap`` is a finished segment that recovery completes
        the swap with), the old segments are renamed ``.deleted`` (removed after
        ``file.delete.delay.ms``), then the new ones lose their suffix. Readers never see a
        mix: the segment list changes in one step, on the caller's thread, between reads.

        Args:
            new_segments: cleaned segments, ``.cleaned`` files, flushed, in offset order; each
                replaces the old segments from its base offset to the next new one's.
            old_segments: the segments being replaced, all currently in the log and not active.
            now_ms: when the old files were scheduled for deletion.

        Raises:
            ValueError: the old segments are not consecutive closed segments of this log.
        """
        self._check_open()
        self._drain()
        where = self._local.replaced_range(new_segments, old_segments)
        self._structure_version += 1
        self._local.replace_segments(new_segments, old_segments, where, now_ms, self._config.file_delete_delay_ms)
        self._needs_tending_now()

    def _batch_boundary_at_or_below(self, offset: int) -> int:
        found = self._local.segments[self._local.floor_index(offset)].translate_offset(offset)
        return offset if found is None else min(found.header.base_offset, offset)

    @_reports_write_failures
    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (UnifiedLog.truncateFullyAndStartAt).

        For a follower that must start over: its fetch offset fell below the leader's log start,
        or its empty log's first fetched batch begins below its start. Log start, log end,
        recovery point and high watermark all become ``offset``; epochs and producer state are
        cleared.

        Raises:
            ValueError: ``offset`` is negative.
        """
        self._check_open()
        self._drain()
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset {offset}")
        self._structure_version += 1
        self._local.reset_at(offset, self._config, now_ms)
        self._log_start_offset = self._log_end_offset = self._recovery_point = self._high_watermark = offset
        self._moved()
        self._next_offset = offset
        self._note_truncation()
        self._epochs.clear()
        self._producers.truncate_fully(offset)
        self._producers.delete_snapshots_after(-1)
        logger.info("truncated log %s fully; it restarts at offset %d", self.directory, offset)

    # --- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, make sure a producer snapshot covers the log end, and release every file (clean shutdown)."""
        if self._closed:
            return
        self._drain()
        self._structure_version += 1
        # The active segment's max timestamp goes into its time index, as at a roll (Kafka's
        # LogSegment.close): a clean restart skips recovery and reads it back from there.
        self.active_segment.on_become_inactive()
        self.flush()
        self._producers.update_map_end_offset(self._log_end_offset)
        self._producers.take_snapshot_if_new(self._log_start_offset)
        self._local.close()
        self._remove_due_files(1 << 63)
        self._closed = True
        self._moved()

    def delete(self, *, remove: bool = True) -> Path | None:
        """Close without flushing and rename the partition dir away for removal; return its new name.

        As Kafka does, the dir is first renamed ``<name>.<uuid hex>-delete``: a crash midway
        leaves a name that loading removes rather than a half-deleted partition (and a rename the
        crash undid leaves a log of a topic that no longer exists, which the broker removes as a
        stray). With ``remove`` the renamed dir is removed on the scheduler's thread at once;
        otherwise the caller has :func:`remove_deleted_dir` do it when it is due.
        """
        self._drain()
        self._structure_version += 1
        self._local.close()
        self._closed = True
        self._moved()
        if not self.directory.exists():
            return None
        doomed = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(self.directory, doomed)
        if remove:
            run_soon(self._scheduler, partial(remove_deleted_dir, doomed))
        return doomed

    # --- helpers -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"log {self.directory} is closed")

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self.directory)!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, segments={len(self._local.segments)})"
        )


def remove_deleted_dir(doomed: Path) -> None:
    """Make a partition dir's rename durable, then remove the renamed dir with everything in it."""
    with contextlib.suppress(FileNotFoundError):
        fsync_dir(doomed.parent)
    shutil.rmtree(doomed, ignore_errors=True)
