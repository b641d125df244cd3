"""One segment of a partition's log: ``<base>.log`` plus its offset and time indexes (LogSegment).

Rules this module keeps:

- Batches are opaque bytes. Only 61-byte v2 headers are parsed (``barnabas.protocol``); nothing
  is decompressed. Recovery checks each batch's CRC-32C with ``validate_batch``.
- The ``.log`` file is an unbuffered descriptor opened with O_APPEND, held within the process's
  budget of segment descriptors (:mod:`.segment_file`: an idle one is closed and reopened on use).
  A batch is appended with ``os.write`` (one call unless the kernel writes short) and the
  segment's readable size moves only once every byte is written; a failed write is cut back off
  the file. Reads use ``os.pread`` and never look past the readable size, so a reader never sees
  half a batch.
- A batch may also be written in three steps so the ``os.write`` can run on another thread
  (:mod:`.append_writer`): :meth:`LogSegment.reserve` claims the bytes after every earlier
  reservation, :meth:`LogSegment.write_reserved` (any thread, in reservation order) writes them,
  and :meth:`LogSegment.complete_reserved` (the owner's thread, in order) makes them readable and
  indexes them. Rolling decisions count reserved bytes; readers only ever see completed ones.
- The indexes follow Kafka's LogSegment.append: once more than ``index.interval.bytes`` were
  written since the last entry, the next batch gets an offset index entry (its last offset and its
  position) and the time index gets the largest timestamp seen so far if it grew.
- Time-based rolling follows LogSegment.shouldRoll: the clock starts at the first batch's
  maxTimestamp when there is one, else at the segment's creation time (``now_ms`` passed in).
- The segment knows nothing of producers or epochs; recovery reports each valid header to a
  callback instead.
- A segment the cleaner writes is created with a file suffix (``.cleaned``) on all three files and
  renamed through ``.swap`` to its final names (LogSegment.changeFileSuffixes); recovery accepts
  batches with gaps between them and batches that compaction emptied.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from barnabas.protocol import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchHeader,
    parse_batch_header,
    validate_batch,
)

from .files import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, offset_path
from .offset_index import OffsetIndex
from .segment_file import SegmentFile
from .time_index import NO_TIMESTAMP, TimeIndex

__all__ = ["BatchPosition", "LogSegment"]

logger = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
#: Bytes read at once when walking headers: a few index intervals, so one pread usually suffices.
_SCAN_CHUNK = 16 * 1024
#: Bytes read at once when recovery checks CRCs.
_RECOVERY_CHUNK = 4 * 1024 * 1024

OnBatch = Callable[[RecordBatchHeader], None]


class BatchPosition(NamedTuple):
    """A batch's header and the byte position where it starts in its segment."""

    position: int
    header: RecordBatchHeader


class LogSegment:
    """A ``.log`` file of whole batches with a base offset, and the indexes over it."""

    def __init__(
        self,
        *,
        directory: Path,
        base_offset: int,
        fd: int,
        size: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        index_interval_bytes: int,
        created_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.directory = directory
        self.offset_index = offset_index
        self.time_index = time_index
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        #: The ``.log`` file; its descriptor is given back while idle (the process's budget).
        self._file = SegmentFile(offset_path(directory, base_offset, LOG_SUFFIX + file_suffix), fd)
        self._size = size
        #: Where the next reserved batch goes: ``_size`` plus the bytes reserved and not completed.
        self._end = size
        #: Bumped whenever readable bytes are cut off, so a FileSlice taken before can tell.
        self._generation = 0
        #: Written or cut since its last fsync (set after each change: a flush that clears it first misses none).
        self._unsynced = False
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        last = time_index.last_entry
        self._max_timestamp = last.timestamp
        self._offset_of_max_timestamp = last.offset

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """A new empty segment; fails if a ``.log`` (plus ``file_suffix``) for this base offset already exists."""
        path = offset_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            offset_index = OffsetIndex.create(
                offset_path(directory, base_offset, INDEX_SUFFIX + file_suffix), base_offset, max_index_bytes
            )
            time_index = TimeIndex.create(
                offset_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix), base_offset, max_index_bytes
            )
        except BaseException:
            os.close(fd)
            raise
        return cls(
            directory=directory,
            base_offset=base_offset,
            fd=fd,
            size=0,
            offset_index=offset_index,
            time_index=time_index,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
            file_suffix=file_suffix,
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
    ) -> LogSegment:
        """Open an existing segment and load its indexes.

        Raises:
            FileNotFoundError: an index file is missing (the caller rebuilds via :meth:`recover`).
            CorruptIndexError: an index fails its sanity check (likewise).
        """
        path = offset_path(directory, base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            offset_index = OffsetIndex.load(
                offset_path(directory, base_offset, INDEX_SUFFIX), base_offset, max_index_bytes, size
            )
            time_index = TimeIndex.load(
                offset_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset, max_index_bytes
            )
        except BaseException:
            os.close(fd)
            raise
        return cls(
            directory=directory,
            base_offset=base_offset,
            fd=fd,
            size=size,
            offset_index=offset_index,
            time_index=time_index,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
        )

    @classmethod
    def open_for_recovery(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open an existing segment without reading its indexes; call :meth:`recover` next."""
        path = offset_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        size = os.fstat(fd).st_size
        offset_index = OffsetIndex(
            offset_path(directory, base_offset, INDEX_SUFFIX + file_suffix), base_offset, max_index_bytes
        )
        time_index = TimeIndex(
            offset_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix), base_offset, max_index_bytes
        )
        return cls(
            directory=directory,
            base_offset=base_offset,
            fd=fd,
            size=size,
            offset_index=offset_index,
            time_index=time_index,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
            file_suffix=file_suffix,
        )

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def size(self) -> int:
        """Readable bytes: whole batches only."""
        return self._size

    @property
    def generation(self) -> int:
        """How many times readable bytes were cut off the end (truncation, recovery)."""
        return self._generation

    @property
    def closed(self) -> bool:
        return self._file.closed

    def dup_fd(self) -> int:
        """A new descriptor of the ``.log`` file that stays valid after this segment closes; the caller closes it."""
        with self._file.use() as fd:
            return os.dup(fd)

    def reading_fd(self) -> int:
        """A new descriptor of the ``.log`` file for reading, also once closed (at its ``.deleted`` name)."""
        return self._file.reading_fd()

    @property
    def max_timestamp(self) -> int:
        """The largest batch maxTimestamp in the segment, or NO_TIMESTAMP (-1)."""
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """The last offset of the batch that first reached :attr:`max_timestamp`."""
        return self._offset_of_max_timestamp

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self.path).st_mtime_ns // 1_000_000

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the file's mtime (Kafka's rule)."""
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return self.last_modified_ms

    def flush(self) -> None:
        """fsync the log and both indexes, each only if written since its last fsync.

        A clean stop flushes every log's active segment: for 10,000 idle partitions, 10,000 fsyncs
        that had nothing to write.
        """
        self._check_open()
        if self._unsynced:
            self._unsynced = False
            try:
                with self._file.use() as fd:  # a descriptor given back meanwhile is opened again to sync
                    os.fsync(fd)
            except BaseException:
                self._unsynced = True
                raise
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """Release the descriptors; further reads or appends are errors."""
        self._file.close()
        self.offset_index.close()
        self.time_index.close()

    def delete(self) -> None:
        """Close and remove the segment's files."""
        self.close()
        self._file.unlink()
        self.offset_index.delete()
        self.time_index.delete()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the indexes, then the ``.log``, from ``old_suffix`` to ``new_suffix`` (changeFileSuffixes).

        The ``.log`` goes last: recovery treats a ``.log.swap`` as the commit of a cleaned
        segment, so its indexes must already carry the suffix. Descriptors stay valid across a
        rename; the caller fsyncs the directory.
        """
        for index in (self.offset_index, self.time_index):
            name = index.path.name
            if old_suffix and not name.endswith(old_suffix):
                raise ValueError(f"{index.path} does not end with {old_suffix!r}")
            index.rename(index.path.with_name(name[: len(name) - len(old_suffix)] + new_suffix))
        name = self.path.name
        if old_suffix and not name.endswith(old_suffix):
            raise ValueError(f"{self.path} does not end with {old_suffix!r}")
        self._file.rename(self.path.with_name(name[: len(name) - len(old_suffix)] + new_suffix))

    def set_last_modified(self, ms: int) -> None:
        """Give the ``.log`` file this modification time (a cleaned segment keeps its source's)."""
        os.utime(self.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def mark_deleted(self) -> list[Path]:
        """Close and rename every file to ``*.deleted`` (Kafka's delayed delete); return the new paths."""
        self.close()
        renamed: list[Path] = []
        new_log = self.path.with_name(self.path.name + DELETED_SUFFIX)
        if self.path.exists():
            self._file.rename(new_log)  # a slice of it still reads it there (FileSlice)
            renamed.append(new_log)
        else:
            self._file.path = new_log
        for index in (self.offset_index, self.time_index):
            target = index.path.with_name(index.path.name + DELETED_SUFFIX)
            existed = index.path.exists()
            index.rename(target)
            if existed:
                renamed.append(target)
        return renamed

    # --- appending ---------------------------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the indexes' int32 relative offsets."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def rolling_based_timestamp(self) -> int | None:
        """The first batch's maxTimestamp, which starts the segment.ms clock (loaded lazily)."""
        if self._rolling_based_timestamp is None and self._size >= BATCH_HEADER_SIZE:
            self._rolling_based_timestamp = self.read_header(0).max_timestamp
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long this segment has been open for segment.ms purposes (LogSegment.timeWaitedForRoll)."""
        first = self.rolling_based_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        batch_size: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Whether the next batch must go to a new segment (LogSegment.shouldRoll, no jitter)."""
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp) > segment_ms
        return (
            self._end > segment_bytes - batch_size
            or (self._end > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.can_convert_to_relative_offset(last_offset)
        )

    def append(self, batch: bytes | bytearray | memoryview, header: RecordBatchHeader) -> int:
        """Append one whole batch whose (already patched) header is ``header``; return its position.

        Raises:
            ValueError: the batch's offsets do not fit this segment's relative offsets.
            OSError: the write failed; the file and indexes are cut back to where they were.
        """
        if not self.can_convert_to_relative_offset(header.last_offset):
            raise ValueError(f"offset {header.last_offset} overflows segment {self.path}")
        if self._end != self._size:
            raise ValueError(f"segment {self.path} has reserved batches in flight")
        position = self._size
        view = memoryview(batch)[: header.size]
        try:
            with self._file.use() as fd:
                _write_whole(fd, view, position)
        finally:
            self._unsynced = True
        saved = self._index_stats()
        self._size = self._end = position + len(view)
        if position == 0:
            self._rolling_based_timestamp = header.max_timestamp
        try:
            self._after_batch(position, header, len(view))
        except BaseException:
            # An index write failed: take the batch back out so the log never holds data
            # beyond the offsets its owner handed out.
            with self._file.use() as fd:
                os.ftruncate(fd, position)
            self._unsynced = True
            self._size = self._end = position
            self._undo_index(header.base_offset, saved)
            raise
        return position

    def reserve(self, header: RecordBatchHeader) -> int:
        """Claim the bytes for the batch ``header`` describes after every earlier reservation; return its position.

        Raises:
            ValueError: the batch's offsets do not fit this segment's relative offsets.
        """
        if not self.can_convert_to_relative_offset(header.last_offset):
            raise ValueError(f"offset {header.last_offset} overflows segment {self.path}")
        self._check_open()
        position = self._end
        self._end += header.size
        return position

    def write_reserved(self, batch: bytes | bytearray | memoryview, position: int) -> None:
        """Write a reserved batch (any thread; reservations of one segment strictly in order).

        The descriptor is O_APPEND, so the bytes land at the file's end, which is ``position``
        while every earlier reservation was written whole.

        Raises:
            OSError: the write failed; the file is cut back to ``position``.
        """
        try:
            with self._file.use() as fd:
                _write_whole(fd, memoryview(batch), position)
        finally:
            self._unsynced = True

    def complete_reserved(self, position: int, header: RecordBatchHeader) -> None:
        """Make a written reservation readable and index it (the owner's thread, in reservation order)."""
        if position != self._size:
            raise ValueError(f"segment {self.path}: completing byte {position}, but {self._size} is readable")
        saved = self._index_stats()
        try:
            self._after_batch(position, header, header.size)
        except BaseException:
            # An index write failed: the batch stays unreadable and unindexed.
            self._undo_index(header.base_offset, saved)
            raise
        self._size = position + header.size
        if position == 0:
            self._rolling_based_timestamp = header.max_timestamp

    def _index_stats(self) -> tuple[int, int, int, int | None]:
        """What indexing a batch changes besides the index files, to put back if indexing fails."""
        return (
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._bytes_since_last_index_entry,
            self._rolling_based_timestamp,
        )

    def _undo_index(self, base_offset: int, saved: tuple[int, int, int, int | None]) -> None:
        """Take a batch whose indexing failed back out of the indexes and the saved statistics."""
        self.offset_index.truncate_to(base_offset)
        self.time_index.truncate_to(base_offset)
        (
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._bytes_since_last_index_entry,
            self._rolling_based_timestamp,
        ) = saved

    def cancel_reservations(self) -> None:
        """Forget reservations that will never complete and cut the file back to the readable end.

        Only once no write of them can still be running.
        """
        if self._end != self._size and not self._file.closed:
            with self._file.use() as fd:
                os.ftruncate(fd, self._size)
            self._unsynced = True
            self._generation += 1
        self._end = self._size

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index, as Kafka does before a roll."""
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)

    def _after_batch(self, position: int, header: RecordBatchHeader, size: int) -> None:
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(header.last_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    # --- reading -----------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position``, never past the readable end."""
        self._check_open()
        end = min(self._size, position + size)
        if end <= position:
            return b""
        with self._file.use() as fd:
            data = os.pread(fd, end - position, position)
            while len(data) < end - position:  # pread is only short at EOF; be safe anyway
                more = os.pread(fd, end - position - len(data), position + len(data))
                if not more:
                    break
                data += more
        return data

    def read_header(self, position: int) -> RecordBatchHeader:
        """The header of the batch at ``position``."""
        return parse_batch_header(self.read(position, BATCH_HEADER_SIZE))

    def batches(self, start_position: int = 0, chunk: int = _SCAN_CHUNK) -> Iterator[BatchPosition]:
        """Walk batch headers from ``start_position`` to the readable end, reading ``chunk`` bytes at a time.

        Stops at the first header that does not describe a whole batch inside the segment; no CRCs
        are checked (recovery does that).
        """
        end = self._size
        position = start_position
        buffer = b""
        buffer_start = position
        while end - position >= BATCH_HEADER_SIZE:
            offset = position - buffer_start
            if len(buffer) - offset < BATCH_HEADER_SIZE:
                buffer = self.read(position, max(chunk, BATCH_HEADER_SIZE))
                buffer_start, offset = position, 0
            header = parse_batch_header(buffer, offset)
            if header.batch_length < _MIN_BATCH_LENGTH or position + header.size > end:
                return
            yield BatchPosition(position, header)
            position += header.size

    def whole_batches_end(self, start: int, first: RecordBatchHeader, stop: int, limit: int) -> tuple[int, int]:
        """Where the whole batches from ``start`` end that stay within byte ``stop`` and below offset ``limit``.

        ``first`` is the header of the batch at ``start``, which the caller has accepted. The
        offset index jumps close to the end (its positions are batch starts, and the batches
        before an entry hold lower offsets); headers are read from there on.

        Returns:
            (end position, the offset after the batches up to it).
        """
        stop = min(stop, self._size)
        end, next_offset = start + first.size, first.next_offset
        by_position = self.offset_index.lookup_position(stop)
        by_offset = self.offset_index.lookup(limit - 1)
        if by_position is not None and by_offset.offset < limit:
            jump = min(by_position.position, by_offset.position)
            if jump > end:
                end, next_offset = jump, self.read_header(jump).base_offset
        for found in self.batches(end):
            header = found.header
            if found.position + header.size > stop or header.last_offset >= limit:
                break
            end, next_offset = found.position + header.size, header.next_offset
        return end, next_offset

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``: the one holding it, or the next one.

        None when ``offset`` is past the segment's last batch.
        """
        start = max(self.offset_index.lookup(offset).position, start_position)
        for found in self.batches(start):
            if found.header.last_offset >= offset:
                return found
        return None

    def find_batch_by_timestamp(self, timestamp: int, starting_offset: int) -> BatchPosition | None:
        """The first batch at or after ``starting_offset`` with maxTimestamp >= ``timestamp``.

        Kafka's LogSegment.findOffsetByTimestamp at batch granularity: the time index narrows the
        scan, the batch headers decide.
        """
        indexed = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(indexed.offset, starting_offset)).position
        for found in self.batches(start):
            if found.header.max_timestamp >= timestamp and found.header.last_offset >= starting_offset:
                return found
        return None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (Kafka's readNextOffset)."""
        next_offset = self.base_offset
        for found in self.batches(self.offset_index.lookup(1 << 62).position):
            next_offset = found.header.next_offset
        return next_offset

    # --- repair ------------------------------------------------------------------------------

    def recover(self, on_batch: OnBatch | None = None) -> int:
        """Validate every batch, cut the file after the last valid one and rebuild both indexes.

        Kafka's LogSegment.recover: a batch is valid when its header is whole, its CRC-32C and
        record count check out and its offsets follow the previous batch's and fit this segment.
        ``on_batch`` sees each valid header in order (for the leader epoch cache).

        Returns:
            The number of bytes truncated.
        """
        with self._file.use() as fd:
            return self._recover(fd, on_batch)

    def _recover(self, fd: int, on_batch: OnBatch | None) -> int:
        file_size = os.fstat(fd).st_size
        self._generation += 1
        self._unsynced = True  # what a crashed process wrote may be in the page cache only
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._size = 0
        valid = 0
        for position, header in self._valid_batches(fd, 0, file_size, self.base_offset):
            self._size = position + header.size
            if position == 0:
                self._rolling_based_timestamp = header.max_timestamp
            self._after_batch(position, header, header.size)
            if on_batch is not None:
                on_batch(header)
            valid = position + header.size
        self._cut_invalid_tail(fd, valid, file_size)
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        return file_size - valid

    def check_tail(self, on_batch: OnBatch | None = None) -> int:
        """Validate the batches from the last offset index entry on; cut off what is invalid.

        What a clean shutdown still gets checked (Kafka trusts such a log whole): a segment opened
        with its indexes, whose last index entry is at most ``index.interval.bytes`` plus one batch
        from the end, so a torn or flipped tail costs a short read to find. When the batch at the
        last entry is itself invalid, the whole segment is recovered instead.

        Returns:
            The number of bytes truncated.
        """
        with self._file.use() as fd:
            return self._check_tail(fd, on_batch)

    def _check_tail(self, fd: int, on_batch: OnBatch | None) -> int:
        file_size = os.fstat(fd).st_size
        start = self.offset_index.lookup(1 << 62).position
        valid, next_offset = start, self.base_offset
        checked: list[RecordBatchHeader] = []
        for position, header in self._valid_batches(fd, start, file_size, self.base_offset):
            if on_batch is not None:
                on_batch(header)
            checked.append(header)
            valid, next_offset = position + header.size, header.next_offset
        if not checked and 0 < start < file_size:
            return self._recover(fd, on_batch)
        if valid < file_size:
            self._generation += 1
            self.offset_index.truncate_to(next_offset)
            self.time_index.truncate_to(next_offset)
            self._cut_invalid_tail(fd, valid, file_size)
        # The time index's last entry covers every batch up to the last offset index entry's
        # (both are written together); the batches checked cover the rest.
        last = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        for header in checked:
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, header.last_offset
        self._size = self._end = valid
        self._bytes_since_last_index_entry = valid - start
        return file_size - valid

    def _valid_batches(
        self, fd: int, start: int, file_size: int, next_expected: int
    ) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of each valid batch from ``start``, up to the first invalid one (logged)."""
        valid = start
        buffer = b""
        buffer_start = start
        while file_size - valid >= BATCH_HEADER_SIZE:
            offset = valid - buffer_start
            if len(buffer) - offset < BATCH_HEADER_SIZE:
                buffer = os.pread(fd, min(_RECOVERY_CHUNK, file_size - valid), valid)
                buffer_start, offset = valid, 0
            header = parse_batch_header(buffer, offset)
            if header.batch_length < _MIN_BATCH_LENGTH or valid + header.size > file_size:
                logger.warning("segment %s: incomplete batch at byte %d", self.path, valid)
                return
            if offset + header.size > len(buffer):
                buffer = os.pread(fd, max(header.size, min(_RECOVERY_CHUNK, file_size - valid)), valid)
                buffer_start, offset = valid, 0
            try:
                validate_batch(buffer, offset, from_client=False)
            except (CorruptRecordError, InvalidRecordError) as exc:
                logger.warning("segment %s: invalid batch at byte %d: %s", self.path, valid, exc)
                return
            if header.base_offset < next_expected or not self.can_convert_to_relative_offset(header.last_offset):
                logger.warning(
                    "segment %s: batch at byte %d has offset %d, expected at least %d",
                    self.path,
                    valid,
                    header.base_offset,
                    next_expected,
                )
                return
            yield valid, header
            valid += header.size
            next_expected = header.next_offset
        if valid < file_size:
            logger.warning("segment %s: %d bytes after the last batch", self.path, file_size - valid)

    def _cut_invalid_tail(self, fd: int, valid: int, file_size: int) -> None:
        if valid < file_size:
            os.ftruncate(fd, valid)
            self._unsynced = True
            logger.warning("segment %s: truncated %d invalid bytes during recovery", self.path, file_size - valid)
        self._size = self._end = valid

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after it; return the bytes removed.

        Kafka's LogSegment.truncateTo: ``offset`` is expected at a batch boundary.
        """
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        if found is None:
            return 0
        removed = self._size - found.position
        with self._file.use() as fd:
            os.ftruncate(fd, found.position)
        self._unsynced = True
        self._size = self._end = found.position
        self._generation += 1
        self._bytes_since_last_index_entry = 0
        if self._size == 0:
            self._rolling_based_timestamp = None
        self._reload_max_timestamp()
        return removed

    def _reload_max_timestamp(self) -> None:
        # Kafka's loadLargestTimestamp: the last time index entry covers everything before its
        # batch; scan the batches after it for anything larger.
        last = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        for found in self.batches(self.offset_index.lookup(last.offset).position):
            if found.header.max_timestamp > self._max_timestamp:
                self._max_timestamp = found.header.max_timestamp
                self._offset_of_max_timestamp = found.header.last_offset

    def _check_open(self) -> None:
        if self._file.closed:
            raise ValueError(f"segment {self.path} is closed")

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={str(self.path)!r})"


def _write_whole(fd: int, view: memoryview, position: int) -> None:
    """Write all of ``view`` to the O_APPEND ``fd``; on failure cut the file back to ``position`` and raise."""
    written = 0
    try:
        while written < len(view):
            written += os.write(fd, view[written:])
    except BaseException:
        os.ftruncate(fd, position)
        raise
