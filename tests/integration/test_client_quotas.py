"""Client quotas on a real broker process: set and described over the wire, enforced the Kafka way.

AlterClientQuotas and DescribeClientQuotas are raw requests (confluent-kafka has no client-quota API).
A producer held to ``producer_byte_rate`` produces at about that rate and is told so in
``throttle_time_ms`` (librdkafka's per-broker throttle statistics); a fetch over ``consumer_byte_rate``
is answered with a throttle time and the connection's next request waits it out; a client over
``request_percentage`` is throttled too; a client without a quota never is. The quota windows are
shortened (2 windows of 1 s) so a first burst is not allowed ten seconds' worth. The rate is checked
with a wide margin: this is a correctness test, not a benchmark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from barnabas.protocol import request_class
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import (
    FETCH,
    METADATA,
    batch,
    connect,
    create_topic,
    fetch_request,
    produce,
    produce_request,
    unique,
)

pytestmark = pytest.mark.timeout(120)

DESCRIBE, ALTER = 48, 49
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RATE = 100 * 1024


def alter(client: RawKafkaClient, entity: dict[str, str | None], **quotas: float | None) -> Any:
    """AlterClientQuotas v1 for one entity: set each quota, or remove it (None); the entry's result."""
    types = lambda name: request_class(ALTER, 1, name)  # noqa: E731
    ops = tuple(
        types("OpData")(key=key, value=float(value or 0.0), remove=value is None) for key, value in quotas.items()
    )
    components = tuple(types("EntityData")(entity_type=k, entity_name=v) for k, v in entity.items())
    body = request_class(ALTER, 1)(entries=(types("EntryData")(entity=components, ops=ops),), validate_only=False)
    (entry,) = client.request(ALTER, 1, body).entries
    return entry


def describe(client: RawKafkaClient, version: int = 1, **exact: str | None) -> Any:
    component = request_class(DESCRIBE, version, "ComponentData")
    components = tuple(
        component(entity_type=k, match_type=0 if v is not None else 1, match=v) for k, v in exact.items()
    )
    return client.request(DESCRIBE, version, request_class(DESCRIBE, version)(components=components, strict=False))


@pytest.fixture
def quota_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(properties=WINDOWS).start()


def test_quotas_are_altered_and_described_over_the_wire(quota_broker: BrokerProcess) -> None:
    with connect(quota_broker) as client:
        assert alter(client, {"user": "alice", "client-id": "app"}, producer_byte_rate=1024).error_code == 0
        assert alter(client, {"client-id": None}, request_percentage=25.5).error_code == 0
        refused = alter(client, {"user": "bob"}, producer_byte_rate=10.5)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.invalid_request, "producer_byte_rate cannot be a fractional value."
        )  # fmt: skip
        for version in (0, 1):
            response = describe(client, version, user="alice")
            assert response.error_code == ErrorCode.none
            (entry,) = response.entries
            assert {(e.entity_type, e.entity_name) for e in entry.entity} == {("user", "alice"), ("client-id", "app")}
            assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]
        (default,) = describe(client, **{"client-id": None}).entries
        assert [(v.key, v.value) for v in default.values] == [("request_percentage", 25.5)]
        assert alter(client, {"client-id": None}, request_percentage=None).error_code == 0
        assert describe(client, **{"client-id": None}).entries == ()


def test_a_producer_held_to_100_kb_per_second_produces_at_about_that_rate(quota_broker: BrokerProcess) -> None:
    topic = unique("quota")
    with connect(quota_broker) as client:
        create_topic(client, topic)
        assert alter(client, {"client-id": "slow-producer"}, producer_byte_rate=RATE).error_code == 0
        fast = produce(client, topic, 0, batch(bytes(300_000)))  # client id "raw-client": no quota
        assert fast.error_code == ErrorCode.none
    throttles: list[int] = []

    def stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            throttles.append(int(broker["throttle"]["max"]))

    producer = Producer({
        "bootstrap.servers": quota_broker.bootstrap, "client.id": "slow-producer", "linger.ms": 5, "batch.size": 16384,
        "statistics.interval.ms": 200, "stats_cb": stats, "compression.type": "none",
    })  # fmt: skip
    total = 500 * 1024
    started = time.monotonic()
    for _ in range(total // 4096):
        producer.produce(topic, bytes(4096))
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 5
    while not any(throttles) and time.monotonic() < deadline:
        producer.poll(0.1)  # the last statistics carry the throttle times of the last answers
    # Without the quota this takes well under a second; at 100 KB/s about 4 s (the first ~100 KB pass at once).
    assert elapsed > total / (2 * RATE), f"{total} bytes in {elapsed:.1f} s: faster than twice the quota"
    assert elapsed < 30
    assert max(throttles) > 0, "the producer was never told it was throttled"


def test_a_fetch_over_consumer_byte_rate_is_throttled_and_the_connection_waits_it_out(
    quota_broker: BrokerProcess,
) -> None:
    topic = unique("fetch-quota")
    with connect(quota_broker) as client:
        create_topic(client, topic)
        for _ in range(3):
            assert produce(client, topic, 0, batch(bytes(100_000))).error_code == ErrorCode.none
        assert alter(client, {"client-id": "slow-consumer"}, consumer_byte_rate=RATE).error_code == 0
        request = fetch_request([(topic, 0, 0, 1 << 20)])
        first = client.request(FETCH, 12, request, client_id="slow-consumer")
        throttle_ms = first.throttle_time.total_seconds() * 1000
        assert throttle_ms > 500  # 300 KB against 100 KB/s over one window: about two seconds
        assert first.responses[0].partitions[0].records  # KIP-219: the data comes at once
        started = time.monotonic()
        client.request(METADATA, 12, metadata_body(), client_id="slow-consumer")
        assert time.monotonic() - started >= 0.8 * throttle_ms / 1000, "the next request was not held back"
        free = client.request(FETCH, 12, request, client_id="another-consumer")
        assert free.throttle_time.total_seconds() == 0


def test_request_percentage_throttles_a_busy_client_and_produce_answers_carry_the_throttle(
    quota_broker: BrokerProcess,
) -> None:
    topic = unique("request-quota")
    with connect(quota_broker) as client:
        create_topic(client, topic)
        assert alter(client, {"user": None}, request_percentage=0.01).error_code == 0  # every user: ANONYMOUS too
        throttled = []
        for _ in range(20):
            cid = client.send_request(0, 9, produce_request(topic, 0, batch(b"x")), client_id="busy")
            response = client.read_response(0, 9, cid)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
            throttled.append(response.throttle_time.total_seconds() * 1000)
            if throttled[-1] > 0:
                break
        assert max(throttled) > 0
        assert max(throttled) <= 1000  # a request-time throttle is at most one window


def metadata_body() -> Any:
    return request_class(METADATA, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
