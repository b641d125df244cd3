"""Leader election with a fencing epoch, written once over any Metastore.

The ZooKeeper-mode Kafka controller election (KafkaZkClient.registerControllerAndIncrementControllerEpoch),
re-expressed on the Metastore contract:

- ``elections/<name>/leader`` is an ephemeral key of the winner's session (candidate id, epoch, data).
- ``elections/<name>/epoch`` is a persistent key whose *version is the epoch*: winning is one atomic
  commit that creates the leader key (checked absent) and writes the epoch key (checked at the
  version it had), so every win bumps the epoch by exactly one and no two winners share an epoch.
- A fence (election, epoch) holds while the epoch key is still at that version and a leader key
  exists; Storage.fenced_write adds those two checks to any commit. Epochs therefore increase
  strictly and survive restarts; the epoch key must never be deleted.

Rules: a candidate waits by watching the leader key, never by polling; a leader whose session is
SUSPENDED must stop acting on its leadership until the session is CONNECTED again (its fence is
still valid if it was not replaced) and loses it for good on LOST.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from .api import Check, Delete, Metastore, Put, Session, SessionState, Versioned
from .errors import SessionLostError, VersionConflictError

__all__ = ["Fence", "Leader", "LeaderElection", "election_keys", "fence_checks"]


def election_keys(name: str) -> tuple[str, str]:
    """(leader key, epoch key) of election ``name``."""
    return f"elections/{name}/leader", f"elections/{name}/epoch"


@dataclass(frozen=True, slots=True)
class Fence:
    """Proof of leadership: writes made under it fail once a newer epoch exists."""

    election: str
    epoch: int


def fence_checks(fence: Fence) -> list[Check]:
    """The checks that make a commit conditional on ``fence`` still being current."""
    leader_key, epoch_key = election_keys(fence.election)
    return [Check(epoch_key, fence.epoch), Check(leader_key, None)]


@dataclass(frozen=True, slots=True)
class Leader:
    """The current winner of an election."""

    candidate: str
    epoch: int
    data: bytes
    session_id: str | None

    @classmethod
    def from_versioned(cls, versioned: Versioned) -> Leader:
        document = json.loads(versioned.value)
        return cls(
            candidate=document["candidate"],
            epoch=int(document["epoch"]),
            data=bytes.fromhex(document.get("data", "")),
            session_id=versioned.session_id,
        )


class LeaderElection:
    """One named election; several candidates (processes) may run for it at once."""

    def __init__(self, metastore: Metastore, name: str) -> None:
        self.metastore = metastore
        self.name = name
        self.leader_key, self.epoch_key = election_keys(name)

    async def leader(self) -> Leader | None:
        """The current leader, or None while the seat is empty."""
        current = await self.metastore.get(self.leader_key)
        return Leader.from_versioned(current) if current is not None else None

    async def nominate(self, session: Session, candidate: str, data: bytes = b"") -> Fence:
        """Run for leader and return once elected (or at once if ``session`` already leads).

        Raises:
            SessionLostError: ``session`` ended before winning.
        """
        watch = self.metastore.watch(self.leader_key)
        try:
            while True:
                if session.state is SessionState.LOST:
                    raise SessionLostError(f"session {session.id} ended while running for {self.name}")
                current = await self.metastore.get(self.leader_key)
                if current is not None and current.session_id == session.id:
                    return Fence(self.name, Leader.from_versioned(current).epoch)
                if current is None:
                    fence = await self._try_win(session, candidate, data)
                    if fence is not None:
                        return fence
                    continue
                await _next_event(watch, session)
        finally:
            await watch.aclose()

    async def _try_win(self, session: Session, candidate: str, data: bytes) -> Fence | None:
        epoch_record = await self.metastore.get(self.epoch_key)
        epoch_version = epoch_record.version if epoch_record is not None else 0
        epoch = epoch_version + 1
        leader_document = json.dumps({"candidate": candidate, "epoch": epoch, "data": data.hex()}).encode()
        epoch_document = json.dumps({"candidate": candidate}).encode()
        try:
            await self.metastore.commit(
                [Check(self.leader_key, 0), Check(self.epoch_key, epoch_version)],
                [Put(self.leader_key, leader_document, session), Put(self.epoch_key, epoch_document)],
            )
        except VersionConflictError:
            return None
        return Fence(self.name, epoch)

    async def resign(self, fence: Fence) -> bool:
        """Give up leadership won under ``fence``; False if it had already been lost."""
        current = await self.metastore.get(self.leader_key)
        if current is None or Leader.from_versioned(current).epoch != fence.epoch:
            return False
        try:
            await self.metastore.commit(
                [Check(self.leader_key, current.version), Check(self.epoch_key, fence.epoch)],
                [Delete(self.leader_key)],
            )
        except VersionConflictError:
            return False
        return True

    async def watch(self) -> AsyncIterator[Leader | None]:
        """The leader now, then again whenever it may have changed (hints; repeats are possible)."""
        events = self.metastore.watch(self.leader_key)
        try:
            async for _ in events:
                yield await self.leader()
        finally:
            await events.aclose()


async def _next_event(watch: AsyncGenerator[object, None], session: Session) -> None:
    """Wait for the next watch event, but wake at once if ``session`` is lost."""
    lost = asyncio.get_running_loop().create_future()

    def on_state(state: SessionState) -> None:
        if state is SessionState.LOST and not lost.done():
            lost.set_result(None)

    session.add_state_listener(on_state)
    next_event = asyncio.ensure_future(anext(watch))
    try:
        await asyncio.wait({next_event, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        session.remove_state_listener(on_state)
        if not next_event.done():
            next_event.cancel()
        # Let the generator finish its step before anyone may aclose() it ("already running").
        await asyncio.wait({next_event})
    if not next_event.cancelled() and (error := next_event.exception()) is not None:
        raise error
