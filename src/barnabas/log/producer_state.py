"""Idempotent producer state of one partition (Kafka's ProducerStateManager and friends).

Rules this module keeps:

- Only batches with a producer id (>= 0) are tracked. Per producer id we keep its epoch, the
  timestamp of its last batch and the metadata of its last five batches (NUM_BATCHES_TO_RETAIN,
  the client's max.in.flight.requests.per.connection limit for idempotence).
- :meth:`ProducerStateManager.check` is ProducerAppendInfo's validation for a client append, in
  Kafka's order: a batch matching one of the last five (same epoch, same first and last sequence)
  is a duplicate and is answered with the original offsets; an older epoch is fenced
  (INVALID_PRODUCER_EPOCH); a newer epoch must start at sequence 0; the same epoch must continue at
  last sequence + 1, wrapping after INT32_MAX. A producer we have no state for may start at any
  sequence (KIP-360: its state may have been removed by retention or expiration).
- :meth:`ProducerStateManager.update` records a batch once it is in the log; replaying the log on
  load uses it without validation, as Kafka's REPLICATION origin does.
- Snapshots are ``<offset>.snapshot`` files describing the state of every batch below ``offset``.
  The format is barnabas' own (see ``_SNAPSHOT_MAGIC``) and keeps all five batches per producer, so
  duplicates are still recognised after a restart. A CRC-32C covers the body; a snapshot that fails
  it is deleted and the state rebuilt from the log.
- Nothing here reads a clock: expiration takes ``now_ms``.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from barnabas.protocol import RecordBatchHeader

from .errors import CorruptSnapshotError, InvalidProducerEpochError, OutOfOrderSequenceError
from .files import SNAPSHOT_SUFFIX, offset_from_file_name, offset_path, write_atomically

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
]

logger = logging.getLogger(__name__)

#: Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = (1 << 31) - 1

_SNAPSHOT_MAGIC = b"BRNPS"  # not Kafka's layout, so Kafka's tools must not mistake it for theirs
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">5shI")  # magic, version, crc32c of everything after
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhqB")  # producer id, epoch, last timestamp, batch count
_BATCH = struct.Struct(">iqiq")  # last sequence, last offset, offset delta, timestamp


class BatchMetadata(NamedTuple):
    """What a producer's batch left in the log (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """The batch's base sequence, undoing the wrap at INT32_MAX."""
        if self.last_seq < 0:
            return self.last_seq
        return (self.last_seq - self.offset_delta) % (1 << 31)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer id's epoch and its last few batches."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The retained batch with this batch's epoch and sequence range, if any (findDuplicateBatch)."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        """Record a batch; a new epoch forgets the old epoch's batches (maybeUpdateProducerEpoch)."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    """The producers of one partition, their snapshots, and the offset the state covers."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0

    # --- state -------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The state reflects every batch below this offset."""
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The tracked producers by id (read-only by convention)."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def check(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """Validate a client's batch before it is appended.

        Returns:
            The original batch when ``header`` is a retry of one of the last five, else None.

        Raises:
            InvalidProducerEpochError: the epoch is older than the producer's current one.
            OutOfOrderSequenceError: the sequence does not continue the producer's last batch.
        """
        if not header.has_producer_id:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {header.producer_id} is older than its last epoch {entry.producer_epoch}"
            )
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} starts new epoch {epoch} at sequence {first_seq}, not 0"
                )
        elif entry.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} epoch {epoch}: sequence {first_seq} does not follow {entry.last_seq}"
            )
        return None

    def update(self, header: RecordBatchHeader) -> None:
        """Record a batch that is now in the log (its base offset is the assigned one)."""
        if header.has_producer_id:
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            entry.add_batch(
                header.producer_epoch,
                header.last_sequence,
                header.last_offset,
                header.last_offset_delta,
                header.max_timestamp,
            )
        self._map_end_offset = max(self._map_end_offset, header.next_offset)

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms``; return their ids."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired

    def truncate_fully(self, offset: int) -> None:
        """Forget everything: the state restarts empty at ``offset``."""
        self._producers.clear()
        self._map_end_offset = offset

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        offsets = []
        for path in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            offset = offset_from_file_name(path.name)
            if offset is not None:
                offsets.append(offset)
        return sorted(offsets)

    def take_snapshot(self, *, sync: bool = True) -> Path:
        """Write the state as ``<map_end_offset>.snapshot`` (replacing one at the same offset).

        With ``sync`` False the caller fsyncs the file and the directory later (Kafka's asyncFlush).
        """
        path = offset_path(self.directory, self._map_end_offset, SNAPSHOT_SUFFIX)
        write_atomically(path, _encode_snapshot(self._producers.values()), sync=sync)
        return path

    def take_snapshot_if_new(self, log_start_offset: int) -> Path | None:
        """Take a snapshot unless a load comes to this state without it; the file written, if any.

        As Kafka's takeSnapshot, none when one at the map end exists already, and none for an empty
        state over an empty log (a load replays nothing from the log start): a clean stop of 10,000
        idle partitions would otherwise write and sync 10,000 files that say nothing new.
        """
        if not self._producers and self._map_end_offset == log_start_offset:
            return None
        if offset_path(self.directory, self._map_end_offset, SNAPSHOT_SUFFIX).exists():
            return None
        return self.take_snapshot()

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots of offsets below ``offset`` (their segments are gone)."""
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                offset_path(self.directory, snapshot, SNAPSHOT_SUFFIX).unlink(missing_ok=True)

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots of offsets above ``offset`` (they describe data no longer in the log)."""
        for snapshot in self.snapshot_offsets():
            if snapshot > offset:
                offset_path(self.directory, snapshot, SNAPSHOT_SUFFIX).unlink(missing_ok=True)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Load the newest usable snapshot in [log start, log end]; return the offset it covers.

        Snapshots outside that range are deleted: above the log end they describe truncated
        data, below the log start they would miss batches that retention removed (Kafka's
        truncateAndReload). Corrupt snapshots are deleted too. Producers idle past the expiration
        are not loaded. With no usable snapshot the state is empty at ``log_start_offset``; the
        caller replays the log from the returned offset.
        """
        self._producers.clear()
        for snapshot in self.snapshot_offsets():
            if snapshot > log_end_offset or snapshot < log_start_offset:
                offset_path(self.directory, snapshot, SNAPSHOT_SUFFIX).unlink(missing_ok=True)
        for snapshot in reversed(self.snapshot_offsets()):
            path = offset_path(self.directory, snapshot, SNAPSHOT_SUFFIX)
            try:
                entries = _decode_snapshot(path.read_bytes(), path)
            except (CorruptSnapshotError, OSError) as exc:
                logger.warning("deleting unusable producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if now_ms - entry.last_timestamp < self.producer_id_expiration_ms:
                    self._producers[entry.producer_id] = entry
            self._map_end_offset = snapshot
            return snapshot
        self._map_end_offset = log_start_offset
        return log_start_offset


def _encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    items = list(entries)
    body += _COUNT.pack(len(items))
    for entry in items:
        body += _PRODUCER.pack(entry.producer_id, entry.producer_epoch, entry.last_timestamp, len(entry.batches))
        for batch in entry.batches:
            body += _BATCH.pack(batch.last_seq, batch.last_offset, batch.offset_delta, batch.timestamp)
    crc = crc32c.crc32c(bytes(body))
    return _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, _SNAPSHOT_VERSION, crc) + bytes(body)


def _decode_snapshot(data: bytes, path: Path) -> list[ProducerStateEntry]:
    if len(data) < _SNAPSHOT_HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot {path} is truncated")
    magic, version, crc = _SNAPSHOT_HEADER.unpack_from(data)
    if magic != _SNAPSHOT_MAGIC or version != _SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} has unknown magic {magic!r} or version {version}")
    body = memoryview(data)[_SNAPSHOT_HEADER.size :]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError(f"snapshot {path} fails its CRC-32C")
    try:
        (count,) = _COUNT.unpack_from(body)
        position = _COUNT.size
        entries = []
        for _ in range(count):
            pid, epoch, last_timestamp, batches = _PRODUCER.unpack_from(body, position)
            position += _PRODUCER.size
            entry = ProducerStateEntry(pid, epoch, last_timestamp)
            for _ in range(batches):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
                position += _BATCH.size
            entries.append(entry)
    except struct.error as exc:
        raise CorruptSnapshotError(f"snapshot {path} is truncated: {exc}") from exc
    if position != len(body):
        raise CorruptSnapshotError(f"snapshot {path} has {len(body) - position} trailing bytes")
    return entries
