"""Keep a broker's view of the cluster current: topics, partitions, brokers, controller and the cached stores.

Watches are hints (coordination api.py): a ``Resync`` re-reads a whole prefix, a ``Changed``
re-reads the keys it names, and nothing is ever taken from an event's content. After each
update ``on_change`` is called so the broker reconciles its replicas from the new state. If
coordination is unreachable the view stays as last read, and the broker keeps serving from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from barnabas.coordination import Changed, CoordinationError, LeaderElection, Metastore, WatchEvent

from .acls import AclStore
from .brokers import BrokerRegistry
from .client_quotas import ClientQuotaStore
from .controller import CONTROLLER_ELECTION
from .cordons import CordonStore
from .credentials import CredentialStore
from .topic_store import PARTITIONS_PREFIX, TOPICS_PREFIX, TopicStore

__all__ = ["MetadataWatcher"]

log = logging.getLogger(__name__)

#: Pause before a broken watch is opened again.
RETRY_S = 0.5


class MetadataWatcher:
    def __init__(
        self,
        metastore: Metastore,
        topics: TopicStore,
        brokers: BrokerRegistry,
        on_change: Callable[[], None],
        credentials: CredentialStore | None = None,
        *,
        acls: AclStore | None = None,
        client_quotas: ClientQuotaStore | None = None,
        cordons: CordonStore | None = None,
    ) -> None:
        self._metastore = metastore
        self._topics = topics
        self._brokers = brokers
        self._credentials = credentials
        self._acls = acls
        self._client_quotas = client_quotas
        self._cordons = cordons
        self._on_change = on_change
        self._election = LeaderElection(metastore, CONTROLLER_ELECTION)
        self._tasks: list[asyncio.Task[None]] = []
        #: The broker id of the current controller, -1 while there is none.
        self.controller_id = -1

    async def refresh_all(self) -> None:
        """Read brokers and controller now (at start, before anything acts on the view).

        Topics were loaded by the broker already, and every watch starts with a Resync that
        re-reads its prefix, so nothing written meanwhile is missed.
        """
        await self._brokers.refresh()
        await self._refresh_controller()

    def start(self) -> None:
        watches: list[tuple[str, Callable[[WatchEvent], Awaitable[None]]]] = [
            (TOPICS_PREFIX, self._apply_topics),
            (PARTITIONS_PREFIX, self._apply_topics),
            (self._brokers.prefix, self._apply_brokers),
            (self._election.leader_key, self._apply_controller),
        ]
        if self._credentials is not None:
            watches.append((self._credentials.prefix, self._apply_credentials))
        if self._acls is not None:
            watches.append((self._acls.prefix, self._apply_acls))
        if self._client_quotas is not None:
            watches.append((self._client_quotas.prefix, self._apply_client_quotas))
        if self._cordons is not None:
            watches.append((self._cordons.prefix, self._apply_cordons))
        for prefix, apply in watches:
            self._tasks.append(asyncio.create_task(self._follow(prefix, apply), name=f"watch {prefix}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _follow(self, prefix: str, apply: Callable[[WatchEvent], Awaitable[None]]) -> None:
        while True:
            try:
                async for event in self._metastore.watch(prefix):
                    await apply(event)
                    self._on_change()
            except CoordinationError as exc:
                log.warning("watch on %r broke (%s); the view stays as last read until it is back", prefix, exc)
            except Exception:
                log.exception("applying a watch event on %r failed", prefix)
            await asyncio.sleep(RETRY_S)

    async def _apply_topics(self, event: WatchEvent) -> None:
        if isinstance(event, Changed):
            await self._topics.refresh(event.keys)
        else:
            await self._topics.load()

    async def _apply_credentials(self, event: WatchEvent) -> None:
        assert self._credentials is not None
        if isinstance(event, Changed):
            await self._credentials.refresh(event.keys)
        else:
            await self._credentials.load()

    async def _apply_acls(self, event: WatchEvent) -> None:
        assert self._acls is not None
        if isinstance(event, Changed):
            await self._acls.refresh(event.keys)
        else:
            await self._acls.load()

    async def _apply_client_quotas(self, event: WatchEvent) -> None:
        assert self._client_quotas is not None
        if isinstance(event, Changed):
            await self._client_quotas.refresh(event.keys)
        else:
            await self._client_quotas.load()

    async def _apply_cordons(self, event: WatchEvent) -> None:
        assert self._cordons is not None
        if isinstance(event, Changed):
            await self._cordons.refresh(event.keys)
        else:
            await self._cordons.load()

    async def _apply_brokers(self, _: WatchEvent) -> None:
        await self._brokers.refresh()

    async def _apply_controller(self, _: WatchEvent) -> None:
        await self._refresh_controller()

    async def _refresh_controller(self) -> None:
        leader = await self._election.leader()
        try:
            self.controller_id = int(leader.candidate) if leader is not None else -1
        except ValueError:
            self.controller_id = -1
