"""Everything a request handler may use, passed in explicitly (no module globals).

Handlers get a BrokerState and a decoded request; they read topics from the TopicStore cache,
partitions from the LogManager and time from ``clock``, so tests can build one in memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from barnabas.cluster import PartitionState, ProducerIdAllocator, Topic, TopicStore
from barnabas.config import BrokerConfig, log_config_for
from barnabas.coordination import Storage
from barnabas.log import LogConfig, LogManager, PartitionLog

from .purgatory import FetchWaiters

if TYPE_CHECKING:
    from .registry import ApiRegistry

__all__ = ["BrokerState", "Endpoint"]


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
    clock: Callable[[], float] = time.time
    rack: str | None = None
    fetch_waiters: FetchWaiters = field(default_factory=FetchWaiters)
    connections: set[Any] = field(default_factory=set)

    @property
    def controller_id(self) -> int:
        """The broker acting as controller; a single broker is its own controller."""
        return self.broker_id

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
