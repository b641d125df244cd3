"""Each client is answered with the endpoints of the listener it came in on; every endpoint is registered.

A broker built in memory with a PLAINTEXT and an SSL listener (its TLS context from trustme
certificates); the request context names the listener, as a connection sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v5.request import MetadataRequestTopic as MetadataRequestTopicV5
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from barnabas.broker.request_context import LISTENER_NAME
from barnabas.cluster import BrokerEndpoint, BrokerInfo
from tests.support.tls import broker_ssl_settings, make_certificates
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

METADATA = 3
FIND_COORDINATOR = 10
DESCRIBE_CLUSTER = 60


@contextlib.contextmanager
def on_listener(name: str) -> Iterator[None]:
    token = LISTENER_NAME.set(name)
    try:
        yield
    finally:
        LISTENER_NAME.reset(token)


async def metadata(broker: InMemoryBroker, topic: str) -> Any:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return await broker.call(METADATA, 12, request)


def test_metadata_find_coordinator_and_describe_cluster_answer_on_the_clients_listener(tmp_path: Path) -> None:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "advertised.listeners": "SSL://kafka-0.example:19093",
        **broker_ssl_settings(make_certificates(tmp_path / "certs")),
    }

    async def scenario(broker: InMemoryBroker) -> None:
        await broker.create_topic("orders", 2)
        for listener, endpoint in (("PLAINTEXT", ("127.0.0.1", 9092)), ("SSL", ("kafka-0.example", 19093))):
            with on_listener(listener):
                response = await metadata(broker, "orders")
                assert [(b.host, int(b.port)) for b in response.brokers] == [endpoint]
                (topic,) = response.topics
                assert {int(p.leader_id) for p in topic.partitions} == {0}
                request = FindCoordinatorRequest(key_type=0, coordinator_keys=("a-group",))
                (coordinator,) = (await broker.call(FIND_COORDINATOR, 4, request)).coordinators
                assert (coordinator.host, int(coordinator.port)) == endpoint
                cluster = await broker.call(
                    DESCRIBE_CLUSTER,
                    1,
                    DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
                )
                assert [(b.host, int(b.port)) for b in cluster.brokers] == [endpoint]

        with on_listener("ELSEWHERE"):  # a listener this broker does not have: it is left out (Kafka's rule)
            response = await metadata(broker, "orders")
            assert list(response.brokers) == []
            assert {p.error_code for p in response.topics[0].partitions} == {ErrorCode.listener_not_found}
            old = MetadataRequestV5(topics=(MetadataRequestTopicV5(name="orders"),), allow_auto_topic_creation=False)
            response = await broker.call(METADATA, 5, old)
            assert {p.error_code for p in response.topics[0].partitions} == {ErrorCode.leader_not_available}

        registered = broker.state.node.brokers.live[0]
        assert registered.endpoints == (
            BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
            BrokerEndpoint("SSL", "kafka-0.example", 19093, "SSL"),
        )
        assert (registered.host, registered.port) == ("127.0.0.1", 9092), "the inter-broker listener's address"

    async def main() -> None:
        async with in_memory_broker(tmp_path, settings) as broker:
            await scenario(broker)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_registration_keeps_its_endpoints_and_an_old_one_is_a_plaintext_listener() -> None:
    info = BrokerInfo(
        3, "10.0.0.3", 9094, "rack-a", 7, endpoints=(BrokerEndpoint("REPLICATION", "10.0.0.3", 9094, "SSL"),)
    )
    assert BrokerInfo.from_json(3, info.to_json()) == info
    assert info.endpoint("REPLICATION") == BrokerEndpoint("REPLICATION", "10.0.0.3", 9094, "SSL")
    assert info.endpoint("PLAINTEXT") is None
    old = BrokerInfo.from_json(3, b'{"version": 2, "host": "h", "port": 9092, "rack": null, "epoch": 2}')
    assert old.endpoint("PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")
