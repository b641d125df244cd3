"""What the broker's services and request handlers work on, passed in explicitly (no module globals).

Two layers, both complete when built. :class:`NodeState` is this broker before any service:
identity, configuration, the coordination storage and its caches (topics, partition states, live
brokers), the logs, the clock, the fetch waiters. The services (replica manager, partition
service, offsets topic, controller, metadata watcher) are built on a NodeState. :class:`BrokerState`
is what request handlers get: the node and every service, none of them optional, so a handler
never asks whether something has started yet. Tests build either in memory, without sockets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.cluster import (
    BrokerEndpoint,
    BrokerInfo,
    BrokerRegistry,
    ClientQuotaStore,
    CredentialStore,
    PartitionState,
    ProducerIdAllocator,
    Topic,
    TopicStore,
)
from barnabas.cluster.acls import AclStore
from barnabas.cluster.cordons import CordonStore
from barnabas.config import BrokerConfig, log_config_for
from barnabas.coordination import Storage
from barnabas.log import LogConfig, LogManager, PartitionLog
from barnabas.security import PLAINTEXT_CLIENT, ClientSecurity

from . import quiet_marks
from .client_quotas import ClientQuotas
from .connection_limits import ConnectionLimits, QueuedRequests
from .fetch_sessions import FetchSessionCache
from .metrics import BrokerMetrics
from .purgatory import FetchWaiters

if TYPE_CHECKING:
    from barnabas.cluster import Controller, MetadataWatcher
    from barnabas.groups import GroupCoordinator

    from .offsets_topic import OffsetsTopic
    from .partition_service import PartitionService
    from .registry import ApiRegistry
    from .replication import ReplicaManager

__all__ = ["BrokerState", "Endpoint", "NodeState"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(eq=False)
class NodeState:
    """This broker before any service: identity, configuration, stores, logs and clock."""

    config: BrokerConfig
    broker_id: int
    cluster_id: str
    storage: Storage
    topics: TopicStore
    logs: LogManager
    producer_ids: ProducerIdAllocator
    advertised: Endpoint
    brokers: BrokerRegistry
    #: Every user's SCRAM credentials, kept current by the metadata watcher.
    credentials: CredentialStore
    #: Every user's and client id's quotas, kept current by the metadata watcher.
    client_quotas: ClientQuotaStore
    #: The ACLs and the authorizer deciding on them, kept current by the metadata watcher;
    #: None when authorization is off (no ``authorizer.class.name``): every request is allowed.
    acls: AclStore | None = None
    #: The wall clock: for times Kafka stores (record timestamps, retention, expiry of stored state).
    clock: Callable[[], float] = time.time
    #: A monotonic clock: for how long something has taken, which a step of the wall clock must not change.
    monotonic: Callable[[], float] = time.monotonic
    rack: str | None = None
    #: Every advertised listener (``advertised`` is the inter-broker one's address); empty without listeners.
    endpoints: tuple[BrokerEndpoint, ...] = ()
    #: How this broker's own clients (followers' fetchers) connect to other brokers.
    inter_broker: ClientSecurity = PLAINTEXT_CLIENT
    #: This incarnation's broker epoch (KIP-380), -1 until registered; a new one after every
    #: registration. Partition states name the epoch each ISR member is in sync in.
    broker_epoch: int = -1
    #: Set from the loss of this broker's coordination session until it has registered again: the
    #: cluster has declared it dead, and its controller may elect other leaders meanwhile.
    unregistered: bool = False
    #: Set while unregistered once the followers of a partition it leads have all stopped fetching
    #: from it (the replica manager decides): the cluster has moved on, so it leads nothing and lists
    #: itself as not live, sending clients that only know it to the other brokers. A fresh
    #: registration clears it.
    deposed: bool = False
    fetch_waiters: FetchWaiters = field(default_factory=FetchWaiters)
    #: What the broker counts as it serves (requests, bytes in, ISR changes), for the admin endpoint.
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    connections: set[Any] = field(default_factory=set)
    #: Open connections counted against ``max.connections`` and the other connection limits.
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    #: Each client's rates against its quotas (built from ``client_quotas`` and the quota windows).
    quotas: ClientQuotas = field(init=False)
    #: Consumers' and followers' incremental fetch sessions (KIP-227).
    fetch_sessions: FetchSessionCache[Any] = field(init=False)
    #: Whole requests read but not yet taken up, over every connection (``queued.max.requests``).
    queued_requests: QueuedRequests = field(init=False)
    #: The brokers new replicas are not placed on (KIP-1066), kept current by the metadata watcher.
    cordons: CordonStore = field(init=False)
    #: Topics with logs here that the store lacks and a restore could not rebuild (no readable copy
    #: of their document): their logs are kept, not deleted (``topic_restore``).
    kept_topics: set[str] = field(default_factory=set)
    #: Called after this broker changed topics or partition states itself (an admin request), so the
    #: replica manager takes the change up now rather than when the watch reports it.
    changed_here: list[Callable[[Collection[str] | None], None]] = field(default_factory=list)
    #: Derived answers (the Metadata handler's per-topic sections), and the brokers generation they
    #: were built from; see :meth:`derived`.
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)
    _derived_from: tuple[int, bool] = field(default=(-1, False), init=False, repr=False)

    def __post_init__(self) -> None:
        config = self.config
        self.quotas = ClientQuotas(
            self.client_quotas,
            samples=int(config["quota.window.num"]),
            window_s=int(config["quota.window.size.seconds"]),
            controller_samples=int(config["controller.quota.window.num"]),
            controller_window_s=int(config["controller.quota.window.size.seconds"]),
        )
        self.queued_requests = QueuedRequests(int(config["queued.max.requests"]))
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]),
            int(config["min.incremental.fetch.session.eviction.ms"]),
            on_end=quiet_marks.release,
        )
        self.cordons = CordonStore(self.storage)

    def derived(self) -> dict[Any, Any]:
        """A cache for answers derived from one topic's metadata (its document and partition states)
        and the live brokers only.

        It is emptied whenever the live brokers change; an entry stays good while its topic's
        ``topics.topic_generation`` is the one it was built at, so the handler keeps that beside
        it (a change to one topic, of which thousands may come while partitions are created or
        led, leaves the other topics' answers as they are). Entries of topics that are gone are
        dropped with the rest once it holds several times as many entries as there are topics.
        """
        built_from = (self.brokers.generation, self.deposed)
        if self._derived_from != built_from or len(self._derived) > 8 * len(self.topics.topics) + 64:
            self._derived_from = built_from
            self._derived = {}
        return self._derived

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """Registered brokers, this one included (it serves even while coordination is away) unless deposed."""
        if self.deposed:
            return {broker_id: info for broker_id, info in self.brokers.live.items() if broker_id != self.broker_id}
        me = BrokerInfo(
            self.broker_id, self.advertised.host, self.advertised.port, self.rack, self.broker_epoch,
            endpoints=self.endpoints,
        )  # fmt: skip
        return {**self.brokers.live, self.broker_id: me}

    def brokers_on(self, listener: str) -> dict[int, tuple[BrokerInfo, BrokerEndpoint]]:
        """Live brokers with an endpoint on the listener named ``listener``, and that endpoint.

        Kafka answers a client with the endpoints of the listener it connected on, leaving out
        brokers without one. An empty name (a request from no connection: handler tests) takes
        each broker's registered address.
        """
        found = {}
        for broker_id, info in self.live_brokers().items():
            endpoint = info.endpoint(listener) if listener else BrokerEndpoint("", info.host, info.port)
            if endpoint is not None:
                found[broker_id] = (info, endpoint)
        return found

    async def connect_to_broker(
        self, info: BrokerInfo, *, client_id: str, timeout_s: float, request_timeout_s: float
    ) -> KafkaClient:
        """A client connection to another broker, on the inter-broker listener with its protocol.

        On a SASL inter-broker listener the connection is authenticated before it is returned.

        Raises:
            BrokerConnectionError: it has no endpoint on that listener, or the connection failed.
        """
        security = self.inter_broker
        endpoint = info.endpoint(security.listener)
        if endpoint is None:
            raise BrokerConnectionError(
                f"broker {info.broker_id} has no {security.listener} listener (inter.broker.listener.name)"
            )
        return await KafkaClient.connect(
            endpoint.host, endpoint.port, client_id=client_id, timeout_s=timeout_s,
            request_timeout_s=request_timeout_s, tls=security.context,
            sasl=security.sasl() if security.sasl is not None else None,
        )  # fmt: skip

    def now_ms(self) -> int:
        """The wall clock, in milliseconds since the epoch."""
        return int(self.clock() * 1000)

    def monotonic_ms(self) -> int:
        """The monotonic clock in milliseconds: only differences between two readings mean anything."""
        return int(self.monotonic() * 1000)

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The effective log settings of a topic with these overrides."""
        return log_config_for(self.config, overrides)

    def topic(self, name: str) -> Topic | None:
        return self.topics.topics.get(name)

    def min_insync(self, topic_name: str) -> int:
        """The topic's ``min.insync.replicas`` (its override, else the broker's; the broker's for an unknown topic)."""
        topic = self.topics.topics.get(topic_name)
        overrides = topic.config if topic is not None else {}
        return int(overrides.get("min.insync.replicas", self.config["min.insync.replicas"]))

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.topics.states.get((topic, partition))

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def metadata_changed_here(self, topics: Collection[str] | None = None) -> None:
        """This broker changed topics or partition states (only ``topics``' when given): let its
        services take it up at once."""
        for listener in self.changed_here:
            listener(topics)


@dataclass(frozen=True, eq=False)
class BrokerState:
    """Everything a request handler may use: the node and every service built on it."""

    node: NodeState
    registry: ApiRegistry
    replicas: ReplicaManager
    partitions: PartitionService
    watcher: MetadataWatcher
    controller: Controller
    offsets_topic: OffsetsTopic

    @property
    def groups(self) -> GroupCoordinator:
        return self.offsets_topic.coordinator

    @property
    def controller_id(self) -> int:
        """The live controller's id, else this broker's (another live one's while deposed): clients (kafkajs)
        send requests there."""
        controller = self.watcher.controller_id
        node = self.node
        if not node.deposed:
            return controller if controller in node.brokers.live else node.broker_id
        live = node.live_brokers()
        return controller if controller in live else min(live, default=-1)
