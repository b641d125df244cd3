"""The durable partition log: segments, indexes, recovery, retention, producer state, epochs.

Kafka's storage vocabulary, one concept per module (STYLE.md §4): ``segment`` (LogSegment),
``offset_index`` / ``time_index``, ``producer_state`` (ProducerStateManager), ``leader_epoch``
(LeaderEpochFileCache), ``checkpoint``, ``recovery`` (LogLoader), ``retention``, ``log``
(UnifiedLog), ``local_log`` (LocalLog), ``validator`` (LogValidator), ``results`` (LogAppendInfo
and the other answers), ``log_manager`` (LogManager), and the log cleaner: ``cleaner_manager``
(LogCleanerManager), ``cleaner`` (Cleaner), ``offset_map`` (OffsetMap), ``record_filter``
(the cleaner's MemoryRecords.filterTo) and ``cleaner_config`` (CleanerConfig).

Nothing here touches the network or asyncio, reads a clock or takes a lock: the broker calls from
one event loop thread and passes ``now_ms``. Batches stay opaque bytes; only v2 headers are read,
except by the cleaner and by the keyless-record check of compacted topics. The one piece meant for
another thread is a cleaning pass (``LogManager.cleaner.clean(job)``), which shares nothing with
the logs but the job it was given.
"""

from .append_writer import AppendWriter
from .checkpoint import CLEANER_OFFSET_CHECKPOINT, EpochEntry
from .cleaner import CleaningAbortedError, CleaningJob, CleaningResult
from .cleaner_config import CleanerConfig
from .cleaner_manager import CleanerManager
from .config import COMPRESSION_TYPES, GZIP_LEVELS, LZ4_LEVELS, ZSTD_LEVELS, LogConfig
from .errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    InconsistentTopicIdError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    LogDirLockedError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from .file_slice import FileSlice
from .files import TopicPartition
from .leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from .log import PartitionLog
from .log_manager import LogManager, MaintenanceSchedule
from .meta_properties import MetaProperties, read_broker_id, read_cluster_id
from .partition_metadata import read_topic_id
from .producer_state import ProducerStateManager
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
from .scheduler import LogScheduler
from .segment import LogSegment
from .topic_document import TOPIC_DOCUMENT, read_topic_document, write_topic_document

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "COMPRESSION_TYPES",
    "GZIP_LEVELS",
    "LZ4_LEVELS",
    "TOPIC_DOCUMENT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "ZSTD_LEVELS",
    "AppendResult",
    "AppendWriter",
    "CleanerConfig",
    "CleanerManager",
    "CleaningAbortedError",
    "CleaningJob",
    "CleaningResult",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "EpochEndOffset",
    "EpochEntry",
    "FileSlice",
    "FollowerAppendResult",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "LeaderEpochCache",
    "LogConfig",
    "LogDirLockedError",
    "LogError",
    "LogManager",
    "LogScheduler",
    "LogSegment",
    "MaintenanceResult",
    "MaintenanceSchedule",
    "MetaProperties",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "PendingAppend",
    "ProducerStateManager",
    "ReadResult",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "SliceResult",
    "TopicPartition",
    "UnexpectedAppendOffsetError",
    "read_broker_id",
    "read_cluster_id",
    "read_topic_document",
    "read_topic_id",
    "write_topic_document",
]
