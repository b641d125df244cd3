"""Proxy nodes finding each other through the coordination layer: the group ``proxies``.

With ``coordination.url`` each proxy node joins the group ``proxies`` (any backend) under its node id,
its advertised address and rack as the member's data, on a session of ``proxy.session.timeout.ms``;
a node that dies leaves the group when its session does, so it leaves every other node's Metadata
within that timeout, with no probing. Every node reads the same members, so every node answers
Metadata alike. A lost session (a long coordination outage) is replaced by a new one and the node
joins again.

A process that took over from another by a hot restart starts following the group without joining
it (the old process is still the member under this node id), and joins once the old one has left
(``join_later``): it retries while the id is held, so a leave that failed only delays it until the
old session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from barnabas.coordination import (
    CoordinationError,
    GroupMembership,
    KeyExistsError,
    Session,
    SessionState,
    Storage,
    wait_until_lost,
)

from .nodes import ProxyNode, ProxyNodes

__all__ = ["PROXIES_GROUP", "ProxyMembership"]

log = logging.getLogger(__name__)

PROXIES_GROUP = "proxies"
#: Seconds between attempts to open a new session after one was lost.
REJOIN_BACKOFF_S = 1.0


class ProxyMembership:
    def __init__(self, storage: Storage, nodes: ProxyNodes, session_timeout_s: float) -> None:
        self._storage = storage
        self.nodes = nodes
        self.session_timeout_s = session_timeout_s
        self._session: Session | None = None
        #: The session this node last joined the group with.
        self._joined_with: Session | None = None
        self._membership = GroupMembership(storage.metastore, PROXIES_GROUP)
        self._tasks: list[asyncio.Task[None]] = []
        #: Started without joining (a hot restart), and not joined yet.
        self.waiting_to_join = False

    async def start(self, *, join: bool = True) -> None:
        """Start following the group's members, joining it first (or later, by ``join_later``, if not ``join``).

        Raises:
            CoordinationError: the store cannot be reached, or another live node holds this node id.
        """
        if join:
            await self._join()
        self._apply(await self._membership.members())
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow(), name="proxy members")]
        if join:
            self._tasks.append(loop.create_task(self._keep_joined(), name="proxy session keeper"))
        self.waiting_to_join = not join

    def join_later(self) -> None:
        """Join the group once this node id is free (the process a hot restart replaced leaves it), then keep joined."""

        async def join_then_keep() -> None:
            await self._join_until_joined("joining")
            self.waiting_to_join = False
            await self._keep_joined()

        self._tasks.append(asyncio.get_running_loop().create_task(join_then_keep(), name="proxy session keeper"))

    async def _join(self) -> None:
        me = self.nodes.me
        session = await self._storage.metastore.open_session(self.session_timeout_s)
        data = json.dumps({"host": me.host, "port": me.port, "rack": me.rack}).encode()
        try:
            await self._membership.join(session, str(me.node_id), data)
        except BaseException as exc:
            with contextlib.suppress(CoordinationError):
                await session.close()  # a session per attempt: a failed one must not linger
            if isinstance(exc, KeyExistsError):
                raise CoordinationError(
                    f"proxy node id {me.node_id} is held by another live proxy node; set proxy.node.id"
                ) from None
            raise
        self._session = self._joined_with = session
        log.info("proxy node %d joined the group %s", me.node_id, PROXIES_GROUP)

    @property
    def joined(self) -> bool:
        """Whether this node is a member of the group now: joined, on a session still connected."""
        session = self._session
        return session is not None and session is self._joined_with and session.state is SessionState.CONNECTED

    async def _follow(self) -> None:
        async for members in self._membership.watch():
            self._apply(members)

    def _apply(self, members: dict[str, bytes]) -> None:
        nodes = []
        for member_id, data in members.items():
            try:
                fields = json.loads(data)
                nodes.append(ProxyNode(int(member_id), str(fields["host"]), int(fields["port"]), fields.get("rack")))
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring proxy group member %r with unreadable data %r", member_id, data[:100])
        if self.nodes.replace(nodes):
            log.info("proxy nodes: %s", ", ".join(f"{n.node_id}={n.address}" for n in self.nodes.up()))

    async def _keep_joined(self) -> None:
        """When the session is lost, open a new one and join again (until stopped)."""
        while True:
            session = self._session
            assert session is not None
            await wait_until_lost(session)
            log.error("proxy node %d lost its coordination session; joining again", self.nodes.me.node_id)
            await self._join_until_joined("joining again")

    async def _join_until_joined(self, what: str) -> None:
        while True:
            try:
                await self._join()
                return
            except CoordinationError as exc:
                log.warning("%s failed (%s); retrying", what, exc)
                await asyncio.sleep(REJOIN_BACKOFF_S)

    async def stop(self) -> None:
        """Leave the group: the others drop this node at once."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._session is not None:
            with contextlib.suppress(CoordinationError):
                await self._membership.leave(self._session, str(self.nodes.me.node_id))
            with contextlib.suppress(CoordinationError):
                await self._session.close()
