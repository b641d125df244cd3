"""One place that turns the log's and codec's exceptions into the error codes clients see.

Log and record errors carry their Kafka error code; an OS error from the disk is
KAFKA_STORAGE_ERROR; anything else is UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from barnabas.log import LogError
from barnabas.protocol import ErrorCode, KafkaRecordError

__all__ = ["error_code_for"]


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code a client is sent for ``exc``."""
    if isinstance(exc, LogError | KafkaRecordError):
        return exc.error_code
    if isinstance(exc, OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error
