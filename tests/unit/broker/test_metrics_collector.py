"""The broker's metric families on a complete in-memory broker: counters the services bump, gauges read from state.

Each scenario drives real handlers (see ``in_memory.py``), then renders ``broker_families`` with
prometheus-client and parses the text back, as a scrape would see it. Request counts are the
connection's and are tested over the wire (tests/integration/test_admin_endpoint.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from barnabas.broker.metrics import BrokerMetrics
from barnabas.broker.metrics_collector import broker_families
from barnabas.coordination import SessionState
from barnabas.protocol import iter_batch_headers
from tests.support.requests import batch, timeout_ms
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker
from tests.unit.broker.test_handlers import create, fetch, find_coordinator, produce

T = TypeVar("T")
OFFSET_COMMIT, DELETE_TOPICS = 8, 20
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def scrape(broker: InMemoryBroker, session: SessionState | None = SessionState.CONNECTED) -> Samples:
    """The broker's families as prometheus-client renders them, parsed back: (name, labels) -> value."""
    registry = CollectorRegistry()
    registry.register(_Families(broker_families(broker.state, lambda: session)))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            async with asyncio.timeout(10):
                while broker.state.controller.fence is None:
                    await asyncio.sleep(0.01)  # the candidacy runs as a task on this loop
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def topic_labels(topic: str, partition: int) -> tuple[tuple[str, str], ...]:
    return (("partition", str(partition)), ("topic", topic))


def test_bytes_and_messages_in_come_from_the_appended_batch_headers(tmp_path: Path) -> None:
    records = [batch(b"a", b"b", b"c"), batch(b"d" * 100)]

    async def scenario(broker: InMemoryBroker) -> Samples:
        await create(broker, "in")
        for one in records:
            assert (await produce(broker, "in", one)).error_code == ErrorCode.none
        return scrape(broker)

    samples = run(tmp_path, scenario)
    size = sum(header.size for one in records for _, header in iter_batch_headers(one))
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "in"),))] == size
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "in"),))] == 4
    # The broker's total (Kafka's all-topics meter) counts every leader append, __consumer_offsets' too.
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] >= 4
    assert samples[("kafka_log_log_size", topic_labels("in", 0))] == size
    assert samples[("kafka_log_log_logendoffset", topic_labels("in", 0))] == 4
    assert samples[("kafka_log_log_logstartoffset", topic_labels("in", 0))] == 0
    assert samples[("kafka_log_log_numlogsegments", topic_labels("in", 0))] == 1


def test_bytes_out_count_the_records_a_consumer_fetches(tmp_path: Path) -> None:
    records = batch(b"a", b"b" * 50)

    async def scenario(broker: InMemoryBroker) -> tuple[Samples, Samples]:
        await create(broker, "out")
        assert (await produce(broker, "out", records)).error_code == ErrorCode.none
        before = scrape(broker)
        assert (await fetch(broker, "out", 0)).error_code == ErrorCode.none
        return before, scrape(broker)

    before, after = run(tmp_path, scenario)
    assert ("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "out"),)) not in before
    assert after[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "out"),))] == len(records)
    assert after[("kafka_server_brokertopicmetrics_bytesout_total", ())] >= len(records)


def test_a_rejected_append_counts_nothing(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Samples:
        await create(broker, "strict", **{"max.message.bytes": "100"})
        assert (await produce(broker, "strict", batch(b"x" * 500))).error_code != ErrorCode.none
        return scrape(broker)

    samples = run(tmp_path, scenario)
    assert ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "strict"),)) not in samples


def test_replica_manager_and_controller_gauges(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Samples, Samples]:
        before = scrape(broker)
        await create(broker, "counted", partitions=3)
        return before, scrape(broker)

    before, after = run(tmp_path, scenario)

    def grew(name: str) -> float:
        return after[(name, ())] - before[(name, ())]

    assert grew("kafka_server_replicamanager_leadercount") == 3
    assert grew("kafka_server_replicamanager_partitioncount") == 3
    assert grew("kafka_controller_kafkacontroller_globalpartitioncount") == 3
    assert grew("kafka_controller_kafkacontroller_globaltopiccount") == 1
    assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert after[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 0
    assert after[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert after[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0


def test_consumer_group_offsets_and_lag_from_the_coordinator(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Samples:
        await create(broker, "consumed")
        await produce(broker, "consumed", batch(b"1", b"2", b"3", b"4", b"5"))
        await find_coordinator(broker, "readers")
        partition = OffsetCommitRequestPartition(
            partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata=""
        )
        commit = OffsetCommitRequest(
            group_id="readers",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name="consumed", partitions=(partition,)),),
        )
        (topic,) = (await broker.call(OFFSET_COMMIT, 8, commit)).topics
        assert topic.partitions[0].error_code == ErrorCode.none
        return scrape(broker)

    samples = run(tmp_path, scenario)
    labels = (("consumergroup", "readers"), ("partition", "0"), ("topic", "consumed"))
    assert samples[("kafka_consumergroup_current_offset", labels)] == 2
    assert samples[("kafka_consumergroup_lag", labels)] == 3
    assert samples[("kafka_consumergroup_members", (("consumergroup", "readers"),))] == 0


def test_a_deleted_topics_counters_go_and_the_total_stays(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Samples, Samples]:
        await create(broker, "doomed")
        await produce(broker, "doomed", batch(b"x"))
        before = scrape(broker)
        request = DeleteTopicsRequest(
            topics=(DeleteTopicState(name="doomed", topic_id=None),), timeout=timeout_ms(5000)
        )
        await broker.call(DELETE_TOPICS, 6, request)
        async with asyncio.timeout(10):
            while broker.state.node.topic("doomed") is not None:
                await asyncio.sleep(0.01)  # the deletion reaches this broker's topic cache through its watch
        return before, scrape(broker)

    before, after = run(tmp_path, scenario)
    key = ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "doomed"),))
    assert before[key] == 1 and key not in after
    total = ("kafka_server_brokertopicmetrics_messagesin_total", ())
    assert after[total] == before[total]
    assert ("kafka_log_log_size", topic_labels("doomed", 0)) not in after


def test_coordination_session_state(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[Samples]:
        return [scrape(broker, state) for state in (SessionState.CONNECTED, SessionState.SUSPENDED, None)]

    connected, suspended, none = run(tmp_path, scenario)
    assert connected[("barnabas_coordination_session_up", ())] == 1
    assert connected[("barnabas_coordination_session_state", (("state", "connected"),))] == 1
    assert suspended[("barnabas_coordination_session_up", ())] == 0
    assert suspended[("barnabas_coordination_session_state", (("state", "suspended"),))] == 1
    assert none[("barnabas_coordination_session_up", ())] == 0
    assert sum(v for (name, _), v in none.items() if name == "barnabas_coordination_session_state") == 0


def test_isr_changes_count_shrinks_and_expands() -> None:
    metrics = BrokerMetrics()
    metrics.isr_changed((0, 1, 2), (0, 1))
    metrics.isr_changed((0, 1), (0, 1, 2))
    metrics.isr_changed((0, 1), (0, 2))  # one left, one joined: both
    assert (metrics.isr_shrinks, metrics.isr_expands) == (2, 2)
