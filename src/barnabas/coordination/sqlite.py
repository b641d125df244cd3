"""Embedded coordination on one SQLite file (``sqlite:///path``), the default backend.

Rules this module keeps:

- Every mutation is one ``BEGIN IMMEDIATE`` transaction that bumps the global revision in
  ``meta``, writes the row and appends to ``changelog`` (the listener registry will poll it).
  Read-modify-write never upgrades a read transaction (SQLITE_BUSY_SNAPSHOT in WAL mode).
- ``journal_mode=WAL`` lets several processes on one host share the file;
  ``synchronous=FULL`` because topic metadata must survive power loss (coordination.md §2).
- All SQLite calls run on one dedicated thread, so the event loop never blocks on fsync.
- Network filesystems are refused: WAL needs shared memory and flock is unreliable there.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .errors import KeyExistsError, NoSuchKeyError, UnavailableError, VersionConflictError
from .storage import Versioned

__all__ = ["SqliteStorage"]

T = TypeVar("T")

# Schema, one statement per constant, applied in order (numbered like migration files).
SCHEMA_001_META = "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"
SCHEMA_002_REV = "INSERT OR IGNORE INTO meta (k, v) VALUES ('rev', 0)"
SCHEMA_003_KV = (
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
    "version INTEGER NOT NULL, create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL)"
)
SCHEMA_004_CHANGELOG = (
    "CREATE TABLE IF NOT EXISTS changelog (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, op TEXT NOT NULL)"
)
SCHEMA = (SCHEMA_001_META, SCHEMA_002_REV, SCHEMA_003_KV, SCHEMA_004_CHANGELOG)

BUMP_REV = "UPDATE meta SET v = v + 1 WHERE k = 'rev' RETURNING v"
SELECT_ONE = "SELECT value, version FROM kv WHERE key = ?"
SELECT_VERSION = "SELECT version FROM kv WHERE key = ?"
SELECT_ALL = "SELECT key, value, version FROM kv ORDER BY key"
SELECT_RANGE = "SELECT key, value, version FROM kv WHERE key >= ? AND key < ? ORDER BY key"
INSERT_KEY = "INSERT INTO kv (key, value, version, create_rev, mod_rev) VALUES (?, ?, 1, ?, ?)"
UPDATE_KEY = "UPDATE kv SET value = ?, version = version + 1, mod_rev = ? WHERE key = ? RETURNING version"
DELETE_KEY = "DELETE FROM kv WHERE key = ?"
LOG_CHANGE = "INSERT INTO changelog (rev, key, op) VALUES (?, ?, ?)"

_NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs", "fuse.glusterfs"}
)


def _filesystem_type(path: Path) -> str | None:
    """The type of the mount holding ``path`` per /proc/mounts (longest mount point wins)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    resolved = str(path.resolve())
    best: tuple[int, str] | None = None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount_point = parts[1]
        inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) > best[0]):
            best = (len(mount_point), parts[2])
    return best[1] if best else None


def _prefix_end(prefix: str) -> str:
    """The smallest string greater than every string starting with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SqliteStorage:
    """Storage on a SQLite database file shared by the processes of one host."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coordination-sqlite")
        self._connection: sqlite3.Connection | None = None

    @classmethod
    async def open(cls, path: Path) -> SqliteStorage:
        """Create or open the database at ``path``.

        Raises:
            UnavailableError: the file cannot be opened, or sits on a network filesystem.
        """
        fs_type = _filesystem_type(path.parent if path.parent.exists() else Path.cwd())
        if fs_type in _NETWORK_FILESYSTEMS:
            raise UnavailableError(
                f"{path} is on a network filesystem ({fs_type}); SQLite coordination needs a local disk"
            )
        storage = cls(path)
        await storage._run(storage._connect)
        return storage

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        with _immediate(connection):
            for statement in SCHEMA:
                connection.execute(statement)
        self._connection = connection

    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn)
        except sqlite3.Error as exc:
            raise UnavailableError(f"sqlite {self.path}: {exc}") from exc

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise UnavailableError("storage is closed")
        return self._connection

    def _bump(self, key: str, op: str) -> int:
        (rev,) = self._db.execute(BUMP_REV).fetchone()
        self._db.execute(LOG_CHANGE, (rev, key, op))
        return int(rev)

    async def get(self, key: str) -> Versioned | None:
        def run() -> Versioned | None:
            row = self._db.execute(SELECT_ONE, (key,)).fetchone()
            return Versioned(bytes(row[0]), int(row[1])) if row else None

        return await self._run(run)

    async def put_if_absent(self, key: str, value: bytes) -> int:
        def run() -> int:
            with _immediate(self._db):
                if self._db.execute(SELECT_VERSION, (key,)).fetchone():
                    raise KeyExistsError(key)
                rev = self._bump(key, "put")
                self._db.execute(INSERT_KEY, (key, value, rev, rev))
                return 1

        return await self._run(run)

    async def update_if_exists(self, key: str, value: bytes) -> int:
        return await self._run(lambda: self._update(key, value, None))

    async def compare_and_set(self, key: str, value: bytes, expected_version: int) -> int:
        return await self._run(lambda: self._update(key, value, expected_version))

    def _update(self, key: str, value: bytes, expected_version: int | None) -> int:
        with _immediate(self._db):
            row = self._db.execute(SELECT_VERSION, (key,)).fetchone()
            if row is None:
                raise NoSuchKeyError(key)
            if expected_version is not None and row[0] != expected_version:
                raise VersionConflictError(f"{key}: expected version {expected_version}, found {row[0]}")
            rev = self._bump(key, "put")
            (version,) = self._db.execute(UPDATE_KEY, (value, rev, key)).fetchone()
            return int(version)

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        def run() -> bool:
            with _immediate(self._db):
                row = self._db.execute(SELECT_VERSION, (key,)).fetchone()
                if row is None:
                    return False
                if expected_version is not None and row[0] != expected_version:
                    raise VersionConflictError(f"{key}: expected version {expected_version}, found {row[0]}")
                self._bump(key, "delete")
                self._db.execute(DELETE_KEY, (key,))
                return True

        return await self._run(run)

    async def list(self, prefix: str) -> dict[str, Versioned]:
        def run() -> dict[str, Versioned]:
            if prefix:
                rows = self._db.execute(SELECT_RANGE, (prefix, _prefix_end(prefix))).fetchall()
            else:
                rows = self._db.execute(SELECT_ALL).fetchall()
            return {key: Versioned(bytes(value), int(version)) for key, value, version in rows}

        return await self._run(run)

    async def close(self) -> None:
        def run() -> None:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

        if self._connection is not None:
            await self._run(run)
        self._executor.shutdown(wait=True)


@contextlib.contextmanager
def _immediate(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
