"""Loading a partition dir into segments, producer state and epochs (Kafka's LogLoader).

Rules this module keeps:

- An interrupted cleaner swap is completed first, as Kafka's LogLoader does: a ``.log.swap`` is a
  whole cleaned segment (it was flushed before the rename), so every ``.log``/``.index``/
  ``.timeindex`` whose offset lies in the range the swap segments cover is a replaced original
  and is deleted, and the ``.swap`` files lose their suffix.
- Then leftovers of interrupted work go: ``*.deleted``, ``*.cleaned``, other ``*.swap`` and
  ``*.tmp`` files, and index files whose ``.log`` is gone.
- Segments below the recovery point were fsynced before it was recorded; they are opened with a
  sanity check of their indexes only, and a missing or corrupt index is rebuilt from the segment.
- After a crash, every segment that may hold data above the recovery point, and always the
  active (last) one, is recovered batch by batch: CRC-32C checked, cut after the last valid batch
  (a torn write, a zero-filled tail, a flipped bit), indexes rebuilt. Corruption in a segment that
  is not the last deletes every later segment, as Kafka does: the offsets after a hole cannot be
  trusted. Recovered segments are fsynced, so the recovery point afterwards is the log end offset.
- After a clean shutdown no segment is recovered (Kafka's LogLoader trusts the marker); only the
  active segment's batches from its last offset index entry on are checked the same way, which
  reads at most ``index.interval.bytes`` plus a batch.
- The leader epoch cache is truncated to the log (above the log end, below the log start); a
  missing or corrupt checkpoint for a non-empty log is rebuilt from the batch headers.
- Producer state is the newest usable snapshot plus a replay of the batch headers after it.
- Nothing here reads a clock: ``now_ms`` is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from barnabas.protocol import RecordBatchHeader

from .checkpoint import LEADER_EPOCH_CHECKPOINT, EpochEntry
from .config import LogConfig
from .errors import CorruptCheckpointError, CorruptIndexError
from .files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    fsync_dir,
    offset_from_file_name,
    offset_path,
)
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import LogSegment

__all__ = ["LoadedLog", "complete_interrupted_swaps", "load_log", "rebuild_producer_state", "remove_stray_files"]

logger = logging.getLogger(__name__)

#: Header scans during a producer-state replay read this much at once.
_REPLAY_CHUNK = 256 * 1024


class _Sizes(TypedDict):
    index_interval_bytes: int
    max_index_bytes: int


@dataclass
class LoadedLog:
    """Everything :func:`load_log` found and repaired in a partition dir."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    producer_state: ProducerStateManager
    leader_epochs: LeaderEpochCache
    recovered_segments: list[int] = field(default_factory=list)
    rebuilt_indexes: list[int] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    removed_files: list[Path] = field(default_factory=list)
    #: the partition dir did not exist: its entries are not durable yet (see PartitionLog.attach_scheduler)
    created: bool = False


def remove_stray_files(directory: Path) -> list[Path]:
    """Delete what interrupted deletions, compactions and atomic writes left behind; return it."""
    removed: list[Path] = []
    logs = {p.name.removesuffix(LOG_SUFFIX) for p in directory.glob("*" + LOG_SUFFIX)}
    for path in directory.iterdir():
        if not path.is_file():
            continue
        name = path.name
        stray = name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX))
        orphan_index = name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and name.split(".", 1)[0] not in logs
        if stray or orphan_index:
            logger.info("removing stray file %s", path)
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def complete_interrupted_swaps(directory: Path, config: LogConfig, now_ms: int) -> list[int]:
    """Finish cleaner swaps a crash interrupted; return the base offsets swapped in.

    Kafka's LogLoader: the swap segments cover [lowest base, highest next offset); every
    original segment file with an offset in that range was replaced and goes, then each
    ``.swap`` file is renamed to its final name.
    """
    swap_log_suffix = LOG_SUFFIX + SWAP_SUFFIX
    bases = sorted(
        base for path in directory.glob("*" + swap_log_suffix) if (base := offset_from_file_name(path.name)) is not None
    )
    if not bases:
        return []
    low, high = min(bases), -1
    for base in bases:
        segment = LogSegment.open_for_recovery(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            now_ms=now_ms,
            file_suffix=SWAP_SUFFIX,
        )
        try:
            high = max(high, segment.read_next_offset())
        finally:
            segment.close()
    for path in list(directory.iterdir()):
        offset = offset_from_file_name(path.name)
        replaced = path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX))
        if offset is not None and replaced and low <= offset < high:
            logger.info("deleting %s: a cleaned segment replaced it before a crash", path)
            path.unlink()
    for base in bases:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
            swap = offset_path(directory, base, suffix + SWAP_SUFFIX)
            if swap.exists():
                swap.replace(offset_path(directory, base, suffix))
        logger.info("completed the interrupted swap of cleaned segment %d in %s", base, directory)
    fsync_dir(directory)
    return bases


def rebuild_producer_state(
    producers: ProducerStateManager, segments: Sequence[LogSegment], start_offset: int, end_offset: int
) -> int:
    """Replay batch headers in [start_offset, end_offset) into ``producers``; return batches seen.

    A batch that straddles ``start_offset`` is replayed (its producer state is all or nothing).
    """
    replayed = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if following is not None and following <= start_offset:
            continue
        if segment.base_offset >= end_offset:
            break
        position = 0
        if segment.base_offset < start_offset:
            found = segment.translate_offset(start_offset)
            if found is None:
                continue
            position = found.position
        for found in segment.batches(position, chunk=_REPLAY_CHUNK):
            header = found.header
            if header.base_offset >= end_offset:
                break
            if not header.is_control:
                producers.update(header)
            replayed += 1
    producers.update_map_end_offset(end_offset)
    return replayed


def load_log(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    recovery_point: int | None = None,
    log_start_offset: int | None = None,
    *,
    clean_shutdown: bool = False,
) -> LoadedLog:
    """Open, check and repair every segment in ``directory`` (creating it if needed).

    Args:
        directory: the partition dir.
        config: index sizes and intervals for the segments, producer id expiration.
        now_ms: creation time for new segments, expiration reference for producers.
        recovery_point: everything below it is known flushed; None trusts every segment but the last.
        log_start_offset: the checkpointed log start offset, if any.
        clean_shutdown: the log dir's clean-shutdown marker was there, so every segment was closed
            whole: none is recovered (Kafka's LogLoader trusts such a log), but the last one's tail
            from its last offset index entry is still checked (:meth:`LogSegment.check_tail`).
    """
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    complete_interrupted_swaps(directory, config, now_ms)
    removed = remove_stray_files(directory)
    epochs, epochs_trusted = _load_epochs(directory)

    bases = sorted(
        base
        for path in directory.glob("*" + LOG_SUFFIX)
        if (base := offset_from_file_name(path.name)) is not None and path.name.endswith(LOG_SUFFIX)
    )
    sizes = _Sizes(index_interval_bytes=config.index_interval_bytes, max_index_bytes=config.segment_index_bytes)
    loaded = LoadedLog(
        segments=[],
        log_start_offset=0,
        log_end_offset=0,
        recovery_point=0,
        producer_state=ProducerStateManager(directory, config.producer_id_expiration_ms),
        leader_epochs=epochs,
        created=created,
        removed_files=removed,
    )

    def assign_epoch(header: RecordBatchHeader) -> None:
        latest = epochs.latest_epoch
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            epochs.assign(epoch, header.base_offset)

    to_recover: list[LogSegment] = []
    for i, base in enumerate(bases):
        following = bases[i + 1] if i + 1 < len(bases) else None
        unflushed = not clean_shutdown and (
            following is None or (recovery_point is not None and following > recovery_point)
        )
        if unflushed:
            segment = LogSegment.open_for_recovery(directory, base, **sizes, now_ms=now_ms)
            to_recover.append(segment)
        else:
            try:
                segment = LogSegment.open(directory, base, **sizes, now_ms=now_ms)
            except (FileNotFoundError, CorruptIndexError) as exc:
                logger.warning("rebuilding the indexes of segment %d in %s: %s", base, directory, exc)
                segment = LogSegment.open_for_recovery(directory, base, **sizes, now_ms=now_ms)
                loaded.truncated_bytes += segment.recover(assign_epoch)
                segment.flush()
                loaded.rebuilt_indexes.append(base)
            else:
                if clean_shutdown and following is None and (truncated := segment.check_tail(assign_epoch)):
                    segment.flush()
                    loaded.truncated_bytes += truncated
        loaded.segments.append(segment)

    for segment in to_recover:
        if segment not in loaded.segments:
            segment.close()  # deleted below because an earlier segment was corrupt
            continue
        truncated = segment.recover(assign_epoch)
        segment.flush()
        loaded.recovered_segments.append(segment.base_offset)
        loaded.truncated_bytes += truncated
        position = loaded.segments.index(segment)
        if truncated and position + 1 < len(loaded.segments):
            for later in loaded.segments[position + 1 :]:
                logger.warning("deleting segment %d of %s: it follows a corrupt segment", later.base_offset, directory)
                later.delete()
                loaded.deleted_segments.append(later.base_offset)
            del loaded.segments[position + 1 :]

    start_checkpoint = log_start_offset if log_start_offset is not None else 0
    segment_created = not loaded.segments
    if segment_created:
        loaded.segments.append(LogSegment.create(directory, start_checkpoint, **sizes, now_ms=now_ms))
    log_end_offset = loaded.segments[-1].read_next_offset()
    if log_end_offset < start_checkpoint:
        # The log lost data the checkpoint says was there (Kafka's LogLoader does the same).
        logger.warning(
            "log end offset %d of %s is below its log start offset %d: deleting all segments",
            log_end_offset,
            directory,
            start_checkpoint,
        )
        for segment in loaded.segments:
            segment.delete()
            loaded.deleted_segments.append(segment.base_offset)
        loaded.segments = [LogSegment.create(directory, start_checkpoint, **sizes, now_ms=now_ms)]
        segment_created = True
        log_end_offset = start_checkpoint
        epochs.clear()
    files_changed = segment_created or any(
        (loaded.removed_files, loaded.deleted_segments, loaded.recovered_segments, loaded.rebuilt_indexes)
    )
    # A new dir's entries are synced with it, off the event loop (PartitionLog.attach_scheduler); a dir
    # this load changed nothing in (every clean restart) needs no sync: 10,000 fsyncs less at start.
    if files_changed and not created:
        fsync_dir(directory)

    loaded.log_end_offset = log_end_offset
    loaded.log_start_offset = max(start_checkpoint, loaded.segments[0].base_offset)
    loaded.recovery_point = log_end_offset

    if not epochs_trusted and log_end_offset > loaded.log_start_offset:
        _rebuild_epochs(epochs, loaded.segments)
    # Cuts derived from the log itself: a crash that loses them has the next load make them again
    # (an empty log restarted cuts its one entry at offset 0: two fsyncs per partition at every start).
    epochs.truncate_from_end(log_end_offset, sync=False)
    epochs.truncate_from_start(loaded.log_start_offset, sync=False)
    if not epochs.path.exists():
        # Only an empty log gets here (a rebuild writes the file). Its empty checkpoint need not be
        # durable: lost or torn, it reads as untrusted and an empty log rebuilds nothing; a first
        # epoch's checkpoint is synced before the recovery point passes a record of it.
        epochs.flush(sync=False)

    producers = loaded.producer_state
    replay_from = producers.truncate_and_reload(loaded.log_start_offset, log_end_offset, now_ms)
    if replay_from < log_end_offset:
        replayed = rebuild_producer_state(producers, loaded.segments, replay_from, log_end_offset)
        logger.info("rebuilt producer state of %s from %d batch headers", directory, replayed)
        producers.take_snapshot()
    producers.update_map_end_offset(log_end_offset)
    return loaded


def _load_epochs(directory: Path) -> tuple[LeaderEpochCache, bool]:
    if not (directory / LEADER_EPOCH_CHECKPOINT).exists():
        return LeaderEpochCache(directory), False
    try:
        return LeaderEpochCache.load(directory), True
    except (CorruptCheckpointError, ValueError) as exc:
        logger.warning("ignoring the leader epoch checkpoint of %s: %s", directory, exc)
        return LeaderEpochCache(directory), False


def _rebuild_epochs(epochs: LeaderEpochCache, segments: Sequence[LogSegment]) -> None:
    entries: list[EpochEntry] = []
    for segment in segments:
        for found in segment.batches(chunk=_REPLAY_CHUNK):
            epoch = found.header.partition_leader_epoch
            if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
                entries.append(EpochEntry(epoch, found.header.base_offset))
    epochs.clear()
    for entry in entries:
        epochs.assign(entry.epoch, entry.start_offset)
