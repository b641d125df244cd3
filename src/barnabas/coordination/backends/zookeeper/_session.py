"""A barnabas Session is one ZooKeeper session: its own KazooClient.

Rules:

- Ephemeral znodes belong to the ZooKeeper session that created them, so every Session has its own
  client, and a commit that creates an ephemeral key runs entirely on that client.
- ``id`` is the ZooKeeper session id (hex), the same string ``Versioned.session_id`` reports from
  a znode's ``ephemeralOwner``; ``ttl_s`` is the timeout the server negotiated (it clamps the request
  into [minSessionTimeout, maxSessionTimeout], by default [2, 20] × tickTime). kazoo pings after
  a third of it without traffic; the server expires the session at most one tick after the timeout.
- States: SUSPENDED when the connection drops; CONNECTED when it is back on the same session (the
  server kept it); LOST when a server says the session expired, on ``close()``, or once no server
  has been reached for the session timeout (Curator's rule, ``_connection``): a client cut off from
  every server cannot hear of its expiry, and a broker partitioned from the ensemble must learn that
  it is no longer registered. LOST is final: the client is stopped rather than letting kazoo open a
  fresh session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...api import SessionState
from ...errors import SessionLostError, UnavailableError
from ._connection import KazooConnection
from ._layout import format_session_id

__all__ = ["ZooKeeperSession"]

log = logging.getLogger(__name__)


class ZooKeeperSession:
    """A lease: one ZooKeeper session, kept alive by kazoo's pings until closed or expired."""

    def __init__(self, connection: KazooConnection, zk_session_id: int, owner: object) -> None:
        self.connection = connection
        self.zk_session_id = zk_session_id
        self.owner = owner  # the metastore that opened it: its keys live in that metastore's chroot
        self._id = format_session_id(zk_session_id)
        self._listeners: list[Callable[[SessionState], None]] = []
        connection.listeners.append(self._notify)

    @classmethod
    async def open(cls, hosts: str, ttl_s: float, op_timeout_s: float, owner: object) -> ZooKeeperSession:
        """Start a ZooKeeper session asking for ``ttl_s`` as its timeout.

        Raises:
            UnavailableError: no server answered in time.
        """
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be positive, not {ttl_s}")
        connection = KazooConnection(hosts, ttl_s, op_timeout_s, final_loss=True)
        await connection.start()
        zk_session_id = connection.session_id
        if zk_session_id is None:  # lost again between CONNECTED and here
            await connection.stop()
            raise UnavailableError("the ZooKeeper session dropped while opening")
        return cls(connection, zk_session_id, owner)

    @property
    def id(self) -> str:
        return self._id

    @property
    def ttl_s(self) -> float:
        return self.connection.negotiated_timeout_s

    @property
    def state(self) -> SessionState:
        return self.connection.state

    def add_state_listener(self, listener: Callable[[SessionState], None]) -> None:
        self._listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[SessionState], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("session %s state listener %r failed", self._id, listener)

    def ensure_alive(self) -> None:
        """Raise SessionLostError if this session has ended (or kazoo has already seen it end)."""
        if self.connection.state is SessionState.LOST or self.connection.losses or self.connection.stopped:
            raise SessionLostError(f"session {self._id} has ended")

    async def close(self) -> None:
        """End the ZooKeeper session now: the server deletes its ephemerals before it replies."""
        await self.connection.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperSession({self._id}, ttl_s={self.ttl_s}, {self.state.name})"
