"""Exceptions for broken contracts. Kafka error codes are values, not exceptions (STYLE.md §2).

- RemoteProtocolError: the peer sent bytes we cannot accept; the connection is closed.
- LocalProtocolError: our own code misused the codec.
- KafkaRecordError and its leaves: a produced batch is unacceptable; the handler turns the
  error_code attribute into the partition's error in the response.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

__all__ = [
    "CorruptRecordError",
    "ErrorCode",
    "FrameTooLargeError",
    "InvalidRecordError",
    "KafkaRecordError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "UnsupportedApiError",
]


class ProtocolError(Exception):
    """Root of every codec failure."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol: malformed, truncated or oversized input."""


class FrameTooLargeError(RemoteProtocolError):
    """A frame's size prefix is above socket.request.max.bytes (or negative)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class UnsupportedApiError(RemoteProtocolError):
    """A request names an API key or version the broker does not serve."""

    def __init__(self, api_key: int, api_version: int, reason: str) -> None:
        super().__init__(f"api_key={api_key} api_version={api_version}: {reason}")
        self.api_key = api_key
        self.api_version = api_version


class LocalProtocolError(ProtocolError):
    """Our side asked the codec for something it cannot do."""


class KafkaRecordError(ProtocolError):
    """A record batch is unacceptable; ``error_code`` is what the producer is told.

    ``record_errors`` holds (index of the record in its batch, message) for the records at fault,
    which Produce v8+ reports per partition (Kafka's RecordValidationException).
    """

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", record_errors: Sequence[tuple[int, str | None]] = ()) -> None:
        super().__init__(message)
        self.record_errors: tuple[tuple[int, str | None], ...] = tuple(record_errors)


class CorruptRecordError(KafkaRecordError):
    """Bad CRC, bad magic or a batch that runs past its bounds (CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaRecordError):
    """A well-formed batch that breaks a rule (INVALID_RECORD)."""

    error_code = ErrorCode.invalid_record
