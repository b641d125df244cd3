"""What the proxy knows of the real cluster: brokers, controller, topic ids and partition leaders.

The view is refreshed from a Metadata request to any reachable broker (the known ones first,
then the bootstrap addresses): at start, every ``metadata.max.age.ms``, and whenever routing finds
it stale (a partition without a known leader, NOT_LEADER_OR_FOLLOWER, a broker that cannot be
reached). Concurrent refreshes share one request, and an answer the same as the last one is not
decoded again (with 1,000 partitions, decoding and applying took longer than the broker took to
answer). Group and transaction coordinators are learnt
from the FindCoordinator answers the proxy relays and forgotten on NOT_COORDINATOR; until then a
key's coordinator is the leader of its partition of ``__consumer_offsets`` or
``__transaction_state`` (``coordinators``: Kafka's rule).

The brokers answer Metadata with the endpoints of the listener the proxy reached them on (its
protocol is ``broker.security.protocol``'s). The coordination store registers every listener's
endpoint, so a view taken from the store keeps to that same listener (learnt by matching the
Metadata's addresses) and leaves out a broker without it, as Kafka's Metadata does.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.client import BrokerConnectionError
from barnabas.cluster import BrokerInfo, PartitionState, Topic
from barnabas.groups import partition_for
from barnabas.protocol import RemoteProtocolError, decode_response, encode_request, request_class

from .coordinators import GROUP_KEY, TRANSACTION_KEY, TRANSACTION_TOPIC, transaction_partition
from .links import Address, BrokerLinks

__all__ = ["OFFSETS_TOPIC", "BrokerAddress", "ClusterView", "NoBrokerError", "PartitionInfo"]

log = logging.getLogger(__name__)

METADATA = 3
METADATA_VERSION = 12
OFFSETS_TOPIC = "__consumer_offsets"


class NoBrokerError(Exception):
    """No broker of the cluster could be reached."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    broker_id: int
    host: str
    port: int
    rack: str | None

    @property
    def address(self) -> Address:
        return self.host, self.port


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader_id: int
    leader_epoch: int
    replicas: int
    isr: int


class ClusterView:
    def __init__(self, bootstrap: Sequence[Address], links: BrokerLinks) -> None:
        self.bootstrap = tuple(bootstrap)
        self.links = links
        self.brokers: dict[int, BrokerAddress] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}
        #: Partitions of ``__consumer_offsets`` (0: not created yet, or not known).
        self.offsets_partitions = 0
        #: Partitions of ``__transaction_state`` (0: not created yet, or not known).
        self.transaction_partitions = 0
        #: (key type, key) -> broker id of its coordinator, as last answered.
        self.coordinators: dict[tuple[int, str], int] = {}
        self.refreshed_at = 0.0
        #: Grows whenever the brokers' racks or the topic ids change (what a rewritten answer depends on).
        self.generation = 0
        self._shape: tuple[dict[int, str | None], dict[str, uuid.UUID]] = ({}, {})
        self._refreshing: asyncio.Task[None] | None = None
        #: The last Metadata answer applied, after its correlation id (None: the view came from elsewhere).
        self._last_answer: bytes | None = None
        body = request_class(METADATA, METADATA_VERSION)(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        #: The refresh's Metadata request frame (no size prefix; the client sets the correlation id).
        self._refresh_request = memoryview(encode_request(METADATA, METADATA_VERSION, 0, links.client_id, body))[4:]
        #: The brokers' listener the proxy uses, once a Metadata answer has matched a stored endpoint.
        self._listener: str | None = None

    # -- lookups ---------------------------------------------------------------------------------

    def leader(self, topic: str, partition: int) -> BrokerAddress | None:
        info = self.partitions.get((topic, partition))
        return self.brokers.get(info.leader_id) if info is not None else None

    def rack_of(self, broker_id: int) -> str | None:
        broker = self.brokers.get(broker_id)
        return broker.rack if broker is not None else None

    def topic_key(self, topic: str) -> bytes:
        """What the proxy hashes a topic's partitions by: its topic id, else its name."""
        topic_id = self.topic_ids.get(topic)
        return topic_id.bytes if topic_id is not None else topic.encode()

    def any_broker(self, rack: str | None = None) -> BrokerAddress | None:
        """A live broker, one in ``rack`` if there is one."""
        ordered = sorted(self.brokers.values(), key=lambda b: (b.rack != rack, b.broker_id))
        return ordered[0] if ordered else None

    # -- refreshing ------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the cluster's metadata again (one request however many callers ask at once).

        Raises:
            NoBrokerError: no broker answered.
        """
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
        await asyncio.shield(self._refreshing)

    async def _refresh(self) -> None:
        candidates = [b.address for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)]
        candidates += [a for a in self.bootstrap if a not in candidates]
        failures = []
        frame = self._refresh_request
        for address in candidates:
            try:
                client = await self.links.get(address)
                payload = await client.relay(frame)
                assert payload is not None
                if self._last_answer is not None and memoryview(payload)[4:] == self._last_answer:
                    self.refreshed_at = time.monotonic()  # nothing changed
                    return
                _, response = decode_response(METADATA, METADATA_VERSION, payload)
            except (BrokerConnectionError, RemoteProtocolError) as exc:
                self.links.drop(address)
                failures.append(str(exc))
                continue
            self.apply(response)
            self._last_answer = bytes(memoryview(payload)[4:])
            return
        raise NoBrokerError("no broker answered Metadata: " + "; ".join(failures))

    def apply(self, response: Any) -> None:
        """Take a Metadata response (any version with topic ids or not) as the new view."""
        self._last_answer = None
        self.brokers = {
            int(b.node_id): BrokerAddress(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
            for b in response.brokers
        }
        self.controller_id = int(getattr(response, "controller_id", -1))
        self.cluster_id = getattr(response, "cluster_id", None)
        topic_ids: dict[str, uuid.UUID] = {}
        partitions: dict[tuple[str, int], PartitionInfo] = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            topic_id = getattr(topic, "topic_id", None)
            if topic_id is not None and topic_id.int != 0:
                topic_ids[topic.name] = topic_id
            for p in topic.partitions:
                partitions[(topic.name, int(p.partition_index))] = PartitionInfo(
                    int(p.leader_id), int(getattr(p, "leader_epoch", -1)), len(p.replica_nodes), len(p.isr_nodes)
                )
        self.topic_ids = topic_ids
        self.topic_names = {v: k for k, v in topic_ids.items()}
        self.partitions = partitions
        self._count_internal_partitions()
        self._note_shape()
        self.refreshed_at = time.monotonic()

    def apply_store(
        self,
        topics: Mapping[str, Topic],
        states: Mapping[tuple[str, int], PartitionState],
        live: Mapping[int, BrokerInfo],
        controller_id: int,
    ) -> None:
        """Take the brokers' own metadata, as the coordination store holds it, as the new view.

        A partition whose stored leader is not a live broker has no leader here (-1).
        """
        self._last_answer = None  # the next Metadata answer is applied, even one the same as before
        self._listener = self._listener or self._listener_of(live)
        self.brokers = {}
        for broker_id, info in live.items():
            endpoint = info.endpoint(self._listener) if self._listener is not None else None
            if endpoint is not None:
                self.brokers[broker_id] = BrokerAddress(broker_id, endpoint.host, endpoint.port, info.rack)
            elif self._listener is None:  # no Metadata matched yet: the registered (inter-broker) endpoint
                self.brokers[broker_id] = BrokerAddress(broker_id, info.host, info.port, info.rack)
        self.controller_id = controller_id
        self.topic_ids = {name: topic.topic_id for name, topic in topics.items()}
        self.topic_names = {v: k for k, v in self.topic_ids.items()}
        partitions = {}
        for name, topic in topics.items():
            for index, replicas in topic.assignment.items():
                state = states.get((name, index))
                if state is not None:
                    leader = state.leader if state.leader in live else -1
                    partitions[(name, index)] = PartitionInfo(leader, state.leader_epoch, len(replicas), len(state.isr))
        self.partitions = partitions
        self._count_internal_partitions()
        self._note_shape()
        self.refreshed_at = time.monotonic()

    def _note_shape(self) -> None:
        shape = ({b.broker_id: b.rack for b in self.brokers.values()}, self.topic_ids)
        if shape != self._shape:
            self._shape = shape
            self.generation += 1

    def _count_internal_partitions(self) -> None:
        self.offsets_partitions = sum(1 for topic, _ in self.partitions if topic == OFFSETS_TOPIC)
        self.transaction_partitions = sum(1 for topic, _ in self.partitions if topic == TRANSACTION_TOPIC)

    def _listener_of(self, live: Mapping[int, BrokerInfo]) -> str | None:
        """The listener whose endpoints the brokers' Metadata answered with (None until one matches)."""
        for broker_id, info in live.items():
            known = self.brokers.get(broker_id)
            for endpoint in info.endpoints:
                if known is not None and (endpoint.host, endpoint.port) == known.address:
                    return endpoint.listener
        return None

    def coordinator(self, key_type: int, key: str) -> BrokerAddress | None:
        """The broker coordinating ``key``: as a broker last answered FindCoordinator, else by Kafka's rule
        (None: not known, or another key type)."""
        broker_id = self.coordinators.get((key_type, key))
        if broker_id is not None and broker_id in self.brokers:
            return self.brokers[broker_id]
        if key_type == GROUP_KEY:
            return self.group_coordinator(key)
        if key_type == TRANSACTION_KEY:
            return self.transaction_coordinator(key)
        return None

    def transaction_coordinator(self, transactional_id: str) -> BrokerAddress | None:
        """The leader of the id's ``__transaction_state`` partition (Kafka's rule), if the view knows it."""
        if self.transaction_partitions == 0:
            return None
        return self.leader(TRANSACTION_TOPIC, transaction_partition(transactional_id, self.transaction_partitions))

    def group_coordinator(self, group_id: str) -> BrokerAddress | None:
        """The leader of the group's ``__consumer_offsets`` partition (Kafka's rule), if the view knows it."""
        if self.offsets_partitions == 0:
            return None
        return self.leader(OFFSETS_TOPIC, partition_for(group_id, self.offsets_partitions))

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self.coordinators.pop((key_type, key), None)
