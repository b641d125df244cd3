"""Errors callers of the coordination layer can act on (STYLE.md §6).

One root and a few leaves, each saying what to do next:

- VersionConflictError (and KeyExistsError, NoSuchKeyError): the state moved; re-read and retry.
- FencedError: the election epoch you wrote under is no longer current; stop acting as leader.
- SessionLostError: the lease ended and its ephemeral keys are gone; open a new session.
- UnavailableError: the backend cannot be reached now; retry later (retry.py). A write that
  failed this way may have been applied.
- UnsupportedBackendError: the URL names no backend this install has.

Backends translate their driver's exceptions into these at the edge.
"""

from __future__ import annotations

__all__ = [
    "CoordinationError",
    "FencedError",
    "KeyExistsError",
    "NoSuchKeyError",
    "SessionLostError",
    "UnavailableError",
    "UnsupportedBackendError",
    "VersionConflictError",
]


class CoordinationError(Exception):
    """Root of every coordination failure."""


class VersionConflictError(CoordinationError):
    """A compare-and-set found another version than expected: re-read and retry."""

    def __init__(self, key: str, message: str | None = None) -> None:
        super().__init__(message or f"{key}: version conflict")
        self.key = key


class KeyExistsError(VersionConflictError):
    """The key was expected to be absent and exists."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"{key}: already exists")


class NoSuchKeyError(VersionConflictError):
    """The key was expected to exist and does not."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"{key}: does not exist")


class FencedError(CoordinationError):
    """A fenced write found its election epoch superseded (or the leader gone)."""


class SessionLostError(CoordinationError):
    """The session's lease has ended; its ephemeral keys are gone."""


class UnavailableError(CoordinationError):
    """The backend cannot be reached now; retryable."""


class UnsupportedBackendError(CoordinationError):
    """The URL names no backend this install has (or its driver is not installed)."""
