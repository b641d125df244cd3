"""Errors callers of the coordination layer can act on (STYLE.md §6).

One root, a few leaves. Backends translate their driver's errors into these at the edge.
"""

from __future__ import annotations

__all__ = [
    "CoordinationError",
    "KeyExistsError",
    "NoSuchKeyError",
    "UnavailableError",
    "UnsupportedBackendError",
    "VersionConflictError",
]


class CoordinationError(Exception):
    """Root of every coordination failure."""


class VersionConflictError(CoordinationError):
    """A compare-and-set found another version than expected: re-read and retry."""


class KeyExistsError(VersionConflictError):
    """put_if_absent found the key already present."""


class NoSuchKeyError(VersionConflictError):
    """update_if_exists (or a versioned write) found no key."""


class UnavailableError(CoordinationError):
    """The backend cannot be reached right now; retryable."""


class UnsupportedBackendError(CoordinationError):
    """The URL names no backend this build has (or its driver is not installed)."""
