"""Everything a request handler may use, passed in explicitly (no module globals).

Handlers get a BrokerState and a decoded request; they read topics from the TopicStore cache,
partitions from the LogManager and time from ``clock``, so tests can build one in memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from barnabas.cluster import BrokerInfo, BrokerRegistry, PartitionState, ProducerIdAllocator, Topic, TopicStore
from barnabas.config import BrokerConfig, log_config_for
from barnabas.coordination import Storage
from barnabas.log import LogConfig, LogManager, PartitionLog
from barnabas.protocol import ErrorCode

from .purgatory import FetchWaiters

if TYPE_CHECKING:
    from barnabas.cluster import Controller, MetadataWatcher
    from barnabas.groups import GroupCoordinator

    from .offsets_topic import OffsetsTopic
    from .registry import ApiRegistry
    from .replication import ReplicaManager

__all__ = ["BrokerState", "Endpoint", "LeaderPartition"]


@dataclass(frozen=True, slots=True)
class LeaderPartition:
    """A partition this broker leads: its log and its state (leader epoch, ISR)."""

    log: PartitionLog
    state: PartitionState


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(eq=False)
class BrokerState:
    config: BrokerConfig
    broker_id: int
    cluster_id: str
    storage: Storage
    topics: TopicStore
    logs: LogManager
    producer_ids: ProducerIdAllocator
    advertised: Endpoint
    registry: ApiRegistry
    brokers: BrokerRegistry
    clock: Callable[[], float] = time.time
    rack: str | None = None
    #: This incarnation's broker epoch (KIP-380), -1 until registered; a new one after every
    #: registration. Partition states name the epoch each ISR member is in sync in.
    broker_epoch: int = -1
    fetch_waiters: FetchWaiters = field(default_factory=FetchWaiters)
    connections: set[Any] = field(default_factory=set)
    replicas: ReplicaManager | None = None
    watcher: MetadataWatcher | None = None
    controller: Controller | None = None
    groups: GroupCoordinator | None = None
    offsets_topic: OffsetsTopic | None = None
    #: Derived answers (the Metadata handler's per-topic sections), and the (topics, brokers)
    #: generations they were built from; see :meth:`derived`.
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)
    _derived_from: tuple[int, int] = field(default=(-1, -1), init=False, repr=False)

    def derived(self) -> dict[Any, Any]:
        """A cache for answers derived from topics, partition states and live brokers only.

        It is emptied whenever one of those changes (their generations move), so what a handler
        finds in it was built from the metadata it would read now.
        """
        generations = (self.topics.generation, self.brokers.generation)
        if self._derived_from != generations:
            self._derived_from = generations
            self._derived = {}
        return self._derived

    @property
    def controller_id(self) -> int:
        """The live controller's id, else this broker's: clients (kafkajs) send requests there."""
        controller = self.watcher.controller_id if self.watcher is not None else -1
        return controller if controller in self.brokers.live else self.broker_id

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """Registered brokers, this one always included (it serves even while coordination is away)."""
        me = BrokerInfo(self.broker_id, self.advertised.host, self.advertised.port, self.rack, self.broker_epoch)
        return {**self.brokers.live, self.broker_id: me}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The effective log settings of a topic with these overrides."""
        return log_config_for(self.config, overrides)

    def topic(self, name: str) -> Topic | None:
        return self.topics.topics.get(name)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.topics.states.get((topic, partition))

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> LeaderPartition | ErrorCode:
        """The partition if this broker leads it, else the error a leader-only request gets.

        Kafka's ReplicaManager.getPartitionOrError plus its leader-epoch check (KIP-320): an unknown
        topic or partition is UNKNOWN_TOPIC_OR_PARTITION, a partition this broker does not lead is
        NOT_LEADER_OR_FOLLOWER, and a ``current_leader_epoch`` (-1 means unchecked) older than the
        leader's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

        Leading means acting as leader (the replica manager's LeaderReplica), not being named leader
        by the stored state: a broker that restarted is named there until the controller elects
        anew, and must not answer for a log that may have lost what it never flushed.
        """
        topic_metadata = self.topic(topic)
        if topic_metadata is None or partition not in topic_metadata.assignment:
            return ErrorCode.unknown_topic_or_partition
        leader = self.replicas.leader(topic, partition) if self.replicas is not None else None
        if leader is None:
            return ErrorCode.not_leader_or_follower
        partition_state, partition_log = leader.state, leader.log
        if current_leader_epoch >= 0 and current_leader_epoch != partition_state.leader_epoch:
            if current_leader_epoch < partition_state.leader_epoch:
                return ErrorCode.fenced_leader_epoch
            return ErrorCode.unknown_leader_epoch
        return LeaderPartition(partition_log, partition_state)
