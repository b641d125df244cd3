"""A partition's leader epoch history (Kafka's LeaderEpochFileCache).

Rules this module keeps:

- Entries are (epoch, start offset): the first offset written under each leader epoch. Both
  columns strictly increase; an assignment that would break this removes the conflicting tail
  first (maybeTruncateNonMonotonicEntries), as Kafka does.
- :meth:`LeaderEpochCache.assign` changes nothing when the epoch is already the latest one (unless
  it starts earlier), so the append path may call it for every batch.
- Every change is written to ``leader-epoch-checkpoint`` in the partition dir at once, durably
  unless the caller says the log will sync it (``sync=False``: a new leader epoch, a leader's or a
  follower's, whose file the log syncs before its recovery point passes it; the cuts a load derives
  from the log itself, which the next load makes again). A missing entry below the recovery point
  would make OffsetForLeaderEpoch answer wrongly; above it, recovery assigns the records' epochs again.
- :meth:`LeaderEpochCache.end_offset_for` answers OffsetForLeaderEpoch exactly as
  LeaderEpochFileCache.endOffsetFor, UNDEFINED (-1, -1) included.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from pathlib import Path

from .checkpoint import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochCheckpointFile

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochCache"]

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Epoch -> start offset, persisted in the partition's ``leader-epoch-checkpoint``."""

    def __init__(self, directory: Path, entries: list[EpochEntry] | None = None) -> None:
        self._checkpoint = LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT)
        self._entries: list[EpochEntry] = []
        for entry in entries or []:
            self._assign(entry)
        #: The lowest start offset of an entry written but not yet durable (:meth:`assign` with ``sync``
        #: False), or None: the file must be synced before the log's recovery point passes it.
        self._unsynced_from: int | None = None

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """The cache as checkpointed in ``directory`` (empty when there is no checkpoint).

        Raises:
            CorruptCheckpointError: the checkpoint is malformed.
        """
        return cls(directory, LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT).read())

    @property
    def path(self) -> Path:
        return self._checkpoint.path

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, sync: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; return whether the cache changed.

        With ``sync`` False the checkpoint is written but not fsynced: the log syncs it (:meth:`sync`)
        before its recovery point passes ``start_offset``. Records above the recovery point are
        recovered after a crash, assigning their epochs again, so nothing is lost meanwhile.

        Raises:
            ValueError: a negative epoch or offset.
        """
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self.flush(sync=sync)
            if not sync:
                pending = self._unsynced_from
                self._unsynced_from = start_offset if pending is None else min(pending, start_offset)
        return changed

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch under which ``offset`` was written, if the cache knows (epochForOffset)."""
        slot = bisect_right([e.start_offset for e in self._entries], offset) - 1
        return self._entries[slot].epoch if slot >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch.

        - UNDEFINED_EPOCH, or an epoch above every known one -> (-1, -1).
        - The latest epoch -> (it, the log end offset): it is still being written.
        - An older epoch -> (largest known epoch <= it, start offset of the next larger epoch).
        - An epoch below the first known one -> (the requested epoch, the first entry's start).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested_epoch, self._entries[higher].start_offset
        return self._entries[floor].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int, *, sync: bool = True) -> None:
        """Remove entries starting at or after ``end_offset`` (the log was cut there).

        ``sync`` False: as Kafka's LogLoader (truncateFromEndAsyncFlush), a load that derives the cut
        from the log itself need not wait for it; lost in a crash, the next load cuts again.
        """
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        keep = bisect_left([e.start_offset for e in self._entries], end_offset)
        del self._entries[keep:]
        self.flush(sync=sync)

    def truncate_from_start(self, start_offset: int, *, sync: bool = True) -> None:
        """Drop entries wholly below ``start_offset``; the newest of them then starts at it.

        Exclusive as in Kafka: ``truncate_from_start(6)`` keeps an entry that starts at 6.
        ``sync`` as for :meth:`truncate_from_end`.
        """
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
            return
        del self._entries[: len(removed)]
        self._entries.insert(0, EpochEntry(removed[-1].epoch, start_offset))
        self.flush(sync=sync)

    def clear(self) -> None:
        """Forget every entry (before a rebuild from the log)."""
        self._entries.clear()
        self.flush()

    def flush(self, *, sync: bool = True) -> None:
        """Write the checkpoint, durably unless ``sync`` is False."""
        self._checkpoint.write(self._entries, sync=sync)
        if sync:
            self._unsynced_from = None

    @property
    def unsynced(self) -> bool:
        """The checkpoint file holds an entry that is not durable yet."""
        return self._unsynced_from is not None

    def sync_below(self, recovery_point: int) -> None:
        """Make the checkpoint durable before the recovery point moves to ``recovery_point``, if it must.

        Only an entry starting below it must be: an entry at or above it has no record at or below
        the recovery point (an empty log led is an entry at offset 0 with the recovery point at 0), and
        recovery assigns the epochs of the records above it again.
        """
        if self._unsynced_from is not None and self._unsynced_from < recovery_point:
            self.flush()

    def handed_to_sync(self) -> None:
        """A background job now syncs the file (a rolled segment's sync, :meth:`PartitionLog.roll`)."""
        self._unsynced_from = None

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self.latest_entry
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return False
        removed = []
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            logger.warning("new epoch entry %s truncated conflicting entries %s", entry, removed)
        self._entries.append(entry)
        return True
