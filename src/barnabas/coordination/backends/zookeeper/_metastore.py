"""The Metastore over one ZooKeeper ensemble: reads, commits, sessions and watches.

Rules:

- The metastore's own KazooClient serves reads, commits without ephemeral creates, and watches;
  its ZooKeeper session owns nothing, so when it expires kazoo just opens another one.
- Reads are linearizable: a ``sync`` is sent first, pipelined with the reads on the same connection
  (ZooKeeper serves one client's requests in order), so a read sees every write acknowledged before
  it started, whichever server the client is connected to.
- ``list`` is a snapshot: after listing the children it reads their data, then the listing and every
  ``mzxid`` again, all in one pipelined batch; if the parent's ``cversion`` and every ``mzxid`` are
  unchanged, the data held at the instant between the two halves of the batch. Otherwise it reads
  again (until ``op_timeout``).
- A commit runs as one ZooKeeper ``multi`` (``_plan``). A commit creating ephemeral keys runs on
  the owning Session's client; creating ephemeral keys for two sessions in one commit is refused
  (ZooKeeper ties an ephemeral to the session that sent the create).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from functools import partial
from typing import Any

from kazoo.exceptions import NoNodeError

from ...api import Check, Op, Put, Session, Versioned, WatchEvent
from ...errors import UnavailableError
from ._connection import KazooConnection, map_errors, raise_first
from ._layout import ZooKeeperUrl, format_session_id, key_of
from ._plan import add_to_transaction, plan_commit, versions_or_conflict
from ._session import ZooKeeperSession
from ._watcher import KvWatcher

__all__ = ["ZooKeeperMetastore"]

log = logging.getLogger(__name__)

#: Session timeout asked for the metastore's own client (it holds no ephemerals; the server clamps it).
_MAIN_SESSION_TIMEOUT_S = 10.0


def _versioned(data: bytes, stat: Any) -> Versioned:
    owner = int(stat.ephemeralOwner)
    return Versioned(bytes(data), int(stat.version) + 1, format_session_id(owner) if owner else None)


def _matching(children: Sequence[str], prefix: str) -> list[tuple[str, str]]:
    """(key, node name) of the children under ``prefix``, in key order."""
    return sorted((key, name) for name in children if (key := key_of(name)) is not None and key.startswith(prefix))


class ZooKeeperMetastore:
    """Versioned keys as znodes under ``<chroot>/kv``; see the package docstring."""

    def __init__(self, layout: ZooKeeperUrl, connection: KazooConnection) -> None:
        self._layout = layout
        self._connection = connection
        self._client = connection.client
        self._sessions: set[ZooKeeperSession] = set()
        self._watcher = KvWatcher(connection, layout)
        self._closed = False

    @classmethod
    async def open(cls, layout: ZooKeeperUrl) -> ZooKeeperMetastore:
        """Connect and make sure ``<chroot>/kv`` exists.

        Raises:
            UnavailableError: no server answered within ``op_timeout``.
        """
        connection = KazooConnection(layout.hosts, _MAIN_SESSION_TIMEOUT_S, layout.op_timeout_s, final_loss=False)
        await connection.start()
        try:
            kv = layout.kv_path
            results = await connection.call(f"create {kv}", lambda: connection.client.ensure_path_async(kv))
            raise_first(f"create {kv}", results)
        except BaseException:
            await connection.stop()
            raise
        return cls(layout, connection)

    @property
    def url(self) -> str:
        return self._layout.url

    def _check_open(self) -> None:
        if self._closed:
            raise UnavailableError("the ZooKeeper metastore is closed")

    # -- reads -----------------------------------------------------------------------------

    async def get(self, key: str) -> Versioned | None:
        self._check_open()
        path = self._layout.path_of(key)
        synced, result = await self._connection.call(
            f"get {key!r}",
            lambda: self._client.sync_async(self._layout.kv_path),
            lambda: self._client.get_async(path),
        )
        raise_first(f"get {key!r}", [synced])
        if isinstance(result, NoNodeError):
            return None
        raise_first(f"get {key!r}", [result])
        data, stat = result
        return _versioned(data, stat)

    async def list(self, prefix: str) -> dict[str, Versioned]:
        self._check_open()
        kv = self._layout.kv_path
        what = f"list {prefix!r}"
        synced, listed = await self._connection.call(
            what,
            lambda: self._client.sync_async(kv),
            lambda: self._client.get_children_async(kv, include_data=True),
        )
        raise_first(what, [synced, listed])
        deadline = asyncio.get_running_loop().time() + self._layout.op_timeout_s
        while True:
            children, parent = listed
            names = _matching(children, prefix)
            # One pipelined batch: the data, then the listing and every mzxid again. If nothing
            # moved, the reads all held at the instant between the last read and the first recheck.
            results = await self._connection.call(
                what,
                *(partial(self._client.get_async, f"{kv}/{name}") for _, name in names),
                partial(self._client.get_children_async, kv, include_data=True),
                *(partial(self._client.exists_async, f"{kv}/{name}") for _, name in names),
            )
            reads, listed, rechecks = results[: len(names)], results[len(names)], results[len(names) + 1 :]
            raise_first(what, [listed, *rechecks, *(r for r in reads if not isinstance(r, NoNodeError))])
            snapshot = {
                key: _versioned(*read)
                for (key, _), read, recheck in zip(names, reads, rechecks, strict=True)
                if not isinstance(read, NoNodeError) and recheck is not None and recheck.mzxid == read[1].mzxid
            }
            if len(snapshot) == len(names) and listed[1].cversion == parent.cversion:
                return snapshot
            if asyncio.get_running_loop().time() > deadline:
                raise UnavailableError(f"{what}: keys kept changing for {self._layout.op_timeout_s} s")

    # -- writes ----------------------------------------------------------------------------

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        self._check_open()
        steps = plan_commit(checks, ops)
        owner: ZooKeeperSession | None = None
        for op in ops:
            if isinstance(op, Put) and op.session is not None:
                session = self._own_session(op.session)
                session.ensure_alive()
        for step in steps:
            if step.session is not None:
                session = self._own_session(step.session)
                if owner is not None and owner is not session:
                    raise ValueError("ZooKeeper cannot create ephemeral keys of two sessions in one commit")
                owner = session
        if not steps:
            return {}
        connection = owner.connection if owner is not None else self._connection
        what = f"commit of {', '.join(repr(step.key) for step in steps[:3])}{'…' if len(steps) > 3 else ''}"
        with map_errors(what, session=owner is not None):
            transaction = connection.client.transaction()
            for step in steps:
                add_to_transaction(transaction, step, self._layout.path_of(step.key))
        (results,) = await connection.call(what, transaction.commit_async, session=owner is not None)
        raise_first(what, [results], session=owner is not None)
        if owner is not None:
            # kazoo counts a loss before it can reconnect on a new session: a reply after one may
            # come from a fresh ZooKeeper session, whose ephemerals die when the client is stopped.
            owner.ensure_alive()
        return versions_or_conflict(steps, results)

    def _own_session(self, session: Session) -> ZooKeeperSession:
        if not isinstance(session, ZooKeeperSession) or session.owner is not self:
            raise ValueError(f"{session!r} was not opened by this ZooKeeper metastore")
        return session

    # -- sessions and watches --------------------------------------------------------------

    async def open_session(self, ttl_s: float) -> Session:
        self._check_open()
        session = await ZooKeeperSession.open(self._layout.hosts, ttl_s, self._layout.op_timeout_s, self)
        self._sessions = {s for s in self._sessions if not s.connection.stopped}
        self._sessions.add(session)
        return session

    async def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        self._check_open()
        subscriber = self._watcher.subscribe(prefix)
        try:
            while (event := await subscriber.next()) is not None:
                yield event
        finally:
            self._watcher.unsubscribe(subscriber)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watcher.close()
        sessions, self._sessions = self._sessions, set()
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)
        await self._connection.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperMetastore({self._layout.url!r})"
