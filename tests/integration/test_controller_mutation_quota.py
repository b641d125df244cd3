"""The controller mutation quota (KIP-599) on a real broker process, over raw requests.

A client id held to 2 partition mutations per second (burst 2 windows x 1 s x 2 = 4) creates,
deletes and grows topics: with a strict request version the topic that comes while its bucket is
in debt is refused with THROTTLING_QUOTA_EXCEEDED and the answer carries the throttle time, and
once that time has passed the same topic is accepted; older versions are accepted and throttled;
``validate_only`` is neither counted nor refused; a client without the quota is never touched.
Raw requests pick the version (librdkafka's admin requests are older than the strict ones).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from barnabas.protocol import request_class
from tests.integration.test_client_quotas import alter
from tests.support.broker_process import BrokerProcess
from tests.support.requests import connect, create_topics, timeout_ms, unique

pytestmark = pytest.mark.timeout(60)

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
RATE = 2.0
THROTTLED = "The throttling quota has been exceeded."


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = Path(tmp_path_factory.mktemp("mutation-quota")) / "data"
    process = BrokerProcess(data, properties={"controller.quota.window.num": "2"}).start()
    yield process
    process.kill()


def held(broker: BrokerProcess, client_id: str) -> None:
    with connect(broker) as client:
        assert alter(client, {"client-id": client_id}, controller_mutation_rate=RATE).error_code == ErrorCode.none


def throttle_ms(response: Any) -> float:
    return float(response.throttle_time.total_seconds() * 1000)


def create(
    broker: BrokerProcess, client_id: str, topics: dict[str, int], version: int = 7, validate_only: bool = False
) -> tuple[dict[str, Any], float]:
    """CreateTopics at ``version`` (strict from v6) on a new connection: each topic's result and the throttle time."""
    types = lambda name: request_class(CREATE_TOPICS, version, name)  # noqa: E731
    body = request_class(CREATE_TOPICS, version)(
        topics=tuple(
            types("CreatableTopic")(name=name, num_partitions=count, replication_factor=1, assignments=(), configs=())
            for name, count in topics.items()
        ),
        timeout=timeout_ms(10_000),
        validate_only=validate_only,
    )
    with connect(broker) as client:
        response = client.request(CREATE_TOPICS, version, body, client_id=client_id)
    return {topic.name: topic for topic in response.topics}, throttle_ms(response)


def delete(broker: BrokerProcess, client_id: str, names: list[str], version: int) -> tuple[dict[str, Any], float]:
    """DeleteTopics at ``version`` (strict from v5; v6 names topics in ``topics``)."""
    if version >= 6:
        state = request_class(DELETE_TOPICS, version, "DeleteTopicState")
        body = request_class(DELETE_TOPICS, version)(
            topics=tuple(state(name=name, topic_id=None) for name in names), timeout=timeout_ms(10_000)
        )
    else:
        body = request_class(DELETE_TOPICS, version)(topic_names=tuple(names), timeout=timeout_ms(10_000))
    with connect(broker) as client:
        response = client.request(DELETE_TOPICS, version, body, client_id=client_id)
    return {result.name: result for result in response.responses}, throttle_ms(response)


def grow(broker: BrokerProcess, client_id: str, topic: str, count: int, version: int) -> tuple[Any, float]:
    """CreatePartitions at ``version`` (strict from v3): the topic's result and the throttle time."""
    topic_type = request_class(CREATE_PARTITIONS, version, "CreatePartitionsTopic")
    body = request_class(CREATE_PARTITIONS, version)(
        topics=(topic_type(name=topic, count=count, assignments=None),), timeout=timeout_ms(10_000), validate_only=False
    )
    with connect(broker) as client:
        response = client.request(CREATE_PARTITIONS, version, body, client_id=client_id)
    (result,) = response.results
    return result, throttle_ms(response)


def test_strict_create_topics_refuses_a_client_in_debt_until_its_throttle_time_has_passed(
    quota_broker: BrokerProcess,
) -> None:
    held(quota_broker, "creator")
    first, second, third = unique("first"), unique("second"), unique("third")
    results, throttle = create(quota_broker, "creator", {first: 6, second: 1})
    # 4 credits: the 6 partitions are taken (into debt: -2), the next topic is refused.
    assert results[first].error_code == ErrorCode.none
    assert (results[second].error_code, results[second].error_message) == (
        ErrorCode.throttling_quota_exceeded,
        THROTTLED,
    )
    assert 200 < throttle <= 1000  # 2 credits of debt at 2 per second, less the time since

    results, throttle = create(quota_broker, "creator", {third: 1}, validate_only=True)
    assert (results[third].error_code, throttle) == (ErrorCode.none, 0)  # neither counted nor refused
    results, throttle = create(quota_broker, "someone-else", {third: 8})
    assert (results[third].error_code, throttle) == (ErrorCode.none, 0)  # no quota: untouched

    deadline = time.monotonic() + 10
    while True:
        results, throttle = create(quota_broker, "creator", {second: 1})
        if results[second].error_code == ErrorCode.none or time.monotonic() > deadline:
            break
        assert results[second].error_code == ErrorCode.throttling_quota_exceeded
        time.sleep(throttle / 1000)  # back off as the answer says, as a client does
    assert (results[second].error_code, throttle) == (ErrorCode.none, 0)


def test_delete_topics_and_create_partitions_are_strict_from_v5_and_v3_and_permissive_before(
    quota_broker: BrokerProcess,
) -> None:
    topics = {unique("five"): 5, unique("one"): 1, unique("two"): 1, unique("three"): 1}
    five, one, two, three = topics
    with connect(quota_broker) as client:  # client id "raw-client": no quota
        for name, partitions in topics.items():
            assert create_topics(client, [name], partitions)[name].error_code == ErrorCode.none
    held(quota_broker, "deleter")

    results, throttle = delete(quota_broker, "deleter", [five, one], version=6)
    assert results[five].error_code == ErrorCode.none  # 5 partitions from 4 credits: -1
    assert (results[one].error_code, results[one].error_message) == (ErrorCode.throttling_quota_exceeded, THROTTLED)
    assert 0 < throttle <= 500

    result, throttle = grow(quota_broker, "deleter", two, 2, version=3)
    assert (result.error_code, result.error_message) == (ErrorCode.throttling_quota_exceeded, THROTTLED)
    assert throttle > 0
    result, throttle = grow(quota_broker, "deleter", two, 3, version=2)
    assert result.error_code == ErrorCode.none  # permissive: taken, 2 partitions deeper in debt
    assert 500 < throttle <= 1500
    results, throttle = delete(quota_broker, "deleter", [three], version=4)
    assert results[three].error_code == ErrorCode.none
    assert 1000 < throttle <= 2000
    old = unique("old")
    results, throttle = create(quota_broker, "deleter", {old: 1}, version=5)
    assert results[old].error_code == ErrorCode.none
    assert 1000 < throttle <= 2500
