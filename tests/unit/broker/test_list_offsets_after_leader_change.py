"""ListOffsets never goes backwards across a leader change (KIP-207).

A new leader's high watermark may lag behind where its epoch starts (what its predecessor had
acknowledged) until its followers fetch from it; a consumer asking for the latest offset then, or
for a timestamp found nowhere below it, gets OFFSET_NOT_AVAILABLE and asks again, as Kafka answers.

Here the one broker of an in-memory cluster leads a partition whose second replica (broker 7,
registered by the test, never fetching) is in its ISR: records written with acks=1 leave the high
watermark at 0. A new leader epoch then starts at the log end, ahead of the high watermark, until
the ISR shrinks to the leader.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic

from barnabas.cluster.brokers import BrokerInfo
from barnabas.protocol import ErrorCode
from tests.support.polling import until
from tests.support.requests import CREATE_TOPICS, batch
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker
from tests.unit.broker.test_handlers import LATEST, create_topics_request, list_offset, produce

OTHER = 7


async def scenario(broker: InMemoryBroker) -> None:
    node, replicas = broker.state.node, broker.state.replicas
    storage = broker.broker._storage
    assert storage is not None
    session = await storage.metastore.open_session(30.0)
    await node.brokers.register(session, BrokerInfo(OTHER, "127.0.0.1", 1))
    await node.brokers.refresh()
    me = node.broker_id
    topic = CreatableTopic(
        name="moved", num_partitions=-1, replication_factor=-1, configs=(),
        assignments=(CreatableReplicaAssignment(partition_index=0, broker_ids=(me, OTHER)),),
    )  # fmt: skip
    (created,) = (await broker.call(CREATE_TOPICS, 7, create_topics_request(topic))).topics
    assert created.error_code == ErrorCode.none, created
    for value in (b"a", b"b", b"c"):
        assert (await produce(broker, "moved", batch(value), acks=1)).error_code == ErrorCode.none
    leader = replicas.leader("moved", 0)
    assert leader is not None and (leader.log.log_end_offset, leader.log.high_watermark) == (3, 0)
    assert (await list_offset(broker, "moved", LATEST)).offset == 0  # this epoch started at 0: nothing went back

    topics = node.topics
    state = topics.states[("moved", 0)]
    version = topics.state_version("moved", 0)
    assert version is not None
    await topics.update_state("moved", 0, dataclasses.replace(state, leader_epoch=state.leader_epoch + 1), version)
    await until(lambda: leader.leader_epoch == state.leader_epoch + 1, "the new epoch led", 10)
    assert leader.epoch_start_offset == 3 and leader.log.high_watermark == 0
    lagging = await list_offset(broker, "moved", LATEST)
    assert (lagging.error_code, lagging.offset) == (ErrorCode.offset_not_available, -1)
    assert (await list_offset(broker, "moved", 0)).error_code == ErrorCode.offset_not_available

    state = topics.states[("moved", 0)]
    version = topics.state_version("moved", 0)
    assert version is not None
    await topics.update_state("moved", 0, state.with_isr((me,), {}), version)  # the follower leaves the ISR
    await until(lambda: leader.log.high_watermark == 3, "the high watermark past the epoch's start", 10)
    caught_up = await list_offset(broker, "moved", LATEST)
    assert (caught_up.error_code, caught_up.offset) == (ErrorCode.none, 3)
    assert (await list_offset(broker, "moved", 0)).offset == 0
    await session.close()


def test_a_lagging_new_leader_answers_offset_not_available(tmp_path: Path) -> None:
    async def main() -> None:
        async with in_memory_broker(tmp_path) as broker:
            await scenario(broker)

    asyncio.run(asyncio.wait_for(main(), 60))
