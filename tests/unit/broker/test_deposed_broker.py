"""A deposed broker (unregistered, its followers gone elsewhere) leads nothing and lists itself as not live.

A client connected to it alone (librdkafka asks only the brokers it is connected to for Metadata)
must be sent to the other brokers, not held by the answers of its last view. Its own Metadata
leaves it out of the brokers and its partitions without a leader, so the client looks elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from tests.support.requests import METADATA, batch
from tests.unit.broker.in_memory import InMemoryBroker
from tests.unit.broker.test_handlers import create, fetch, produce, run

EVERY_TOPIC = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def depose(broker: InMemoryBroker) -> None:
    """What the replica manager does once unregistered with every follower gone (its own test is on a cluster)."""
    node = broker.state.node
    node.unregistered = node.deposed = True
    broker.state.replicas.reconcile()


def test_a_deposed_broker_lists_itself_as_not_live_and_its_partitions_without_a_leader(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any]:
        await create(broker, "orders", partitions=2)
        before = await broker.call(METADATA, 12, EVERY_TOPIC)  # cached sections must not outlive the change
        depose(broker)
        return before, await broker.call(METADATA, 12, EVERY_TOPIC)

    before, after = run(tmp_path, scenario)
    assert [int(b.node_id) for b in before.brokers] == [0]
    assert [int(b.node_id) for b in after.brokers] == []
    assert int(after.controller_id) == -1, "the controller id named no live broker"
    (topic,) = after.topics
    partitions = sorted(topic.partitions, key=lambda p: int(p.partition_index))
    assert [(p.error_code, int(p.leader_id)) for p in partitions] == [(ErrorCode.leader_not_available, -1)] * 2
    assert [list(p.offline_replicas) for p in partitions] == [[0], [0]]


def test_a_deposed_broker_takes_no_writes_and_serves_no_reads(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any, Any]:
        await create(broker, "orders")
        led = await produce(broker, "orders", batch(b"a"))
        depose(broker)
        return led, await produce(broker, "orders", batch(b"b")), await fetch(broker, "orders", 0)

    led, produced, fetched = run(tmp_path, scenario)
    assert led.error_code == ErrorCode.none
    assert produced.error_code == ErrorCode.not_leader_or_follower
    assert fetched.error_code == ErrorCode.not_leader_or_follower
