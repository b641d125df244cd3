"""The Storage interface: versioned keys with compare-and-set (KIP-30's key-value storage).

Guarantees every backend gives:

- Each key has a version that starts at 1 when the key is created and grows by one on each
  write; a deleted and re-created key starts again at 1.
- ``compare_and_set`` writes only if the key's current version equals ``expected_version``;
  operations on one key are linearizable.
- Values are opaque bytes; keys are '/'-separated strings. ``list`` returns a consistent
  snapshot of every key under a prefix.

Not guaranteed: ordering across keys beyond linearizability of each operation, and any
notification of changes (that is the listener registry's job, and notifications are hints).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

__all__ = ["Storage", "Versioned"]


class Versioned(NamedTuple):
    value: bytes
    version: int


class Storage(Protocol):
    """Async versioned key-value storage."""

    async def get(self, key: str) -> Versioned | None:
        """The value and version of ``key``, or None if absent."""
        ...

    async def put_if_absent(self, key: str, value: bytes) -> int:
        """Create ``key``; return its version (1).

        Raises:
            KeyExistsError: the key exists.
        """
        ...

    async def update_if_exists(self, key: str, value: bytes) -> int:
        """Overwrite an existing key whatever its version; return the new version.

        Raises:
            NoSuchKeyError: the key does not exist.
        """
        ...

    async def compare_and_set(self, key: str, value: bytes, expected_version: int) -> int:
        """Overwrite ``key`` only at ``expected_version``; return the new version.

        Raises:
            VersionConflictError: the key is at another version.
            NoSuchKeyError: the key does not exist.
        """
        ...

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        """Delete ``key`` (only at ``expected_version`` if given); False if it was absent.

        Raises:
            VersionConflictError: the key is at another version.
        """
        ...

    async def list(self, prefix: str) -> dict[str, Versioned]:
        """Every key starting with ``prefix`` with its value and version."""
        ...

    async def close(self) -> None:
        """Release connections and threads; the object is unusable afterwards."""
        ...
