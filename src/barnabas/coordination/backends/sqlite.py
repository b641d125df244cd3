"""Embedded coordination on one SQLite file (``sqlite:///path/to/db``), shared by the processes of one host.

Rules this module keeps (coordination.md §2):

- Every commit is one ``BEGIN IMMEDIATE`` transaction: checks, then writes. Read-modify-write never
  upgrades a read transaction (SQLITE_BUSY_SNAPSHOT in WAL mode).
- ``journal_mode=WAL`` lets processes share the file; ``synchronous=FULL`` because metadata must
  survive power loss. Network filesystems are refused: WAL needs shared memory and flock.
- **Liveness is a lock and a stamp, never a database write.** A session holds ``flock(LOCK_EX)`` on
  its own lock file; the kernel drops it when the process dies, however it dies. The owner's event
  loop also stamps the file (CLOCK_BOOTTIME, ``pwrite`` of 8 bytes, no fsync) every quarter TTL, so
  a hung owner — stopped, or its loop blocked — is seen too. Every metastore runs a reaper over the
  sessions it does not own: a lock it can take proves the owner dead, a stamp older than the TTL
  proves it hung, and deleting the session row cascades to its ephemeral keys. Heartbeats through
  the database would starve under writer contention (measured p99 of seconds), a file stamp does
  not. A session is also dead after a reboot (its recorded boot id differs). An owner that finds
  its own stamps a TTL apart was hung itself: it is SUSPENDED until it has read whether its
  session survived.
- **Triggers write the change log.** Every insert, update and delete of a key (cascades included)
  bumps the global revision and appends ``(rev, key)``; watchers poll the revision and read the log
  after the last revision they saw. A gap (the log was pruned past it) becomes a Resync.
- All SQLite calls of one metastore run on its own thread, so the event loop never waits on fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import struct
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import unquote, urlsplit

from ..api import Changed, Check, Delete, Op, Put, Resync, SessionState, Versioned, WatchEvent, check_ops_covered
from ..errors import KeyExistsError, NoSuchKeyError, SessionLostError, UnavailableError, VersionConflictError
from ._session import SessionBase

__all__ = ["SqliteMetastore", "SqliteSession", "open_backend"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_Changes = list[tuple[int, str]]  # (revision, key); a module alias because the class defines ``list``

#: Seconds between polls of the revision (watch latency is about half of it).
POLL_INTERVAL_S = 0.02
#: Seconds between reaper passes (how soon a dead process's ephemeral keys go).
REAP_INTERVAL_S = 0.2
#: How often a session's owner stamps its lock file, as a share of the session's TTL.
STAMP_SHARE = 0.25
_STAMP = struct.Struct("<d")
#: Change-log rows kept behind the newest revision.
CHANGELOG_KEEP = 10_000

# Schema, one statement per constant, applied in order (numbered like migration files).
#: How long opening the file may wait for other connections (SQLite's busy timeout, and the WAL switch).
CONNECT_TIMEOUT_S = 30.0
WAL_SWITCH_RETRY_S = 0.01
SCHEMA_001_META = "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"
SCHEMA_002_REV = "INSERT OR IGNORE INTO meta (k, v) VALUES ('rev', 0)"
SCHEMA_003_SESSIONS = (
    "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, pid INTEGER NOT NULL, "
    "boot_id TEXT NOT NULL, lock_path TEXT NOT NULL, ttl REAL NOT NULL)"
)
SCHEMA_004_KV = (
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, version INTEGER NOT NULL, "
    "session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE)"
)
SCHEMA_005_KV_SESSION_INDEX = "CREATE INDEX IF NOT EXISTS kv_session ON kv(session_id)"
SCHEMA_006_CHANGELOG = "CREATE TABLE IF NOT EXISTS changelog (rev INTEGER PRIMARY KEY, key TEXT NOT NULL)"
_LOG_CHANGE = (
    "UPDATE meta SET v = v + 1 WHERE k = 'rev'; "
    "INSERT INTO changelog (rev, key) SELECT v, {row}.key FROM meta WHERE k = 'rev';"
)
SCHEMA_007_ON_INSERT = (
    f"CREATE TRIGGER IF NOT EXISTS kv_insert AFTER INSERT ON kv BEGIN {_LOG_CHANGE.format(row='NEW')} END"
)
SCHEMA_008_ON_UPDATE = (
    f"CREATE TRIGGER IF NOT EXISTS kv_update AFTER UPDATE ON kv BEGIN {_LOG_CHANGE.format(row='NEW')} END"
)
SCHEMA_009_ON_DELETE = (
    f"CREATE TRIGGER IF NOT EXISTS kv_delete AFTER DELETE ON kv BEGIN {_LOG_CHANGE.format(row='OLD')} END"
)
SCHEMA = (
    SCHEMA_001_META,
    SCHEMA_002_REV,
    SCHEMA_003_SESSIONS,
    SCHEMA_004_KV,
    SCHEMA_005_KV_SESSION_INDEX,
    SCHEMA_006_CHANGELOG,
    SCHEMA_007_ON_INSERT,
    SCHEMA_008_ON_UPDATE,
    SCHEMA_009_ON_DELETE,
)

SELECT_ONE = "SELECT value, version, session_id FROM kv WHERE key = ?"
SELECT_VERSION = "SELECT version FROM kv WHERE key = ?"
SELECT_ALL = "SELECT key, value, version, session_id FROM kv ORDER BY key"
SELECT_RANGE = "SELECT key, value, version, session_id FROM kv WHERE key >= ? AND key < ? ORDER BY key"
SELECT_FROM = "SELECT key, value, version, session_id FROM kv WHERE key >= ? ORDER BY key"
INSERT_KEY = "INSERT INTO kv (key, value, version, session_id) VALUES (?, ?, 1, ?)"
UPDATE_KEY = "UPDATE kv SET value = ?, version = version + 1 WHERE key = ? RETURNING version"
DELETE_KEY = "DELETE FROM kv WHERE key = ?"
SELECT_REV = "SELECT v FROM meta WHERE k = 'rev'"
SELECT_CHANGES = "SELECT rev, key FROM changelog WHERE rev > ? ORDER BY rev"
PRUNE_CHANGES = "DELETE FROM changelog WHERE rev <= ?"
INSERT_SESSION = "INSERT INTO sessions (id, pid, boot_id, lock_path, ttl) VALUES (?, ?, ?, ?, ?)"
SELECT_SESSION = "SELECT 1 FROM sessions WHERE id = ?"
SELECT_SESSIONS = "SELECT id, boot_id, lock_path, ttl FROM sessions"
DELETE_SESSION = "DELETE FROM sessions WHERE id = ?"

_NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs", "fuse.glusterfs"}
)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


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


def _prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no bound)."""
    chars = prefix.rstrip("\U0010ffff")  # no character follows the last code point: drop it, bump the one before
    if not chars:
        return None
    following = ord(chars[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates cannot be stored (UTF-8); none can be in a key either
        following = 0xE000
    return chars[:-1] + chr(following)


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


def path_from_url(url: str) -> Path:
    """``sqlite:///abs/path`` → /abs/path; ``sqlite:relative/path`` → relative/path."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URL: {url!r}")
    raw = unquote(parts.path or parts.netloc)
    if not raw:
        raise ValueError(f"sqlite URL {url!r} names no database file")
    return Path(raw)


class SqliteSession(SessionBase):
    """A session whose liveness is an exclusive flock on its own lock file, stamped by its event loop."""

    def __init__(self, metastore: SqliteMetastore, session_id: str, ttl_s: float, lock_fd: int, lock_path: Path):
        super().__init__(session_id, ttl_s)
        self._metastore = metastore
        self._lock_fd = lock_fd
        self._lock_path = lock_path
        self._recheck = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._keepalive = loop.create_task(self._check_alive(), name=f"session {session_id}")
        self._stamper = loop.create_task(self._stamp_while_alive(), name=f"session {session_id} stamps")

    async def _check_alive(self) -> None:
        """Every ttl/3, or at once after a hang, confirm our row still exists (a reaper may have judged us dead)."""
        while self.state is not SessionState.LOST:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ttl_s / 3):
                    await self._recheck.wait()
            self._recheck.clear()
            try:
                alive = await self._metastore._run(lambda: self._metastore._session_alive(self.id))
            except UnavailableError:
                self._set_state(SessionState.SUSPENDED)
                continue
            self._set_state(SessionState.CONNECTED if alive else SessionState.LOST)
        self._release_lock()

    async def _stamp_while_alive(self) -> None:
        """Stamp the lock file every quarter TTL; stamps a TTL apart mean this process hung meanwhile."""
        last = _now()
        while self.state is not SessionState.LOST and self._lock_fd >= 0:
            now = _now()
            if now - last > self.ttl_s:
                log.warning("coordination session %s: this process was hung for %.1f s, past its %.1f s TTL",
                            self.id, now - last, self.ttl_s)  # fmt: skip
                self._set_state(SessionState.SUSPENDED)
                self._recheck.set()
            _stamp(self._lock_fd)
            last = now
            await asyncio.sleep(self.ttl_s * STAMP_SHARE)

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
            with contextlib.suppress(FileNotFoundError):
                self._lock_path.unlink()

    async def close(self) -> None:
        if self.state is not SessionState.LOST:
            with contextlib.suppress(UnavailableError):
                await self._metastore._run(lambda: self._metastore._delete_session(self.id))
            self._set_state(SessionState.LOST, closed=True)
        for task in (self._keepalive, self._stamper):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._release_lock()
        self._metastore._sessions.pop(self.id, None)


class SqliteMetastore:
    """The Metastore contract on a local SQLite database file."""

    def __init__(self, url: str, path: Path) -> None:
        self._url = url
        self.path = path
        self.lock_dir = path.with_name(path.name + ".sessions")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coordination-sqlite")
        self._connection: sqlite3.Connection | None = None
        self._sessions: dict[str, SqliteSession] = {}
        self._watchers: set[tuple[str, asyncio.Queue[WatchEvent | None]]] = set()
        self._last_rev = 0
        self._poke = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self._closing = False
        self._boot_id = _boot_id()

    @property
    def url(self) -> str:
        return self._url

    @property
    def local_paths(self) -> list[Path]:
        """The files and dirs this backend keeps on the host (a log dir holding them leaves them alone)."""
        return [self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm")), self.lock_dir]

    @classmethod
    async def open(cls, url: str) -> SqliteMetastore:
        """Open (creating if needed) the database named by ``url``.

        Raises:
            UnavailableError: the file cannot be opened, or it sits on a network filesystem.
        """
        path = path_from_url(url)
        parent = path.parent if path.parent.exists() else Path.cwd()
        fs_type = _filesystem_type(parent)
        if fs_type in _NETWORK_FILESYSTEMS:
            raise UnavailableError(
                f"{path} is on a network filesystem ({fs_type}); SQLite coordination needs a local disk"
            )
        metastore = cls(url, path)
        await metastore._run(metastore._connect)
        metastore._last_rev = await metastore._run(metastore._read_rev)
        loop = asyncio.get_running_loop()
        metastore._tasks = [
            loop.create_task(metastore._poll_changes(), name="sqlite watch poller"),
            loop.create_task(metastore._reap_dead_sessions(), name="sqlite session reaper"),
        ]
        return metastore

    # -- plumbing ---------------------------------------------------------------------------

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path, isolation_level=None, timeout=CONNECT_TIMEOUT_S, check_same_thread=False
        )
        _switch_to_wal(connection)
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA foreign_keys=ON")
        with _immediate(connection):
            for statement in SCHEMA:
                connection.execute(statement)
        self._connection = connection

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise UnavailableError("the metastore is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn)
        except sqlite3.Error as exc:
            raise UnavailableError(f"sqlite {self.path}: {exc}") from exc

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise UnavailableError("the metastore is closed")
        return self._connection

    def _read_rev(self) -> int:
        (rev,) = self._db.execute(SELECT_REV).fetchone()
        return int(rev)

    # -- reads ------------------------------------------------------------------------------

    async def get(self, key: str) -> Versioned | None:
        def run() -> Versioned | None:
            row = self._db.execute(SELECT_ONE, (key,)).fetchone()
            return Versioned(bytes(row[0]), int(row[1]), row[2]) if row else None

        return await self._run(run)

    async def list(self, prefix: str) -> dict[str, Versioned]:
        def run() -> dict[str, Versioned]:
            end = _prefix_end(prefix)
            if end is not None:
                rows = self._db.execute(SELECT_RANGE, (prefix, end)).fetchall()
            elif prefix:
                rows = self._db.execute(SELECT_FROM, (prefix,)).fetchall()
            else:
                rows = self._db.execute(SELECT_ALL).fetchall()
            return {key: Versioned(bytes(value), int(version), session) for key, value, version, session in rows}

        return await self._run(run)

    # -- writes -----------------------------------------------------------------------------

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        by_key = check_ops_covered(checks, ops)
        for op in ops:
            if isinstance(op, Put) and op.session is not None and op.session.id not in self._sessions:
                if op.session.state is SessionState.LOST:
                    raise SessionLostError(f"session {op.session.id} has ended")
                raise ValueError(f"session {op.session.id} belongs to another metastore")
        versions = await self._run(lambda: self._commit(checks, ops, by_key))
        self._poke.set()
        return versions

    def _commit(self, checks: Sequence[Check], ops: Sequence[Op], by_key: dict[str, Check]) -> dict[str, int]:
        db = self._db
        with _immediate(db):
            for check in checks:
                row = db.execute(SELECT_VERSION, (check.key,)).fetchone()
                current = int(row[0]) if row else 0
                holds = current > 0 if check.version is None else current == check.version
                if not holds:
                    raise _conflict(check, current)
            versions: dict[str, int] = {}
            for op in ops:
                if isinstance(op, Delete):
                    db.execute(DELETE_KEY, (op.key,))
                    continue
                if by_key[op.key].version == 0:
                    session_id = op.session.id if op.session is not None else None
                    if session_id is not None and not db.execute(SELECT_SESSION, (session_id,)).fetchone():
                        raise SessionLostError(f"session {session_id} has ended")
                    db.execute(INSERT_KEY, (op.key, op.value, session_id))
                    versions[op.key] = 1
                else:
                    (version,) = db.execute(UPDATE_KEY, (op.value, op.key)).fetchone()
                    versions[op.key] = int(version)
            rev = self._read_rev()
            if rev % 1000 == 0:
                db.execute(PRUNE_CHANGES, (rev - CHANGELOG_KEEP,))
        return versions

    # -- sessions ---------------------------------------------------------------------------

    async def open_session(self, ttl_s: float) -> SqliteSession:
        session_id = uuid.uuid4().hex
        lock_path = self.lock_dir / f"{session_id}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _stamp(fd)  # before the row exists, so no reaper ever sees it unstamped
            await self._run(
                lambda: self._execute_immediate(
                    INSERT_SESSION, (session_id, os.getpid(), self._boot_id, str(lock_path), ttl_s)
                )
            )
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()
            raise
        session = SqliteSession(self, session_id, ttl_s, fd, lock_path)
        self._sessions[session_id] = session
        return session

    def _execute_immediate(self, statement: str, parameters: tuple[object, ...]) -> None:
        with _immediate(self._db):
            self._db.execute(statement, parameters)

    def _session_alive(self, session_id: str) -> bool:
        return self._db.execute(SELECT_SESSION, (session_id,)).fetchone() is not None

    def _delete_session(self, session_id: str) -> None:
        self._execute_immediate(DELETE_SESSION, (session_id,))

    async def _reap_dead_sessions(self) -> None:
        """Delete sessions whose owner died or hung: lock free, stamp older than the TTL, or an older boot."""
        while not self._closing:
            await asyncio.sleep(REAP_INTERVAL_S)
            try:
                reaped = await self._run(self._reap_once)
            except UnavailableError as exc:
                log.debug("reaper: %s", exc)
                continue
            if reaped:
                log.info("reaped %d dead coordination session(s): %s", len(reaped), ", ".join(reaped))
                self._poke.set()

    def _reap_once(self) -> set[str]:
        reaped = set()
        for session_id, boot_id, lock_path, ttl_s in self._db.execute(SELECT_SESSIONS).fetchall():
            if session_id in self._sessions:
                continue
            if boot_id == self._boot_id:
                owner = _owner_of(Path(lock_path), float(ttl_s))
                if owner == "alive":
                    continue
                if owner == "hung":
                    log.warning("coordination session %s: its owner stopped stamping for over %.1f s; ending it",
                                session_id, ttl_s)  # fmt: skip
            self._execute_immediate(DELETE_SESSION, (session_id,))
            with contextlib.suppress(FileNotFoundError):
                Path(lock_path).unlink()
            reaped.add(session_id)
        return reaped

    # -- watches ----------------------------------------------------------------------------

    async def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        if self._closing:
            raise UnavailableError("the metastore is closed")
        queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        entry = (prefix, queue)
        self._watchers.add(entry)
        try:
            yield Resync()
            while True:
                pending = [await queue.get()]
                while not queue.empty():
                    pending.append(queue.get_nowait())
                if None in pending:  # the metastore closed
                    return
                if any(isinstance(event, Resync) for event in pending):
                    yield Resync()  # a resync covers whatever changes piled up with it
                else:
                    yield Changed(frozenset().union(*(event.keys for event in pending if isinstance(event, Changed))))
        finally:
            self._watchers.discard(entry)

    async def _poll_changes(self) -> None:
        while not self._closing:
            # asyncio.timeout, not wait_for: 3.11's wait_for swallows a cancel that races the event.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_INTERVAL_S):
                    await self._poke.wait()
            self._poke.clear()
            if not self._watchers:
                continue
            try:
                rev, changes = await self._run(lambda: self._changes_since(self._last_rev))
            except UnavailableError as exc:
                log.debug("watch poller: %s", exc)
                continue
            if rev == self._last_rev:
                continue
            gap = not changes or changes[0][0] != self._last_rev + 1
            self._last_rev = rev
            keys = {key for _, key in changes}
            for prefix, queue in list(self._watchers):
                if gap:
                    queue.put_nowait(Resync())
                    continue
                matching = frozenset(key for key in keys if key.startswith(prefix))
                if matching:
                    queue.put_nowait(Changed(matching))

    def _changes_since(self, rev: int) -> tuple[int, _Changes]:
        current = self._read_rev()
        if current == rev:
            return current, []
        return current, [(int(r), k) for r, k in self._db.execute(SELECT_CHANGES, (rev,)).fetchall()]

    # -- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed or self._closing:
            return
        self._closing = True
        for _, queue in list(self._watchers):
            queue.put_nowait(None)  # a watch ends when its metastore closes
        for session in list(self._sessions.values()):
            await session.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, connection.close)
        self._executor.shutdown(wait=True)


def _now() -> float:
    """Seconds on CLOCK_BOOTTIME: one clock for every process of this boot, moving on through suspend."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _stamp(fd: int) -> None:
    os.pwrite(fd, _STAMP.pack(_now()), 0)


def _owner_of(lock_path: Path, ttl_s: float) -> Literal["alive", "hung", "dead"]:
    """Whether a session's owner stamps its held lock (alive), holds it unstamped past the TTL (hung), or neither.

    A missing lock file counts as dead: its owner removed it, or a reaper did.
    """
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return "dead"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            stamp = os.pread(fd, _STAMP.size, 0)
            if len(stamp) == _STAMP.size and _now() - _STAMP.unpack(stamp)[0] > ttl_s:
                return "hung"
            return "alive"
        return "dead"
    finally:
        os.close(fd)


async def open_backend(url: str) -> SqliteMetastore:
    return await SqliteMetastore.open(url)


def _conflict(check: Check, current: int) -> VersionConflictError:
    """The error for a failed check: the key exists though expected absent, is absent though expected, or moved on."""
    if check.version == 0:
        return KeyExistsError(check.key)
    if current == 0:
        return NoSuchKeyError(check.key)
    return VersionConflictError(check.key, f"{check.key}: expected version {check.version}, found {current}")


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another connection holds the file.

    Two connections switching a new file at once would deadlock, so SQLite answers one of them
    "database is locked" at once instead of calling its busy handler: brokers that start together
    all open the file for the first time together.
    """
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_SWITCH_RETRY_S)
