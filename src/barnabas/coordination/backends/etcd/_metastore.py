"""The Metastore over etcd's KV API: get, list, transactional commit, sessions and watches.

Rules this module keeps:

- Our key ``k`` is the etcd key ``<root>k`` (root ``/barnabas/`` by default), UTF-8.
- Our version is etcd's per-key ``version`` (1 on create, +1 per put, gone on delete), so a Check is
  one etcd compare: ``version == 0`` (absent), ``version > 0`` (present), ``version == n``.
- A commit is one etcd Txn: the checks are its compares, the ops its success branch, and its
  failure branch reads every checked key, so a failed commit names a failing key from the same
  snapshot without another round trip.
- A Put creating a key carries its session's lease (0 without a session); a Put of an existing key
  sets ``ignore_lease`` so the key keeps the lease it was created with. ``Versioned.session_id``
  is the key's lease id when it has one.
- Reads are linearizable (etcd's default); ``list`` pages through one revision, so it is one
  consistent snapshot however many keys match.
- etcd limits a Txn to 128 compares and 128 operations (``--max-txn-ops``) and 1.5 MiB
  (``--max-request-bytes``); larger commits raise ValueError.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import grpc
from aetcd import rpc

from ...api import Check, Delete, Op, Put, SessionState, Versioned, WatchEvent, check_ops_covered
from ...errors import KeyExistsError, NoSuchKeyError, SessionLostError, UnavailableError, VersionConflictError
from ._connection import REQUIRE_LEADER, Connection, EtcdAddress, Stubs, prefix_range_end
from ._session import EtcdSession
from ._watch import watch_prefix

__all__ = ["EtcdMetastore"]

log = logging.getLogger(__name__)

#: Keys per Range page in ``list`` (all pages read at the revision of the first).
LIST_PAGE = 1000
#: Times ``list`` restarts when compaction overtakes its snapshot revision between pages.
LIST_ATTEMPTS = 3


class EtcdMetastore:
    """Coordination state in one etcd cluster, under one key prefix."""

    def __init__(self, url: str, address: EtcdAddress) -> None:
        self._url = url
        self._root = address.root
        self._connection = Connection(address)
        self._sessions: set[EtcdSession] = set()

    @property
    def url(self) -> str:
        return self._url

    async def ping(self) -> None:
        """Fail fast when no member answers (used when opening).

        Raises:
            UnavailableError: no member answered within the request timeout.
        """

        async def call(stubs: Stubs, timeout: float) -> Any:
            request = rpc.RangeRequest(key=self._root, count_only=True)
            return await stubs.kv.Range(request, timeout=timeout, metadata=REQUIRE_LEADER)

        await self._connection.read("ping", call)

    # -- keys ------------------------------------------------------------------------------

    def _key(self, key: str) -> bytes:
        return self._root + key.encode()

    def _versioned(self, kv: Any) -> tuple[str, Versioned]:
        session_id = str(kv.lease) if kv.lease else None
        return kv.key[len(self._root) :].decode(), Versioned(bytes(kv.value), int(kv.version), session_id)

    async def get(self, key: str) -> Versioned | None:
        async def call(stubs: Stubs, timeout: float) -> Any:
            return await stubs.kv.Range(rpc.RangeRequest(key=self._key(key)), timeout=timeout, metadata=REQUIRE_LEADER)

        response = await self._connection.read(f"get {key!r}", call)
        return self._versioned(response.kvs[0])[1] if response.kvs else None

    async def list(self, prefix: str) -> dict[str, Versioned]:
        for _ in range(LIST_ATTEMPTS - 1):
            try:
                return await self._list_once(prefix)
            except _SnapshotCompactedError:
                log.info("list %r: snapshot revision compacted between pages; listing again", prefix)
        return await self._list_once(prefix)

    async def _list_once(self, prefix: str) -> dict[str, Versioned]:
        start = self._key(prefix)
        end = prefix_range_end(start)
        revision = 0
        found: dict[str, Versioned] = {}
        while True:
            request = rpc.RangeRequest(key=start, range_end=end, limit=LIST_PAGE, revision=revision)

            async def call(stubs: Stubs, timeout: float, request: Any = request) -> Any:
                try:
                    return await stubs.kv.Range(request, timeout=timeout, metadata=REQUIRE_LEADER)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is grpc.StatusCode.OUT_OF_RANGE:  # "required revision has been compacted"
                        raise _SnapshotCompactedError from exc
                    raise

            response = await self._connection.read(f"list {prefix!r}", call)
            revision = revision or response.header.revision
            for kv in response.kvs:
                key, versioned = self._versioned(kv)
                found[key] = versioned
            if not response.more or not response.kvs:
                return found
            start = bytes(response.kvs[-1].key) + b"\0"

    # -- commit ----------------------------------------------------------------------------

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        by_key = check_ops_covered(checks, ops)
        sessions = self._sessions_of(ops, by_key)
        success = [self._request_op(op, by_key[op.key]) for op in ops]
        failure = [
            rpc.RequestOp(request_range=rpc.RangeRequest(key=self._key(check.key), keys_only=True)) for check in checks
        ]
        request = rpc.TxnRequest(compare=[self._compare(check) for check in checks], success=success, failure=failure)

        async def call(stubs: Stubs, timeout: float) -> Any:
            return await stubs.kv.Txn(request, timeout=timeout, metadata=REQUIRE_LEADER)

        try:
            response = await self._connection.write("commit", call)
        except SessionLostError:
            if len(sessions) == 1:
                sessions.pop().mark_lost()
            raise
        if not response.succeeded:
            raise self._conflict(checks, response.responses)
        versions: dict[str, int] = {}
        for op, result in zip(ops, response.responses, strict=True):
            if isinstance(op, Put):
                expected = by_key[op.key].version
                if expected is None:
                    versions[op.key] = int(result.response_put.prev_kv.version) + 1
                else:
                    versions[op.key] = expected + 1
        return versions

    def _sessions_of(self, ops: Sequence[Op], by_key: dict[str, Check]) -> set[EtcdSession]:
        """The sessions whose leases this commit attaches to new keys; refuse ended ones."""
        sessions: set[EtcdSession] = set()
        for op in ops:
            if not isinstance(op, Put) or op.session is None:
                continue
            if not isinstance(op.session, EtcdSession):
                raise ValueError(f"Put of {op.key!r}: session {op.session.id} is not an etcd session")
            if op.session.state is SessionState.LOST:
                raise SessionLostError(f"Put of {op.key!r}: session {op.session.id} has ended")
            if op.session not in self._sessions:
                raise ValueError(f"Put of {op.key!r}: session {op.session.id} was not opened by this metastore")
            if by_key[op.key].version == 0:
                sessions.add(op.session)
        return sessions

    def _compare(self, check: Check) -> Any:
        if check.version is None:
            result, version = rpc.Compare.GREATER, 0
        else:
            result, version = rpc.Compare.EQUAL, check.version
        return rpc.Compare(key=self._key(check.key), target=rpc.Compare.VERSION, result=result, version=version)

    def _request_op(self, op: Op, check: Check) -> Any:
        key = self._key(op.key)
        if isinstance(op, Delete):
            return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key))
        if check.version == 0:  # creates the key: it takes the session's lease, for good
            lease = op.session.lease_id if isinstance(op.session, EtcdSession) else 0
            return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=op.value, lease=lease))
        put = rpc.PutRequest(key=key, value=op.value, ignore_lease=True, prev_kv=check.version is None)
        return rpc.RequestOp(request_put=put)

    @staticmethod
    def _conflict(checks: Sequence[Check], responses: Any) -> VersionConflictError:
        """The error for the first check the failure branch's snapshot contradicts."""
        for check, result in zip(checks, responses, strict=True):
            kvs = result.response_range.kvs
            actual = int(kvs[0].version) if kvs else 0
            if check.version == 0 and actual:
                return KeyExistsError(check.key)
            if check.version != 0 and not actual:
                return NoSuchKeyError(check.key)
            if check.version not in (None, actual):
                return VersionConflictError(check.key, f"{check.key}: version {actual}, expected {check.version}")
        return VersionConflictError(checks[0].key)  # unreachable: etcd found some compare false

    # -- sessions and watches --------------------------------------------------------------

    async def open_session(self, ttl_s: float) -> EtcdSession:
        if self._connection.is_closed():
            raise UnavailableError("the etcd metastore is closed")
        session = await EtcdSession.grant(self._connection, ttl_s, on_close=self._sessions.discard)
        self._sessions.add(session)
        return session

    async def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        events = watch_prefix(self._connection, self._root, prefix)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    async def close(self) -> None:
        """Revoke every open session's lease, then close the channels (watches end)."""
        sessions, self._sessions = self._sessions, set()
        await asyncio.gather(*(session.close() for session in sessions))
        await self._connection.close()


class _SnapshotCompactedError(Exception):
    """The revision ``list`` pages at was compacted: list again at a newer one."""
