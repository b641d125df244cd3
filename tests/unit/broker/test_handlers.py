"""Request handlers on a complete broker state, in memory: no socket, no client, real logs and storage.

Each test sends kio request entities through the broker's decoder to its handler and asserts on
the decoded answer (see ``in_memory.py``). What clients see over the wire is tested in
tests/integration; these pin each handler's own behaviour and error codes.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.request import TopicPartitions as ElectTopicPartitions
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v4.request import LeaveGroupRequest, MemberIdentity
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i32Timedelta

from barnabas.protocol import iter_batch_headers
from tests.support.requests import (
    API_VERSIONS,
    CREATE_TOPICS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    api_versions_request,
    batch,
    fetch_request,
    produce_request,
    timeout_ms,
)
from tests.unit.broker.in_memory import ClosedConnectionError, InMemoryBroker, in_memory_broker

T = TypeVar("T")

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, INIT_PRODUCER_ID, DESCRIBE_CONFIGS, DELETE_RECORDS = 15, 16, 22, 32, 21
OFFSET_FOR_LEADER_EPOCH, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 23, 42, 44, 60
TOPIC_RESOURCE, BROKER_RESOURCE, SET = 2, 4, 0
EARLIEST, LATEST = -2, -1


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


async def create(broker: InMemoryBroker, name: str, partitions: int = 1, **configs: str) -> None:
    request = create_topics_request(creatable(name, partitions, **configs))
    (result,) = (await broker.call(CREATE_TOPICS, 7, request)).topics
    assert result.error_code == ErrorCode.none, result


def creatable(name: str, partitions: int = 1, **configs: str) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=tuple(CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()),
    )


def create_topics_request(*topics: CreatableTopic) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=topics, timeout=timeout_ms(10_000), validate_only=False)


async def produce(broker: InMemoryBroker, topic: str, records: bytes, partition: int = 0, acks: int = -1) -> Any:
    response = await broker.call(PRODUCE, 9, produce_request(topic, partition, records, acks))
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partition_responses
    return partition_response


async def fetch(broker: InMemoryBroker, topic: str, offset: int, current_leader_epoch: int = -1) -> Any:
    request = fetch_request([(topic, 0, offset, 1 << 20)], current_leader_epoch=current_leader_epoch)
    (topic_response,) = (await broker.call(FETCH, 12, request)).responses
    (partition,) = topic_response.partitions
    return partition


async def list_offset(broker: InMemoryBroker, topic: str, timestamp: int) -> Any:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp),),
            ),
        ),
    )
    (topic_response,) = (await broker.call(LIST_OFFSETS, 7, request)).topics
    (partition,) = topic_response.partitions
    return partition


# -- ApiVersions, Metadata, CreateTopics --------------------------------------------------------


def test_api_versions_advertises_the_registry(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        response = await broker.call(API_VERSIONS, 3, api_versions_request())
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        assert response.error_code == ErrorCode.none
        assert advertised[PRODUCE] == (0, broker.state.registry.get(PRODUCE).max_version)
        assert advertised[FETCH][1] >= 12 and advertised[METADATA][1] >= 12

    run(tmp_path, scenario)


def test_created_topic_is_in_metadata_led_here(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, "orders", partitions=3)
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = await broker.call(METADATA, 12, request)
        (topic,) = response.topics
        assert topic.error_code == ErrorCode.none and topic.name == "orders"
        assert sorted(int(p.partition_index) for p in topic.partitions) == [0, 1, 2]
        assert {int(p.leader_id) for p in topic.partitions} == {0}
        assert [int(b.node_id) for b in response.brokers] == [0]
        assert int(response.controller_id) == 0

    run(tmp_path, scenario)


def test_create_topics_errors(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> dict[str, Any]:
        await create(broker, "taken")
        request = create_topics_request(creatable("taken"), creatable("bad/name"), creatable("zero", 0))
        return {t.name: t.error_code for t in (await broker.call(CREATE_TOPICS, 7, request)).topics}

    errors = run(tmp_path, scenario)
    assert errors == {
        "taken": ErrorCode.topic_already_exists,
        "bad/name": ErrorCode.invalid_topic_exception,
        "zero": ErrorCode.invalid_partitions,
    }


# -- Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch ---------------------------


def test_produced_batch_is_fetched_back_and_counted(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, "events")
        first = await produce(broker, "events", batch(b"a", b"b", b"c"))
        second = await produce(broker, "events", batch(b"d"))
        assert (first.error_code, int(first.base_offset)) == (ErrorCode.none, 0)
        assert (second.error_code, int(second.base_offset)) == (ErrorCode.none, 3)
        partition = await fetch(broker, "events", 0)
        assert partition.error_code == ErrorCode.none and int(partition.high_watermark) == 4
        bases = [header.base_offset for _, header in iter_batch_headers(partition.records)]
        assert bases == [0, 3]
        assert int((await list_offset(broker, "events", LATEST)).offset) == 4
        assert int((await list_offset(broker, "events", EARLIEST)).offset) == 0

    run(tmp_path, scenario)


def test_produce_to_an_unknown_topic_is_refused(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        return await produce(broker, "missing", batch(b"x"))

    assert run(tmp_path, scenario).error_code == ErrorCode.unknown_topic_or_partition


def test_acks_zero_failure_closes_the_connection(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await produce(broker, "missing", batch(b"x"), acks=0)

    with pytest.raises(ClosedConnectionError):
        run(tmp_path, scenario)


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any]:
        await create(broker, "guarded", **{"min_insync_replicas": "2"})
        return await produce(broker, "guarded", batch(b"x")), await produce(broker, "guarded", batch(b"y"), acks=1)

    acks_all, acks_one = run(tmp_path, scenario)
    assert acks_all.error_code == ErrorCode.not_enough_replicas
    assert acks_one.error_code == ErrorCode.none


def test_fetch_checks_the_leader_epoch(tmp_path: Path) -> None:
    """KIP-320: a newer epoch than the leader's is UNKNOWN_LEADER_EPOCH; -1 is unchecked."""

    async def scenario(broker: InMemoryBroker) -> list[Any]:
        await create(broker, "epochs")
        epoch = broker.state.node.partition_state("epochs", 0).leader_epoch
        return [(await fetch(broker, "epochs", 0, e)).error_code for e in (epoch, epoch + 1, -1)]

    current, newer, unchecked = run(tmp_path, scenario)
    assert current == ErrorCode.none
    assert newer == ErrorCode.unknown_leader_epoch
    assert unchecked == ErrorCode.none


def test_fetch_beyond_the_log_end_is_out_of_range(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, "short")
        await produce(broker, "short", batch(b"x"))
        return await fetch(broker, "short", 5)

    assert run(tmp_path, scenario).error_code == ErrorCode.offset_out_of_range


def test_delete_records_moves_the_log_start(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any]:
        await create(broker, "trimmed")
        for value in (b"a", b"b", b"c"):
            await produce(broker, "trimmed", batch(value))
        request = DeleteRecordsRequest(
            topics=(
                DeleteRecordsTopic(name="trimmed", partitions=(DeleteRecordsPartition(partition_index=0, offset=2),)),
            ),
            timeout=timeout_ms(5000),
        )
        (topic,) = (await broker.call(DELETE_RECORDS, 2, request)).topics
        return topic.partitions[0], await list_offset(broker, "trimmed", EARLIEST)

    deleted, earliest = run(tmp_path, scenario)
    assert (deleted.error_code, int(deleted.low_watermark)) == (ErrorCode.none, 2)
    assert int(earliest.offset) == 2


def test_offset_for_leader_epoch_answers_the_log_end(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, "fenced")
        await produce(broker, "fenced", batch(b"a", b"b"))
        epoch = broker.state.node.partition_state("fenced", 0).leader_epoch
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=(
                OffsetForLeaderTopic(
                    topic="fenced",
                    partitions=(OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=epoch),),
                ),
            ),
        )
        (topic,) = (await broker.call(OFFSET_FOR_LEADER_EPOCH, 4, request)).topics
        return epoch, topic.partitions[0]

    epoch, answer = run(tmp_path, scenario)
    assert answer.error_code == ErrorCode.none
    assert (int(answer.leader_epoch), int(answer.end_offset)) == (epoch, 2)


# -- groups -------------------------------------------------------------------------------------


async def find_coordinator(broker: InMemoryBroker, group: str) -> Any:
    """FindCoordinator for ``group``, then wait until its partition of __consumer_offsets is loaded."""
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
    (coordinator,) = (await broker.call(FIND_COORDINATOR, 4, request)).coordinators
    async with asyncio.timeout(10):
        while broker.state.groups.group_status(group) is not ErrorCode.none:
            await asyncio.sleep(0.01)  # the load runs as a task on this loop
    return coordinator


async def join(broker: InMemoryBroker, group: str, member_id: str = "") -> Any:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"subscription"),),
    )
    return await broker.call(JOIN_GROUP, 7, request)


def heartbeat(group: str, generation: int, member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None)


def test_group_lifecycle(tmp_path: Path) -> None:
    """FindCoordinator creates __consumer_offsets; a member joins (v4+: with the id it was given),
    syncs, heartbeats, commits and fetches offsets, and leaves."""

    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, "t", partitions=2)
        coordinator = await find_coordinator(broker, "g")
        assert (coordinator.error_code, int(coordinator.node_id)) == (ErrorCode.none, 0)
        assert broker.state.node.topic("__consumer_offsets") is not None

        first = await join(broker, "g")
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        joined = await join(broker, "g", first.member_id)
        assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
        generation = int(joined.generation_id)

        sync = SyncGroupRequest(
            group_id="g",
            generation_id=generation,
            member_id=first.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"assignment"),),
        )
        synced = await broker.call(SYNC_GROUP, 5, sync)
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"assignment")
        beat = await broker.call(HEARTBEAT, 4, heartbeat("g", generation, first.member_id))
        assert beat.error_code == ErrorCode.none
        stale = await broker.call(HEARTBEAT, 4, heartbeat("g", generation + 1, first.member_id))
        assert stale.error_code == ErrorCode.illegal_generation

        commit = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=generation,
            member_id=first.member_id,
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="meta"
                        ),
                    ),
                ),
            ),
        )
        (committed,) = (await broker.call(OFFSET_COMMIT, 8, commit)).topics
        assert committed.partitions[0].error_code == ErrorCode.none
        fetch_offsets = OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(
                    group_id="g", topics=(OffsetFetchRequestTopics(name="t", partition_indexes=(0, 1)),)
                ),
            )
        )
        (group,) = (await broker.call(OFFSET_FETCH, 8, fetch_offsets)).groups
        offsets = {int(p.partition_index): (int(p.committed_offset), p.metadata) for p in group.topics[0].partitions}
        assert offsets == {0: (42, "meta"), 1: (-1, "")}

        (described,) = (
            await broker.call(
                DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=("g",), include_authorized_operations=False)
            )
        ).groups
        assert (described.group_state, len(described.members)) == ("Stable", 1)
        listed = await broker.call(LIST_GROUPS, 4, ListGroupsRequest(states_filter=()))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]
        (refused,) = (await broker.call(DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=("g",)))).results
        assert refused.error_code == ErrorCode.non_empty_group

        left = await broker.call(
            LEAVE_GROUP,
            4,
            LeaveGroupRequest(
                group_id="g", members=(MemberIdentity(member_id=first.member_id, group_instance_id=None),)
            ),
        )
        assert left.error_code == ErrorCode.none and left.members[0].error_code == ErrorCode.none
        (deleted,) = (await broker.call(DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=("g",)))).results
        assert deleted.error_code == ErrorCode.none

    run(tmp_path, scenario)


def test_heartbeat_of_an_unknown_member_is_refused(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await find_coordinator(broker, "lonely")
        await join(broker, "lonely")
        return await broker.call(HEARTBEAT, 4, heartbeat("lonely", 1, "stranger"))

    assert run(tmp_path, scenario).error_code == ErrorCode.unknown_member_id


# -- configs, producer ids, cluster ---------------------------------------------------------------


def alter_resource(topic: str, name: str, value: str) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=TOPIC_RESOURCE,
        resource_name=topic,
        configs=(AlterableConfig(name=name, config_operation=SET, value=value),),
    )


def test_topic_config_is_altered_and_described(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> dict[str, Any]:
        await create(broker, "configured")
        alter = IncrementalAlterConfigsRequest(
            resources=(alter_resource("configured", "retention.ms", "1234"),),
            validate_only=False,
        )
        (altered,) = (await broker.call(INCREMENTAL_ALTER_CONFIGS, 1, alter)).responses
        assert altered.error_code == ErrorCode.none
        describe = DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name="configured",
                    configuration_keys=("retention.ms", "cleanup.policy"),
                ),
            ),
        )
        (described,) = (await broker.call(DESCRIBE_CONFIGS, 4, describe)).results
        assert described.error_code == ErrorCode.none
        return {c.name: c for c in described.configs}

    configs = run(tmp_path, scenario)
    assert configs["retention.ms"].value == "1234"
    assert configs["cleanup.policy"].value == "delete"
    assert int(configs["retention.ms"].config_source) == 1  # DYNAMIC_TOPIC_CONFIG


@pytest.mark.parametrize("settings", [{}, {"log.initial.task.delay.ms": "0"}])
def test_an_internal_broker_setting_is_described_only_when_set(tmp_path: Path, settings: dict[str, str]) -> None:
    """As Kafka's DescribeConfigs lists a defineInternal setting (log.initial.task.delay.ms) only from the originals."""

    async def main() -> dict[str, Any]:
        async with in_memory_broker(tmp_path, settings) as broker:
            broker_id = str(broker.broker.broker_id)
            describe = DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(
                        resource_type=BROKER_RESOURCE, resource_name=broker_id, configuration_keys=None
                    ),
                )
            )
            (described,) = (await broker.call(DESCRIBE_CONFIGS, 4, describe)).results
            assert described.error_code == ErrorCode.none
            return {c.name: c.value for c in described.configs}

    configs = asyncio.run(asyncio.wait_for(main(), 60))
    assert "log.retention.check.interval.ms" in configs
    assert configs.get("log.initial.task.delay.ms") == settings.get("log.initial.task.delay.ms")


@pytest.mark.parametrize("keys", [None, ()])
def test_no_configuration_keys_describe_every_setting(tmp_path: Path, keys: tuple[str, ...] | None) -> None:
    """Null or empty configuration_keys both mean every setting, as in Kafka's ConfigHelper."""

    async def scenario(broker: InMemoryBroker) -> list[Any]:
        await create(broker, "everything")
        resources = (
            DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="everything", configuration_keys=keys),
            DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=str(broker.broker.broker_id), configuration_keys=keys
            ),
        )
        return list((await broker.call(DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=resources))).results)

    topic, broker = run(tmp_path, scenario)
    assert "retention.ms" in {c.name for c in topic.configs}
    assert "log.retention.check.interval.ms" in {c.name for c in broker.configs}


def test_unknown_topic_config_is_refused(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, "strict")
        alter = IncrementalAlterConfigsRequest(
            resources=(alter_resource("strict", "no.such.key", "1"),),
            validate_only=False,
        )
        (result,) = (await broker.call(INCREMENTAL_ALTER_CONFIGS, 1, alter)).responses
        return result

    assert run(tmp_path, scenario).error_code == ErrorCode.invalid_config


def test_init_producer_id_hands_out_new_ids(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[Any]:
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout=timeout_ms(60_000), producer_id=-1, producer_epoch=-1
        )
        return [await broker.call(INIT_PRODUCER_ID, 4, request) for _ in range(2)]

    first, second = run(tmp_path, scenario)
    assert first.error_code == second.error_code == ErrorCode.none
    assert int(first.producer_id) >= 0 and int(second.producer_id) != int(first.producer_id)
    assert int(first.producer_epoch) == 0


def test_describe_cluster_names_this_broker_controller(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        return await broker.call(
            DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1)
        ), broker.state.node.cluster_id

    response, cluster_id = run(tmp_path, scenario)
    assert response.error_code == ErrorCode.none
    assert (response.cluster_id, int(response.controller_id)) == (cluster_id, 0)
    assert [(int(b.broker_id), b.host, int(b.port)) for b in response.brokers] == [(0, "127.0.0.1", 9092)]


# -- topic admin, leadership, log dirs, offset deletion -----------------------------------------------

DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS, DESCRIBE_LOG_DIRS, OFFSET_DELETE = 20, 37, 43, 35, 47
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46


async def controller_elected(broker: InMemoryBroker) -> None:
    async with asyncio.timeout(10):
        while broker.state.controller.fence is None:
            await asyncio.sleep(0.01)  # the candidacy runs as a task on this loop


def test_delete_topics_removes_the_topic(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any, bool]:
        await create(broker, "doomed")
        request = DeleteTopicsRequest(
            topics=(DeleteTopicState(name="doomed", topic_id=None), DeleteTopicState(name="never", topic_id=None)),
            timeout=timeout_ms(5000),
        )
        deleted, unknown = (await broker.call(DELETE_TOPICS, 6, request)).responses
        return deleted, unknown, broker.state.node.topic("doomed") is None

    deleted, unknown, gone = run(tmp_path, scenario)
    assert (deleted.name, deleted.error_code) == ("doomed", ErrorCode.none)
    assert (unknown.name, unknown.error_code) == ("never", ErrorCode.unknown_topic_or_partition)
    assert gone


def test_create_partitions_grows_and_refuses_to_shrink(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any, int]:
        await create(broker, "growing")

        def grow_to(count: int) -> CreatePartitionsRequest:
            topic = CreatePartitionsTopic(name="growing", count=count, assignments=None)
            return CreatePartitionsRequest(topics=(topic,), timeout=timeout_ms(5000), validate_only=False)

        (grown,) = (await broker.call(CREATE_PARTITIONS, 3, grow_to(3))).results
        (shrunk,) = (await broker.call(CREATE_PARTITIONS, 3, grow_to(2))).results
        topic = broker.state.node.topic("growing")
        assert topic is not None
        return grown, shrunk, topic.partition_count

    grown, shrunk, count = run(tmp_path, scenario)
    assert grown.error_code == ErrorCode.none and count == 3
    assert shrunk.error_code == ErrorCode.invalid_partitions


def test_elect_preferred_leader_that_already_leads_is_not_needed(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, "led")
        await controller_elected(broker)
        request = ElectLeadersRequest(
            election_type=0,
            topic_partitions=(ElectTopicPartitions(topic="led", partitions=(0,)),),
            timeout=timeout_ms(5000),
        )
        response = await broker.call(ELECT_LEADERS, 2, request)
        assert response.error_code == ErrorCode.none
        (topic,) = response.replica_election_results
        return topic.partition_result[0]

    assert run(tmp_path, scenario).error_code == ErrorCode.election_not_needed


def test_reassignments_are_listed_and_a_cancel_without_one_is_refused(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any]:
        await create(broker, "placed")
        await controller_elected(broker)
        listed = await broker.call(
            LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest(timeout=timeout_ms(5000), topics=None)
        )
        cancel = AlterPartitionReassignmentsRequest(
            timeout=timeout_ms(5000),
            topics=(
                ReassignableTopic(name="placed", partitions=(ReassignablePartition(partition_index=0, replicas=None),)),
            ),
        )
        return listed, await broker.call(ALTER_PARTITION_REASSIGNMENTS, 0, cancel)

    listed, cancelled = run(tmp_path, scenario)
    assert listed.error_code == ErrorCode.none and listed.topics == ()
    (topic,) = cancelled.responses
    assert topic.partitions[0].error_code == ErrorCode.no_reassignment_in_progress


def test_describe_log_dirs_counts_the_bytes_written(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, "sized", partitions=2)
        await produce(broker, "sized", batch(b"x" * 1000))
        return await broker.call(DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))

    response = run(tmp_path, scenario)
    (result,) = response.results
    assert result.error_code == ErrorCode.none and result.log_dir.endswith("data")
    sizes = {(t.name, int(p.partition_index)): int(p.partition_size) for t in result.topics for p in t.partitions}
    assert sizes[("sized", 0)] > 1000 and sizes[("sized", 1)] == 0


def test_offset_delete_forgets_an_empty_groups_offsets(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[Any, Any]:
        await create(broker, "kept")
        await find_coordinator(broker, "standalone")
        commit = OffsetCommitRequest(
            group_id="standalone",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name="kept",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata=""
                        ),
                    ),
                ),
            ),
        )
        await broker.call(OFFSET_COMMIT, 8, commit)
        delete = OffsetDeleteRequest(
            group_id="standalone",
            topics=(
                OffsetDeleteRequestTopic(name="kept", partitions=(OffsetDeleteRequestPartition(partition_index=0),)),
            ),
        )
        deleted = await broker.call(OFFSET_DELETE, 0, delete)
        fetched = OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(
                    group_id="standalone", topics=(OffsetFetchRequestTopics(name="kept", partition_indexes=(0,)),)
                ),
            )
        )
        (group,) = (await broker.call(OFFSET_FETCH, 8, fetched)).groups
        return deleted, group

    deleted, group = run(tmp_path, scenario)
    assert deleted.error_code == ErrorCode.none
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    assert int(group.topics[0].partitions[0].committed_offset) == -1
