"""Pluggable coordination (KIP-30): storage now; membership, election and listeners next.

Backends are chosen by URL scheme. This package knows nothing about Kafka.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from .errors import (
    CoordinationError,
    KeyExistsError,
    NoSuchKeyError,
    UnavailableError,
    UnsupportedBackendError,
    VersionConflictError,
)
from .storage import Storage, Versioned

__all__ = [
    "CoordinationError",
    "KeyExistsError",
    "NoSuchKeyError",
    "Storage",
    "UnavailableError",
    "UnsupportedBackendError",
    "VersionConflictError",
    "Versioned",
    "open_storage",
    "validate_url",
]

SCHEMES = ("sqlite",)


def validate_url(url: str) -> None:
    """Check that ``url`` names a backend this build has.

    Raises:
        UnsupportedBackendError: unknown scheme or missing path.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise UnsupportedBackendError(
            f"coordination URL {url!r}: unknown scheme {parts.scheme!r} (supported: {', '.join(SCHEMES)})"
        )
    if not parts.path:
        raise UnsupportedBackendError(f"coordination URL {url!r} has no database path")


async def open_storage(url: str) -> Storage:
    """Open the Storage backend named by ``url`` (``sqlite:///path/to/file.db``).

    Raises:
        UnsupportedBackendError: the URL names no known backend.
        UnavailableError: the backend cannot be opened.
    """
    validate_url(url)
    from .sqlite import SqliteStorage

    return await SqliteStorage.open(Path(urlsplit(url).path))
