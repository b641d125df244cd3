"""Exceptions raised by the log, each carrying the Kafka error code the broker answers with.

Rules this module keeps (STYLE.md §2: exceptions for broken contracts, codes as values):

- One root, :class:`LogError`. Every leaf sets ``error_code``; the broker copies it into the
  partition's response and never needs a mapping table of its own.
- A bad batch is the codec's business: ``CorruptRecordError`` and ``InvalidRecordError`` come from
  ``barnabas.protocol`` and are re-exported here, not re-declared.
- OSError from the file system is not wrapped: the broker maps it to KAFKA_STORAGE_ERROR and takes
  the log dir offline, as Kafka's LogDirFailureChannel does.
"""

from __future__ import annotations

from pathlib import Path

from barnabas.protocol import CorruptRecordError, ErrorCode, InvalidRecordError

__all__ = [
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "LogDirLockedError",
    "LogError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Root of every failure the log reports (other than the codec's and the OS's)."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRangeError(LogError):
    """A fetch or DeleteRecords offset outside what the log holds (OFFSET_OUT_OF_RANGE)."""

    error_code = ErrorCode.offset_out_of_range

    def __init__(self, offset: int, log_start_offset: int, upper_bound: int, what: str = "log end offset") -> None:
        super().__init__(
            f"offset {offset} is out of range: log start offset is {log_start_offset}, {what} is {upper_bound}"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.upper_bound = upper_bound


class RecordTooLargeError(LogError):
    """A batch bigger than ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.message_too_large

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds max.message.bytes={limit}")
        self.size = size
        self.limit = limit


class InvalidTimestampError(LogError):
    """A CreateTime timestamp outside ``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP)."""

    error_code = ErrorCode.invalid_timestamp


class RecordBatchTooLargeError(LogError):
    """A batch that cannot fit in any segment: bigger than ``segment.bytes`` (RECORD_LIST_TOO_LARGE)."""

    error_code = ErrorCode.record_list_too_large

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds segment.bytes={limit}")
        self.size = size
        self.limit = limit


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's sequence has a gap or restarts wrongly (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(LogError):
    """A producer epoch older than the one already seen: a zombie producer (INVALID_PRODUCER_EPOCH)."""

    error_code = ErrorCode.invalid_producer_epoch


class InvalidTxnStateError(LogError):
    """A transactional batch; barnabas runs no transaction coordinator yet (INVALID_TXN_STATE)."""

    error_code = ErrorCode.invalid_txn_state


class UnexpectedAppendOffsetError(LogError):
    """A follower's records go back into the log (Kafka's UnexpectedAppendOffsetException).

    The first batch not already in the log must start at or after the log end offset, and each
    later one at or after where the previous one ended; gaps are fine (a compacted leader has
    them). Nothing was appended. ``first_offset`` and ``last_offset`` are the offending batch's,
    so the caller can tell Kafka's recoverable case (an empty log and a batch straddling its
    start: restart the log at ``first_offset``) from a divergence.
    """

    def __init__(self, expected_offset: int, first_offset: int, last_offset: int) -> None:
        super().__init__(
            f"follower append expected a batch starting at or after offset {expected_offset}, "
            f"got one spanning [{first_offset}, {last_offset}]"
        )
        self.expected_offset = expected_offset
        self.first_offset = first_offset
        self.last_offset = last_offset


class InconsistentTopicIdError(LogError):
    """``partition.metadata`` names a different topic id than the one asked for (INCONSISTENT_TOPIC_ID)."""

    error_code = ErrorCode.inconsistent_topic_id


class LogDirLockedError(LogError):
    """Another process holds the log dir's ``.lock``: two brokers must never share a dir."""

    error_code = ErrorCode.kafka_storage_error

    def __init__(self, log_dir: Path, lock_file: Path) -> None:
        super().__init__(f"log dir {log_dir} is in use by another process (lock file {lock_file})")
        self.log_dir = log_dir
        self.lock_file = lock_file


class InconsistentBrokerIdError(LogError):
    """``meta.properties`` belongs to another broker.id (Kafka's InconsistentBrokerIdException)."""


class InconsistentClusterIdError(LogError):
    """``meta.properties`` belongs to another cluster (INCONSISTENT_CLUSTER_ID)."""

    error_code = ErrorCode.inconsistent_cluster_id


class CorruptIndexError(LogError):
    """An index file fails its sanity check; recovery rebuilds it from the segment."""


class CorruptSnapshotError(LogError):
    """A producer snapshot fails its CRC or layout check; it is deleted and state is rebuilt."""


class CorruptCheckpointError(LogError):
    """A checkpoint file is malformed; callers fall back to the safe default (recover, rebuild)."""
