"""KIP-30's key-value storage, written once over any Metastore.

Guarantees (from the Metastore contract): versions start at 1 and grow by one per write; every
write here is a compare-and-set; operations on a key are linearizable. A **fenced write** applies
only while a given election epoch is current: it adds, to the same atomic commit, a check that the
election's epoch key is still at that epoch and that its leader key still exists (ZooKeeper-mode
Kafka's ``/controller_epoch`` zkVersion check, KafkaZkClient.checkedEphemeralCreate's twin).

Not guaranteed: that a fenced write made by a leader whose session has been suspended but not yet
replaced fails — it succeeds, exactly as in ZooKeeper-mode Kafka, because no newer epoch exists yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from .api import Check, Delete, Metastore, Op, Put, Session, Versioned
from .election import Fence, fence_checks
from .errors import FencedError, KeyExistsError, NoSuchKeyError, VersionConflictError

__all__ = ["Storage"]


class Storage:
    """Versioned keys with compare-and-set, put-if-absent, update-if-exists and fenced writes."""

    def __init__(self, metastore: Metastore) -> None:
        self.metastore = metastore

    async def close(self) -> None:
        """Close the metastore underneath."""
        await self.metastore.close()

    async def get(self, key: str) -> Versioned | None:
        """The key's value and version, or None."""
        return await self.metastore.get(key)

    async def list(self, prefix: str) -> dict[str, Versioned]:
        """Every key under ``prefix`` with its value and version (a consistent snapshot)."""
        return await self.metastore.list(prefix)

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        """Apply ``ops`` atomically if every check holds (``Metastore.commit``); return the new versions.

        Raises:
            VersionConflictError: a check failed; nothing was applied.
        """
        return await self.metastore.commit(checks, ops)

    async def put_if_absent(self, key: str, value: bytes, session: Session | None = None) -> int:
        """Create ``key`` (ephemeral to ``session`` if given); return its version, 1.

        Raises:
            KeyExistsError: the key exists.
        """
        try:
            versions = await self.metastore.commit([Check(key, 0)], [Put(key, value, session)])
        except VersionConflictError:
            raise KeyExistsError(key) from None
        return versions[key]

    async def update_if_exists(self, key: str, value: bytes) -> int:
        """Overwrite an existing key whatever its version; return the new version.

        Raises:
            NoSuchKeyError: the key does not exist.
        """
        try:
            versions = await self.metastore.commit([Check(key, None)], [Put(key, value)])
        except VersionConflictError:
            raise NoSuchKeyError(key) from None
        return versions[key]

    async def compare_and_set(self, key: str, value: bytes, expected_version: int) -> int:
        """Overwrite ``key`` only at ``expected_version``; return the new version.

        ``expected_version`` 0 means "create it"; see put_if_absent.

        Raises:
            VersionConflictError: the key is at another version (NoSuchKeyError if absent).
        """
        try:
            versions = await self.metastore.commit([Check(key, expected_version)], [Put(key, value)])
        except VersionConflictError:
            if expected_version > 0 and await self.metastore.get(key) is None:
                raise NoSuchKeyError(key) from None
            raise
        return versions[key]

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        """Delete ``key`` (only at ``expected_version`` if given); False if it was already absent.

        Raises:
            VersionConflictError: the key exists at another version than ``expected_version``.
        """
        while True:
            try:
                await self.metastore.commit([Check(key, expected_version)], [Delete(key)])
            except VersionConflictError:
                if await self.metastore.get(key) is None:
                    return False
                if expected_version is not None:
                    raise
                continue  # deleted and re-created in between: try again
            return True

    async def fenced_write(self, fence: Fence, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        """Commit ``ops`` under ``checks`` only while ``fence``'s epoch is current.

        Raises:
            FencedError: the election moved to a newer epoch or its leader is gone.
            VersionConflictError: one of ``checks`` failed (the fence held).
        """
        election_checks = fence_checks(fence)
        election_keys = {check.key for check in election_checks}
        try:
            return await self.metastore.commit([*election_checks, *checks], ops)
        except VersionConflictError as exc:
            if exc.key in election_keys:
                raise FencedError(f"election {fence.election!r} epoch {fence.epoch} is no longer current") from exc
            raise

    async def fenced_put(self, fence: Fence, key: str, value: bytes, expected_version: int | None) -> int:
        """Write one key under ``fence``: create it (0), update it at a version (n), or at any version (None).

        Raises:
            FencedError: the epoch is no longer current.
            VersionConflictError: the key is not at ``expected_version``.
        """
        versions = await self.fenced_write(fence, [Check(key, expected_version)], [Put(key, value)])
        return versions[key]
