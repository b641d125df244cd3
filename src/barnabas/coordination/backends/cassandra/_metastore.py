"""The Metastore over one Cassandra partition: SERIAL reads, commits as single-partition LWT batches.

Rules this module keeps (coordination.md §6):

- A commit reads, at SERIAL, the revision row, every checked key and the lease rows of the sessions
  it puts with; decides the checks on that snapshot (a failed check is a linearizable observation:
  VersionConflictError); then sends one conditional batch: ``rev IF version = r`` moved to ``r + 1``,
  the change-log row ``r + 1``, and per key the write conditioned on the version it read. Only
  another commit can move ``rev``, so a batch that did not apply is re-read and retried (until
  :data:`COMMIT_DEADLINE_S`); conflicts are always decided on a fresh snapshot.
- A batch whose outcome is unknown (a CAS write timeout, a lost connection) is resolved by a SERIAL
  read, which finishes or buries any Paxos round in flight: the change-log row ``r + 1`` carries
  the commit's id, so it tells whether this commit applied. Only when that read fails too does the
  commit raise UnavailableError.
- Versions are written, never incremented server-side (CQL has no ``version = version + 1`` outside
  counters): Check(key, None) with a Put writes the read version + 1 under ``IF version = read``.
- Ephemeral keys carry their session in ``session``, are written with a TTL and indexed by a
  ``<session>/<key>`` row (TTL one second longer, so it outlives the key). A new one takes the lease
  row's remaining TTL (so no key of a session expires before its lease row); an update by anyone
  keeps the key's remaining TTL; the owner's keepalive rewrites them all with the full TTL.
- A commit that only checks writes nothing: the SERIAL read is the linearization point.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass, field

from ...api import Check, Delete, Op, Put, Session, SessionState, Versioned, WatchEvent, check_ops_covered
from ...errors import (
    KeyExistsError,
    NoSuchKeyError,
    SessionLostError,
    UnavailableError,
    VersionConflictError,
)
from . import _cql as cql
from ._connection import Batch, Connection, Row
from ._cql import change_key, index_key
from ._session import CassandraSession, lease_seconds
from ._watch import CHANGE_LOG_TTL_S, watch_prefix

__all__ = ["COMMIT_DEADLINE_S", "CassandraMetastore", "prefix_end", "renewal_outcome"]

log = logging.getLogger(__name__)

#: How long a commit retries batches that lost the race for the revision before UnavailableError.
COMMIT_DEADLINE_S = 30.0
#: An ephemeral key's index row outlives the key by this much (whole seconds: TTLs are).
INDEX_GRACE_S = 1


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no bound)."""
    chars = prefix.rstrip("\U0010ffff")
    if not chars:
        return None
    following = ord(chars[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates cannot be encoded; none can be in a key either
        following = 0xE000
    return chars[:-1] + chr(following)


def renewal_outcome(applied: bool, current: Sequence[Row], session_id: str) -> bool | None:
    """What a renewal batch's answer says: True renewed, False the lease row is gone, None retry (a key moved).

    A batch that did not apply comes back with the conditioned rows as they are; a row that does not
    exist is not among them, and when none does the answer is ``[applied]`` alone.
    """
    if applied:
        return True
    lease_found = any(r.get("kind") == cql.KIND_SESSIONS and r.get("key") == session_id for r in current)
    return None if lease_found else False


def _versioned(row: Row) -> Versioned:
    return Versioned(bytes(row["value"] or b""), int(row["version"]), row["session"])


def _conflict(checks: Iterable[Check], kv: dict[str, Row]) -> VersionConflictError | None:
    """The error for the first check the snapshot contradicts, or None when all hold."""
    for check in checks:
        row = kv.get(check.key)
        actual = int(row["version"]) if row is not None else 0
        if check.version == 0 and actual:
            return KeyExistsError(check.key)
        if check.version != 0 and not actual:
            return NoSuchKeyError(check.key)
        if check.version not in (None, actual):
            return VersionConflictError(check.key, f"{check.key}: version {actual}, expected {check.version}")
    return None


@dataclass(slots=True)
class _Snapshot:
    """Rows read at SERIAL for one commit attempt, by kind."""

    rev: int | None = None
    kv: dict[str, Row] = field(default_factory=dict)
    leases: dict[str, Row] = field(default_factory=dict)
    changes: dict[str, Row] = field(default_factory=dict)


class CassandraMetastore:
    """Versioned keys, commits, sessions and watches in one partition of table ``kv``."""

    def __init__(self, url: str, connection: Connection) -> None:
        self._url = url
        self._connection = connection
        self._ns = connection.target.namespace
        self._sessions: dict[str, CassandraSession] = {}
        self._closed = asyncio.Event()
        connection.on_host_down(self._nudge_sessions)

    @property
    def url(self) -> str:
        return self._url

    # -- reads -----------------------------------------------------------------------------

    async def get(self, key: str) -> Versioned | None:
        rows = await self._connection.execute(cql.SELECT_KEY, (self._ns, key), serial=True)
        return _versioned(rows[0]) if rows else None

    async def list(self, prefix: str) -> dict[str, Versioned]:
        end = prefix_end(prefix)
        if end is None:
            rows = await self._connection.execute(cql.SELECT_ALL, (self._ns,), serial=True)
        else:
            rows = await self._connection.execute(cql.SELECT_RANGE, (self._ns, prefix, end), serial=True)
        # Clustering order is UTF-8 byte order, which is code point order, which is str order.
        return {row["key"]: _versioned(row) for row in rows if row["key"].startswith(prefix)}

    async def _snapshot(self, rows: Iterable[tuple[int, str]]) -> _Snapshot:
        found = await self._connection.execute(cql.SELECT_ROWS, (self._ns, list(rows)), serial=True)
        snapshot = _Snapshot()
        for row in found:
            kind = row["kind"]
            if kind == cql.KIND_META:
                snapshot.rev = int(row["version"])
            elif kind == cql.KIND_KV:
                snapshot.kv[row["key"]] = row
            elif kind == cql.KIND_SESSIONS:
                snapshot.leases[row["key"]] = row
            else:
                snapshot.changes[row["key"]] = row
        return snapshot

    # -- commits ---------------------------------------------------------------------------

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        by_key = check_ops_covered(checks, ops)
        writes = {op.key: op for op in ops}
        owners = {op.key: self._own(op.session) for op in ops if isinstance(op, Put) and op.session is not None}
        wanted = [(cql.KIND_META, cql.REV_KEY)]
        wanted += [(cql.KIND_KV, key) for key in by_key]
        wanted += [(cql.KIND_SESSIONS, session_id) for session_id in {s.id for s in owners.values()}]
        commit_id = uuid.uuid4().hex
        deadline = time.monotonic() + COMMIT_DEADLINE_S
        attempt = 0
        while True:
            snapshot = await self._snapshot(wanted)
            conflict = _conflict(checks, snapshot.kv)
            if conflict is not None:
                raise conflict
            if not ops:
                return {}
            if snapshot.rev is None:  # the namespace's revision row is missing: recreate it
                await self._connection.execute(cql.INIT_REV, (self._ns,))
                continue
            batch, versions = self._commit_batch(snapshot, by_key, writes, owners, commit_id)
            try:
                applied, _ = await batch.apply()
            except UnavailableError:
                applied = await self._applied(commit_id, snapshot.rev)
            if applied:
                return versions
            attempt += 1
            if time.monotonic() > deadline:
                raise UnavailableError(f"cassandra: commit lost the race for the revision {attempt} times")
            await asyncio.sleep(random.uniform(0, min(0.1, 0.005 * attempt)))  # contention back-off

    def _own(self, session: Session) -> CassandraSession:
        """The session a Put names, as ours.

        Raises:
            SessionLostError: the session has ended.
            ValueError: the session belongs to another metastore.
        """
        if not isinstance(session, CassandraSession) or session.leases is not self:
            raise ValueError(f"session {session.id} belongs to another metastore")
        if session.state is SessionState.LOST or self._sessions.get(session.id) is not session:
            raise SessionLostError(f"session {session.id} has ended")
        return session

    def _commit_batch(
        self,
        snapshot: _Snapshot,
        by_key: dict[str, Check],
        writes: dict[str, Op],
        owners: dict[str, CassandraSession],
        commit_id: str,
    ) -> tuple[Batch, dict[str, int]]:
        """The conditional batch applying ``writes`` to the state ``snapshot`` read (checks hold there).

        Raises:
            SessionLostError: a new ephemeral key names a session whose lease row is gone.
        """
        ns, rev = self._ns, snapshot.rev
        assert rev is not None
        batch = self._connection.batch()
        batch.add(cql.BUMP_REV, (rev + 1, ns, rev))
        change = json.dumps({"id": commit_id, "keys": sorted(writes)}).encode()
        batch.add(cql.LOG_CHANGE, (ns, change_key(rev + 1), change, CHANGE_LOG_TTL_S))
        versions: dict[str, int] = {}
        held_leases: set[str] = set()
        for key in by_key:
            row, op = snapshot.kv.get(key), writes.get(key)
            if row is None:
                if isinstance(op, Put):
                    versions[key] = 1
                    self._add_create(batch, snapshot, key, op.value, owner=owners.get(key), held_leases=held_leases)
                continue  # absent and only checked: only a commit (which moves rev) can create it
            version, owner_id = int(row["version"]), row["session"]
            if op is None:
                if owner_id is not None:  # it may expire before the batch: hold it to its version
                    batch.add(cql.HOLD_KEY, (ns, key, version))
            elif isinstance(op, Delete):
                batch.add(cql.DELETE_KEY, (ns, key, version))
                if owner_id is not None:
                    batch.add(cql.DROP_SESSION_ROW, (ns, index_key(owner_id, key)))
            elif owner_id is None:
                versions[key] = version + 1
                batch.add(cql.UPDATE_KEY, (op.value, version + 1, ns, key, version))
            else:
                versions[key] = version + 1
                left = max(1, int(row["ttl"] or 1))
                batch.add(cql.UPDATE_EPHEMERAL, (left, op.value, version + 1, owner_id, ns, key, version, owner_id))
                batch.add(cql.INDEX_EPHEMERAL, (ns, index_key(owner_id, key), owner_id, left + INDEX_GRACE_S))
        return batch, versions

    def _add_create(
        self,
        batch: Batch,
        snapshot: _Snapshot,
        key: str,
        value: bytes,
        *,
        owner: CassandraSession | None,
        held_leases: set[str],
    ) -> None:
        ns = self._ns
        if owner is None:
            batch.add(cql.CREATE_KEY, (ns, key, value))
            return
        lease = snapshot.leases.get(owner.id)
        if lease is None:
            owner.mark_lost()
            raise SessionLostError(f"session {owner.id} has ended (its lease row is gone)")
        left = max(1, int(lease["ttl"] or owner.lease_s))
        batch.add(cql.CREATE_EPHEMERAL, (ns, key, value, owner.id, left))
        batch.add(cql.INDEX_EPHEMERAL, (ns, index_key(owner.id, key), owner.id, left + INDEX_GRACE_S))
        if owner.id not in held_leases:  # the lease row must still exist when the batch applies
            held_leases.add(owner.id)
            batch.add(cql.RENEW_SESSION, (left, owner.lease_s, ns, owner.id))

    async def _applied(self, commit_id: str, rev: int) -> bool:
        """Whether the commit ``commit_id``, sent against revision ``rev``, applied (outcome was unknown).

        A SERIAL read finishes any Paxos round in flight or makes sure it can never be accepted,
        so afterwards the change-log row ``rev + 1`` names the commit that won that revision.

        Raises:
            UnavailableError: the read failed too; the outcome stays unknown.
        """
        snapshot = await self._snapshot([(cql.KIND_META, cql.REV_KEY), (cql.KIND_CHANGES, change_key(rev + 1))])
        row = snapshot.changes.get(change_key(rev + 1))
        if row is None:
            return False
        return bool(json.loads(bytes(row["value"])).get("id") == commit_id)

    # -- sessions --------------------------------------------------------------------------

    async def open_session(self, ttl_s: float) -> CassandraSession:
        if ttl_s <= 0:
            raise ValueError(f"session ttl must be positive, not {ttl_s}")
        lease = lease_seconds(ttl_s)
        session_id = uuid.uuid4().hex
        sent = time.monotonic()  # the node writes the lease row after this
        await self._connection.execute(cql.OPEN_SESSION, (self._ns, session_id, lease, lease))
        session = CassandraSession(self, session_id, lease, sent, time.monotonic())
        self._sessions[session_id] = session
        session.start()
        return session

    def _nudge_sessions(self) -> None:
        for session in self._sessions.values():
            session.nudge()

    def forget_session(self, session: CassandraSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]

    async def renew_lease(self, session_id: str, lease_s: int, timeout_s: float) -> bool:
        """Renew the lease row and rewrite the session's ephemeral keys with the full TTL.

        Returns:
            False if the lease row is gone (expired or ended), True once renewed.

        Raises:
            UnavailableError: the cluster did not answer within ``timeout_s``.
        """
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    outcome = await self._renew_once(session_id, lease_s)
                    if outcome is not None:
                        return outcome
        except TimeoutError:
            raise UnavailableError(f"cassandra: renewing session {session_id} took over {timeout_s:.1f} s") from None

    async def _renew_once(self, session_id: str, lease_s: int) -> bool | None:
        """One renewal attempt: True/False as :meth:`renew_lease`, None when a key moved meanwhile."""
        ns = self._ns
        index = await self._connection.execute(
            cql.SELECT_SESSION_SLICE, (ns, session_id, session_id + "0"), serial=True
        )
        if not any(row["key"] == session_id for row in index):
            return False
        keys = [row["key"][len(session_id) + 1 :] for row in index if row["key"] != session_id]
        snapshot = await self._snapshot((cql.KIND_KV, key) for key in keys) if keys else _Snapshot()
        # Idempotent: every row is written as it is, under conditions a first application leaves true.
        batch = self._connection.batch(idempotent=True)
        batch.add(cql.RENEW_SESSION, (lease_s, lease_s, ns, session_id))
        for key, row in snapshot.kv.items():
            if row["session"] != session_id:
                continue  # deleted and created again by someone else, who dropped our index row
            version = int(row["version"])
            params = (lease_s, row["value"], version, session_id, ns, key, version, session_id)
            batch.add(cql.UPDATE_EPHEMERAL, params)
            batch.add(cql.INDEX_EPHEMERAL, (ns, index_key(session_id, key), session_id, lease_s + INDEX_GRACE_S))
        applied, current = await batch.apply()
        return renewal_outcome(applied, current, session_id)

    async def end_lease(self, session_id: str) -> None:
        """Delete the session's ephemeral keys (a commit: watchers see it) and its lease row.

        Raises:
            UnavailableError: the cluster could not be reached; the TTL removes the rows instead.
        """
        ns = self._ns
        deadline = time.monotonic() + COMMIT_DEADLINE_S
        while time.monotonic() < deadline:
            index = await self._connection.execute(
                cql.SELECT_SESSION_SLICE, (ns, session_id, session_id + "0"), serial=True
            )
            keys = [row["key"][len(session_id) + 1 :] for row in index if row["key"] != session_id]
            has_lease = len(keys) < len(index)
            snapshot = await self._snapshot([(cql.KIND_META, cql.REV_KEY), *((cql.KIND_KV, key) for key in keys)])
            owned = {key: row for key, row in snapshot.kv.items() if row["session"] == session_id}
            batch = self._connection.batch()
            if owned and snapshot.rev is not None:
                rev = snapshot.rev
                batch.add(cql.BUMP_REV, (rev + 1, ns, rev))
                change = json.dumps({"id": uuid.uuid4().hex, "keys": sorted(owned)}).encode()
                batch.add(cql.LOG_CHANGE, (ns, change_key(rev + 1), change, CHANGE_LOG_TTL_S))
                for key, row in owned.items():
                    batch.add(cql.DELETE_KEY, (ns, key, int(row["version"])))
                batch.add(cql.DROP_SESSION_ROW, (ns, session_id))
            elif has_lease:
                batch.add(cql.END_SESSION, (ns, session_id))
            else:
                return  # nothing left (index rows of deleted keys expire by themselves)
            for key in keys:
                batch.add(cql.DROP_SESSION_ROW, (ns, index_key(session_id, key)))
            applied, _ = await batch.apply()
            if applied:
                return
        raise UnavailableError(f"cassandra: could not end session {session_id} in {COMMIT_DEADLINE_S:.0f} s")

    # -- watches and closing ---------------------------------------------------------------

    def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        return watch_prefix(self._connection, self._ns, prefix, self._closed)

    async def close(self) -> None:
        """End every open session (deleting its keys), stop the watches, close the connection."""
        if self._closed.is_set():
            return
        sessions = list(self._sessions.values())
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)
        self._closed.set()
        await self._connection.close()
