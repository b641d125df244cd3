"""A session is an etcd lease, kept alive by its own task (aetcd has no automatic refresh).

Rules this module keeps (coordination.md §3):

- The session id is the lease id in decimal. Ephemeral keys are put with the lease, so etcd deletes
  them itself when the lease is revoked or expires; nothing here deletes keys.
- A keepalive is sent every TTL/3, and at once when the channel to the current member drops, each
  on a fresh LeaseKeepAlive stream bounded by a deadline (a long-lived stream can hang silently;
  martyanov/aetcd#33), never past the lease's end. With several members the deadline is a third of
  the TTL, so a member that stopped answering leaves time to renew through another. With one
  there is nowhere else to go and the deadline is two thirds, so a member a third of the TTL away
  (a 1 s round trip on a 3 s session) still renews it: a third lost every such session. After a
  failure it is retried at once on the next endpoint, then every :data:`RETRY_INTERVAL_S`.
- While a keepalive is out, the session is SUSPENDED once no answer has come for two thirds of the
  TTL (kazoo's read timeout), before the lease could end.
- A keepalive still out :data:`BEAT_GRACE_S` past its deadline is dropped as unanswered: the state
  machine never waits on a gRPC call's own deadline alone. A network-partition run once left a
  session SUSPENDED from its first keepalive onwards, never LOST, while its lease ended on the server
  and the broker stayed out of every ISR, registered nowhere and never registering again.
- The three states are decided in :func:`state_after` alone: a keepalive answered with TTL > 0 is
  CONNECTED; an answer that the lease is gone (TTL <= 0, "lease not found") is LOST; an unanswered
  one is SUSPENDED until TTL has passed since the last answered keepalive was *sent* (the server
  counts from when it received it, never earlier), then LOST.
- LOST decided by our clock alone is not proof the server dropped the lease: etcd renews every
  lease when a new leader is elected or a member restarts. So after such a LOST the task keeps
  trying to revoke the lease until etcd confirms it is gone or the metastore closes; the keys are
  then gone for everyone, as LOST promises.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
from aetcd import rpc

from ...api import SessionState
from ...errors import SessionLostError, UnavailableError
from .._session import SessionBase
from ._connection import CONNECT_SLICE_S, REQUIRE_LEADER, Connection, Stubs, translate

__all__ = ["Beat", "EtcdSession", "state_after"]

log = logging.getLogger(__name__)

#: Seconds between keepalive attempts while SUSPENDED (capped at TTL/3).
RETRY_INTERVAL_S = 0.25
#: Seconds between revoke attempts after a LOST decided by the clock.
REVOKE_INTERVAL_S = 1.0
#: Seconds a keepalive may run past its deadline before it is dropped as unanswered.
BEAT_GRACE_S = 0.5


class Beat(enum.Enum):
    """What one keepalive attempt learned."""

    ALIVE = "alive"  # etcd renewed the lease
    GONE = "gone"  # etcd says the lease does not exist (expired or revoked)
    UNANSWERED = "unanswered"  # no member answered in time


def state_after(beat: Beat, since_alive_s: float, ttl_s: float) -> SessionState:
    """The session state after a keepalive attempt (kazoo's three states, mapped here only).

    Args:
        beat: what the attempt learned.
        since_alive_s: seconds since the last keepalive that etcd answered was sent.
        ttl_s: the lease's granted TTL.
    """
    if beat is Beat.ALIVE:
        return SessionState.CONNECTED
    if beat is Beat.GONE or since_alive_s >= ttl_s:
        return SessionState.LOST
    return SessionState.SUSPENDED


class EtcdSession(SessionBase):
    """An etcd lease with a keepalive task; ephemeral keys are put with :attr:`lease_id`."""

    def __init__(
        self,
        connection: Connection,
        lease_id: int,
        ttl_s: float,
        granted_at: float,
        on_close: Callable[[EtcdSession], None] | None = None,
    ) -> None:
        super().__init__(str(lease_id), ttl_s)
        self.lease_id = lease_id
        self._connection = connection
        self._on_close = on_close
        self._last_alive = granted_at
        #: When the last answered keepalive's answer came (its own clock: when to say SUSPENDED).
        self._last_answer = granted_at
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def grant(
        cls, connection: Connection, ttl_s: float, on_close: Callable[[EtcdSession], None] | None = None
    ) -> EtcdSession:
        """Ask etcd for a lease (whole seconds, at least 1; etcd may raise it to its minimum).

        Raises:
            UnavailableError: no member granted it in time.
        """
        ttl = max(1, int(-(-ttl_s // 1)))
        sent = time.monotonic()

        async def call(stubs: Stubs, timeout: float) -> Any:
            # The lease's time counts from the attempt that got it, not from the first: a grant that waited
            # seconds for a member (a healed partition) was otherwise born at the end of its TTL, SUSPENDED
            # before its first keepalive and LOST if that one was not answered at once.
            nonlocal sent
            sent = time.monotonic()
            return await stubs.lease.LeaseGrant(
                rpc.LeaseGrantRequest(TTL=ttl), timeout=timeout, metadata=REQUIRE_LEADER
            )

        # A grant whose answer is lost leaves an orphan lease that expires on its own: retrying is safe.
        response = await connection.read("lease grant", call)
        session = cls(connection, int(response.ID), float(response.TTL), sent, on_close)
        session._task = asyncio.get_running_loop().create_task(session._keep_alive(), name=f"etcd-lease-{response.ID}")
        return session

    def mark_lost(self) -> None:
        """etcd told someone else this lease is gone (a commit got "lease not found")."""
        self._set_state(SessionState.LOST)

    async def _keep_alive(self) -> None:
        interval = self.ttl_s / 3
        patience = interval if len(self._connection.address.endpoints) > 1 else 2 * interval
        try:
            while self.state is not SessionState.LOST:
                now = time.monotonic()
                if self.state is SessionState.CONNECTED:
                    # Beat early if the connection drops: SUSPENDED (or a fail-over) at once, as kazoo does.
                    if await self._connection.wait_trouble(self._last_alive + interval - now):
                        return
                else:
                    delay = min(RETRY_INTERVAL_S, interval, self._last_alive + self.ttl_s - now)
                    if delay > 0 and await self._connection.wait_closed(delay):
                        return
                sent = time.monotonic()
                beat = await self._watched_beat(min(sent + patience, self._last_alive + self.ttl_s))
                if beat is Beat.ALIVE:
                    self._last_alive = sent
                    self._last_answer = time.monotonic()
                self._set_state(state_after(beat, time.monotonic() - self._last_alive, self.ttl_s))
                if beat is Beat.GONE:
                    return
            await self._revoke_until_gone()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not go unnoticed, nor leave the session CONNECTED
            log.exception("keepalive of etcd session %s failed", self.id)
            self._set_state(SessionState.LOST)

    async def _watched_beat(self, deadline: float) -> Beat:
        """:meth:`_beat`, SUSPENDED meanwhile once nothing has been answered for two thirds of the TTL, and
        UNANSWERED once it overruns ``deadline`` by :data:`BEAT_GRACE_S`."""
        beat = asyncio.ensure_future(self._beat(deadline))
        try:
            quiet_until = self._last_answer + 2 * self.ttl_s / 3
            done, _ = await asyncio.wait({beat}, timeout=max(0.0, quiet_until - time.monotonic()))
            if not done:
                self._set_state(SessionState.SUSPENDED)
            done, _ = await asyncio.wait({beat}, timeout=max(0.0, deadline - time.monotonic()) + BEAT_GRACE_S)
            if not done:
                log.warning(
                    "keepalive of etcd session %s ran %.1f s past its deadline; unanswered", self.id, BEAT_GRACE_S
                )
                return Beat.UNANSWERED
            return beat.result()
        finally:
            beat.cancel()

    async def _beat(self, deadline: float) -> Beat:
        """One keepalive, over the current endpoint and then once over each other, until ``deadline``."""
        for _ in self._connection.address.endpoints:
            try:
                # Not connected within half a second: report it (SUSPENDED) and keep retrying.
                stubs = await self._connection.ready(min(deadline, time.monotonic() + CONNECT_SLICE_S))
            except UnavailableError:
                return Beat.UNANSWERED
            timeout = max(0.001, deadline - time.monotonic())
            try:
                return await self._keepalive_call(stubs, timeout)
            except grpc.aio.AioRpcError as exc:
                error = translate(exc, "keepalive")
                if isinstance(error, SessionLostError):
                    return Beat.GONE
                if not isinstance(error, UnavailableError):  # not proof the lease ended: let the TTL decide
                    log.warning("keepalive of etcd session %s: %s", self.id, error)
                    return Beat.UNANSWERED
                log.debug("keepalive of session %s via %s failed: %s", self.id, stubs.endpoint, exc.details())
                self._connection.failed(stubs)
                if time.monotonic() >= deadline:
                    return Beat.UNANSWERED
        return Beat.UNANSWERED

    async def _keepalive_call(self, stubs: Stubs, timeout: float) -> Beat:
        """One LeaseKeepAlive on a fresh stream, bounded by ``timeout`` (gRPC's deadline).

        Raises:
            grpc.aio.AioRpcError: the call failed.
        """
        call = stubs.lease.LeaseKeepAlive(
            iter([rpc.LeaseKeepAliveRequest(ID=self.lease_id)]), timeout=timeout, metadata=REQUIRE_LEADER
        )
        async for response in call:
            return Beat.ALIVE if response.TTL > 0 else Beat.GONE
        return Beat.UNANSWERED

    async def _revoke(self, deadline: float) -> bool:
        """Revoke the lease; True once etcd confirms it is gone (revoked now or already)."""
        try:
            stubs = await self._connection.ready(deadline)
        except UnavailableError:
            return False
        try:
            await stubs.lease.LeaseRevoke(
                rpc.LeaseRevokeRequest(ID=self.lease_id),
                timeout=max(0.001, deadline - time.monotonic()),
                metadata=REQUIRE_LEADER,
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.NOT_FOUND:
                return True
            self._connection.failed(stubs)
            log.debug("revoke of session %s failed: %s", self.id, exc.details())
            return False
        return True

    async def _revoke_until_gone(self) -> None:
        while not await self._revoke(time.monotonic() + self._connection.timeout_s):
            if await self._connection.wait_closed(REVOKE_INTERVAL_S):
                return
        log.info("etcd session %s: lease revoked after being lost", self.id)

    async def close(self) -> None:
        """Revoke the lease (its ephemeral keys go at once) and become LOST.

        If etcd cannot be reached the lease is left to expire (keys go within the TTL); a close
        never raises for that, as it usually runs on the way out.
        """
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                if (task := asyncio.current_task()) is not None and task.cancelling():
                    raise
        if not self._connection.is_closed() and not await self._revoke(time.monotonic() + self._connection.timeout_s):
            log.warning("etcd session %s: could not revoke its lease; it expires within %.0f s", self.id, self.ttl_s)
        self._set_state(SessionState.LOST, closed=True)
