"""The cluster's metadata read from the coordination store, by watch, when the proxy has its URL.

The brokers keep topics, partition states (leader, leader epoch, ISR), live brokers and the
controller in the coordination store; a proxy given ``coordination.url`` follows the same keys the
brokers' own metadata watchers follow, so a new leader reaches the proxy's routing when the
controller writes it, before any client is told NOT_LEADER_OR_FOLLOWER. The Metadata the proxy
reads from brokers (at start, on errors, every ``metadata.max.age.ms``) stays the fallback.

A proxy whose SASL listener offers SCRAM also follows the users' credentials, as every broker does,
so a user added or changed through any broker logs in through the proxy as soon as the watch reports.
"""

from __future__ import annotations

from barnabas.cluster import BrokerRegistry, CredentialStore, MetadataWatcher, TopicStore
from barnabas.coordination import Storage

from .cluster_view import ClusterView

__all__ = ["StoreFollower"]


class StoreFollower:
    def __init__(self, storage: Storage, view: ClusterView, *, credentials: bool = False) -> None:
        """Args: ``credentials`` follows the SCRAM users too (:attr:`credentials`)."""
        self.view = view
        self.topics = TopicStore(storage)
        self.brokers = BrokerRegistry(storage.metastore)
        #: Every user's SCRAM credentials (when asked for), as the brokers have them.
        self.credentials = CredentialStore(storage) if credentials else None
        self.watcher = MetadataWatcher(storage.metastore, self.topics, self.brokers, self._apply, self.credentials)

    async def start(self) -> None:
        """Read everything now, then follow every change."""
        await self.topics.load()
        if self.credentials is not None:
            await self.credentials.load()
        await self.watcher.refresh_all()
        self._apply()
        self.watcher.start()

    def _apply(self) -> None:
        self.view.apply_store(self.topics.topics, self.topics.states, self.brokers.live, self.watcher.controller_id)

    async def stop(self) -> None:
        await self.watcher.stop()
