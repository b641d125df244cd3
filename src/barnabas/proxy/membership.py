"""Proxy nodes finding each other through the coordination layer: the group ``proxies``.

With ``coordination.url`` each proxy node joins the group ``proxies`` (any backend) under its node id,
its advertised address and rack as the member's data, on a session of ``proxy.session.timeout.ms``;
a node that dies leaves the group when its session does, so it leaves every other node's Metadata
within that timeout, with no probing. Every node reads the same members, so every node answers
Metadata alike. A lost session (a long coordination outage) is replaced by a new one and the node
joins again.
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

    async def start(self) -> None:
        """Join the group and start following its members.

        Raises:
            CoordinationError: the store cannot be reached, or another live node holds this node id.
        """
        await self._join()
        self._apply(await self._membership.members())
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._follow(), name="proxy members"),
            loop.create_task(self._keep_joined(), name="proxy session keeper"),
        ]

    async def _join(self) -> None:
        me = self.nodes.me
        self._session = await self._storage.metastore.open_session(self.session_timeout_s)
        data = json.dumps({"host": me.host, "port": me.port, "rack": me.rack}).encode()
        try:
            await self._membership.join(self._session, str(me.node_id), data)
            self._joined_with = self._session
        except KeyExistsError:
            raise CoordinationError(
                f"proxy node id {me.node_id} is held by another live proxy node; set proxy.node.id"
            ) from None

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
            while True:
                try:
                    await self._join()
                    break
                except CoordinationError as exc:
                    log.warning("joining again failed (%s); retrying", exc)
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
