"""Group membership, written once over any Metastore (kazoo's Party, Kafka's /brokers/ids).

A member is the ephemeral key ``groups/<group>/<member>`` of the joining session: it vanishes when
that session ends or its process dies. Joining with an id still held by another (maybe dying)
session waits for that key to go, like a broker restarted under the same id waits for its previous
registration to expire; it gives up after ``wait_s`` with KeyExistsError.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from .api import Check, Delete, Metastore, Put, Session, SessionState
from .errors import KeyExistsError, SessionLostError, VersionConflictError

__all__ = ["GroupMembership"]


class GroupMembership:
    def __init__(self, metastore: Metastore, group: str) -> None:
        self.metastore = metastore
        self.group = group
        self.prefix = f"groups/{group}/"

    def _key(self, member_id: str) -> str:
        if not member_id or "/" in member_id:
            raise ValueError(f"member id {member_id!r} must be non-empty and contain no '/'")
        return self.prefix + member_id

    async def join(self, session: Session, member_id: str, data: bytes = b"", wait_s: float | None = None) -> None:
        """Join (or update this session's data); wait up to ``wait_s`` (default: the session TTL
        plus a margin) for a previous holder of ``member_id`` to vanish.

        Raises:
            KeyExistsError: another live session still holds ``member_id`` after ``wait_s``.
            SessionLostError: ``session`` has ended.
        """
        key = self._key(member_id)
        deadline = asyncio.get_running_loop().time() + (wait_s if wait_s is not None else 2 * session.ttl_s + 5)
        watch = self.metastore.watch(key)
        try:
            while True:
                if session.state is SessionState.LOST:
                    raise SessionLostError(f"session {session.id} has ended")
                current = await self.metastore.get(key)
                try:
                    if current is None:
                        await self.metastore.commit([Check(key, 0)], [Put(key, data, session)])
                        return
                    if current.session_id == session.id:
                        await self.metastore.commit([Check(key, current.version)], [Put(key, data)])
                        return
                except VersionConflictError:
                    continue
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    raise KeyExistsError(key)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):  # not wait_for: it can swallow a cancel
                        await anext(watch)
        finally:
            await watch.aclose()

    async def leave(self, session: Session, member_id: str) -> bool:
        """Leave if ``session`` holds ``member_id``; False if it did not."""
        key = self._key(member_id)
        current = await self.metastore.get(key)
        if current is None or current.session_id != session.id:
            return False
        try:
            await self.metastore.commit([Check(key, current.version)], [Delete(key)])
        except VersionConflictError:
            return False
        return True

    async def member(self, member_id: str) -> bytes | None:
        """One member's data, None if it is not a member now."""
        current = await self.metastore.get(self._key(member_id))
        return current.value if current is not None else None

    async def members(self) -> dict[str, bytes]:
        """Current members and their data."""
        found = await self.metastore.list(self.prefix)
        return {key[len(self.prefix) :]: versioned.value for key, versioned in found.items()}

    async def watch(self) -> AsyncIterator[dict[str, bytes]]:
        """The members now, then again whenever they may have changed (repeats are possible)."""
        events = self.metastore.watch(self.prefix)
        try:
            async for _ in events:
                yield await self.members()
        finally:
            await events.aclose()
