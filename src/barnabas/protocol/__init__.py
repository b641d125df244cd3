"""Sans-IO Kafka codec: frames, headers, requests and responses, RecordBatch views.

Nothing in this package touches a socket, a file or an event loop (h11's rule): bytes in,
typed values out, and back.
"""

from ._errors import (
    CorruptRecordError,
    ErrorCode,
    FrameTooLargeError,
    InvalidRecordError,
    KafkaRecordError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    UnsupportedApiError,
)
from ._record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    batch_crc,
    iter_batch_headers,
    parse_batch_header,
    patch_batch,
    set_log_append_time,
    validate_batch,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "CorruptRecordError",
    "ErrorCode",
    "FrameTooLargeError",
    "InvalidRecordError",
    "KafkaRecordError",
    "LocalProtocolError",
    "ProtocolError",
    "RecordBatchHeader",
    "RemoteProtocolError",
    "UnsupportedApiError",
    "batch_crc",
    "iter_batch_headers",
    "parse_batch_header",
    "patch_batch",
    "set_log_append_time",
    "validate_batch",
]
