"""The group coordinator's error semantics, request by request, on the wire (Kafka's answers).

One broker (``group.initial.rebalance.delay.ms=0`` so a lone member's rebalance completes at
once). Each test uses its own group id, so the groups never interact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v4.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import batch, connect, create_topic, produce, timeout_ms, unique

pytestmark = pytest.mark.timeout(120)

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS = 8, 9, 42


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    properties = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    started = BrokerProcess(Path(tmp_path_factory.mktemp("groups")) / "b0", properties=properties).start()
    yield started
    started.kill()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawKafkaClient]:
    with connect(broker) as raw:
        yield raw


def coordinator_ready(client: RawKafkaClient, group: str) -> None:
    """FindCoordinator until it names this broker (it creates __consumer_offsets on first use)."""
    deadline = time.monotonic() + 30
    while True:
        response = client.request(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        (found,) = response.coordinators
        if found.error_code == ErrorCode.none:
            return
        assert found.error_code == ErrorCode.coordinator_not_available, found
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.05)


def join_request(
    group: str, member_id: str = "", *, instance: str | None = None, session_ms: int = 10000, rebalance_ms: int = 10000
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout=timeout_ms(session_ms),
        rebalance_timeout=timeout_ms(rebalance_ms),
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),),
    )


def join(
    client: RawKafkaClient,
    group: str,
    member_id: str = "",
    *,
    instance: str | None = None,
    session_ms: int = 10000,
    rebalance_ms: int = 10000,
) -> Any:
    request = join_request(group, member_id, instance=instance, session_ms=session_ms, rebalance_ms=rebalance_ms)
    deadline = time.monotonic() + 30
    while True:
        response = client.request(JOIN_GROUP, 7, request, timeout=30)
        if response.error_code != ErrorCode.coordinator_load_in_progress or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def sync(client: RawKafkaClient, group: str, generation: int, member_id: str, assignment: bytes = b"a") -> Any:
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(SyncGroupRequestAssignment(member_id=member_id, assignment=assignment),),
    )
    return client.request(SYNC_GROUP, 5, request)


def heartbeat(client: RawKafkaClient, group: str, generation: int, member_id: str, instance: str | None = None) -> int:
    request = HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance
    )
    return int(client.request(HEARTBEAT, 4, request).error_code)


def commit(client: RawKafkaClient, group: str, member: tuple[int, str], topic: str, offset: int) -> int:
    generation, member_id = member
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=(
            OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="md"
                    ),
                ),
            ),
        ),
    )
    (topic_result,) = client.request(OFFSET_COMMIT, 8, request).topics
    return int(topic_result.partitions[0].error_code)


def fetch(client: RawKafkaClient, group: str, topic: str) -> tuple[int, str]:
    request = OffsetFetchRequest(
        groups=(
            OffsetFetchRequestGroup(
                group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)
            ),
        ),
        require_stable=False,
    )
    (group_result,) = client.request(OFFSET_FETCH, 8, request).groups
    partition = group_result.topics[0].partitions[0]
    return int(partition.committed_offset), str(partition.metadata)


def joined_member(client: RawKafkaClient, group: str) -> tuple[str, int]:
    """A member that went through MEMBER_ID_REQUIRED, JoinGroup and SyncGroup: (member id, generation)."""
    coordinator_ready(client, group)
    first = join(client, group)
    assert first.error_code == ErrorCode.member_id_required and first.member_id
    joined = join(client, group, first.member_id)
    assert joined.error_code == ErrorCode.none, joined
    assert sync(client, group, joined.generation_id, joined.member_id).error_code == ErrorCode.none
    return joined.member_id, int(joined.generation_id)


def test_join_needs_a_member_id_then_leads_a_new_generation(client: RawKafkaClient) -> None:
    group = unique("join")
    coordinator_ready(client, group)
    first = join(client, group)
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith("raw-client-")
    joined = join(client, group, first.member_id)
    assert joined.error_code == ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.member_id) == (1, first.member_id, first.member_id)
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, b"\x00\x01")]
    synced = sync(client, group, 1, first.member_id, assignment=b"mine")
    assert (synced.error_code, bytes(synced.assignment)) == (ErrorCode.none, b"mine")


def test_bad_joins_get_kafkas_errors(client: RawKafkaClient) -> None:
    group = unique("bad-join")
    coordinator_ready(client, group)
    assert join(client, group, session_ms=1000).error_code == ErrorCode.invalid_session_timeout
    assert join(client, group, "never-issued").error_code == ErrorCode.unknown_member_id
    assert join(client, "").error_code == ErrorCode.invalid_group_id


def test_heartbeats_and_syncs_check_member_and_generation(client: RawKafkaClient) -> None:
    group = unique("beat")
    member, generation = joined_member(client, group)
    assert heartbeat(client, group, generation, member) == ErrorCode.none
    assert heartbeat(client, group, generation + 1, member) == ErrorCode.illegal_generation
    assert heartbeat(client, group, generation, "stranger") == ErrorCode.unknown_member_id
    assert sync(client, group, generation + 1, member).error_code == ErrorCode.illegal_generation
    assert heartbeat(client, unique("no-such-group"), 1, member) == ErrorCode.unknown_member_id


def test_commits_need_the_current_generation_and_a_known_topic(client: RawKafkaClient, broker: BrokerProcess) -> None:
    group, topic = unique("commit"), unique("committed")
    create_topic(client, topic)
    member, generation = joined_member(client, group)
    assert commit(client, group, (generation + 1, member), topic, 5) == ErrorCode.illegal_generation
    assert commit(client, group, (generation, "stranger"), topic, 5) == ErrorCode.unknown_member_id
    assert commit(client, group, (generation, member), unique("absent"), 5) == ErrorCode.unknown_topic_or_partition
    assert fetch(client, group, topic) == (-1, ""), "nothing committed yet"
    assert commit(client, group, (generation, member), topic, 5) == ErrorCode.none
    assert fetch(client, group, topic) == (5, "md")


def test_a_group_without_members_takes_commits_from_anyone(client: RawKafkaClient) -> None:
    """Consumers that assign partitions themselves commit with generation -1 and no member id."""
    group, topic = unique("standalone"), unique("standalone-topic")
    create_topic(client, topic)
    coordinator_ready(client, group)
    assert commit(client, group, (-1, ""), topic, 12) == ErrorCode.none
    assert fetch(client, group, topic) == (12, "md")


def test_a_restarted_static_member_fences_its_old_id(client: RawKafkaClient) -> None:
    group = unique("static")
    coordinator_ready(client, group)
    first = join(client, group, instance="instance-1")
    assert first.error_code == ErrorCode.none, "static members need no second join"
    assert sync(client, group, first.generation_id, first.member_id).error_code == ErrorCode.none
    again = join(client, group, instance="instance-1")
    assert again.error_code == ErrorCode.none and again.member_id != first.member_id
    assert again.generation_id == first.generation_id, "a static member's restart does not rebalance"
    old = heartbeat(client, group, first.generation_id, first.member_id, "instance-1")
    assert old == ErrorCode.fenced_instance_id
    assert heartbeat(client, group, again.generation_id, again.member_id, "instance-1") == ErrorCode.none


def test_leave_and_delete(client: RawKafkaClient) -> None:
    group = unique("leave")
    member, _ = joined_member(client, group)
    deleted = client.request(DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=(group, unique("absent"))))
    codes = [r.error_code for r in deleted.results]
    assert codes == [ErrorCode.non_empty_group, ErrorCode.group_id_not_found]
    left = client.request(
        LEAVE_GROUP,
        4,
        LeaveGroupRequest(
            group_id=group,
            members=(
                MemberIdentity(member_id=member, group_instance_id=None),
                MemberIdentity(member_id="x", group_instance_id=None),
            ),
        ),
    )
    assert left.error_code == ErrorCode.none
    assert [m.error_code for m in left.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
    deleted = client.request(DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=(group,)))
    assert [r.error_code for r in deleted.results] == [ErrorCode.none]


def test_clients_cannot_write_the_offsets_topic(client: RawKafkaClient) -> None:
    coordinator_ready(client, unique("internal"))
    refused = produce(client, "__consumer_offsets", 0, batch(b"forged"))
    assert refused.error_code == ErrorCode.invalid_topic_exception


def test_deleting_a_topic_deletes_its_committed_offsets(client: RawKafkaClient, broker: BrokerProcess) -> None:
    group, topic = unique("forget"), unique("doomed")
    create_topic(client, topic)
    coordinator_ready(client, group)
    assert commit(client, group, (-1, ""), topic, 7) == ErrorCode.none
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while fetch(client, group, topic) != (-1, ""):
        assert time.monotonic() < deadline, "the deleted topic's offsets are still committed"
        time.sleep(0.05)
    assert f"removed 1 offsets of deleted topics {topic}" in broker.log_text()


def test_a_joining_member_puts_the_group_in_rebalance(client: RawKafkaClient, broker: BrokerProcess) -> None:
    """Heartbeats answer REBALANCE_IN_PROGRESS until the old member rejoins; then both get generation 2."""
    group = unique("rebalance")
    member, generation = joined_member(client, group)
    with connect(broker) as second:
        first_try = join(second, group)
        assert first_try.error_code == ErrorCode.member_id_required
        pending = second.send_request(JOIN_GROUP, 7, join_request(group, first_try.member_id))
        deadline = time.monotonic() + 10
        while (code := heartbeat(client, group, generation, member)) == ErrorCode.none:
            assert time.monotonic() < deadline, "the new member's join never started a rebalance"
            time.sleep(0.02)
        assert code == ErrorCode.rebalance_in_progress
        assert commit(client, group, (generation, member), unique("absent"), 1) == ErrorCode.unknown_topic_or_partition
        rejoined = join(client, group, member)
        newcomer = second.read_response(JOIN_GROUP, 7, pending, timeout=30)
    assert (rejoined.error_code, newcomer.error_code) == (ErrorCode.none, ErrorCode.none)
    assert rejoined.generation_id == newcomer.generation_id == generation + 1
    assert rejoined.leader == newcomer.leader == member, "the member that rejoined first stays leader"
    assert len(rejoined.members) == 2 and newcomer.members == ()


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(
    client: RawKafkaClient, broker: BrokerProcess
) -> None:
    group = unique("no-sync")
    coordinator_ready(client, group)
    first = join(client, group, instance="leader", rebalance_ms=2000)
    assert sync(client, group, first.generation_id, first.member_id).error_code == ErrorCode.none
    with connect(broker) as second:
        pending = second.send_request(JOIN_GROUP, 7, join_request(group, instance="silent", rebalance_ms=2000))
        deadline = time.monotonic() + 10
        while heartbeat(client, group, first.generation_id, first.member_id, "leader") == ErrorCode.none:
            assert time.monotonic() < deadline, "the second member's join never started a rebalance"
            time.sleep(0.02)
        rejoined = join(client, group, first.member_id, instance="leader", rebalance_ms=2000)
        silent = second.read_response(JOIN_GROUP, 7, pending, timeout=30)
        assert rejoined.generation_id == silent.generation_id == first.generation_id + 1
        assert sync(client, group, rejoined.generation_id, rejoined.member_id).error_code == ErrorCode.none
        # The silent member never sends SyncGroup: 2 s later it is removed and the group rebalances.
        deadline = time.monotonic() + 10
        while (
            code := heartbeat(client, group, rejoined.generation_id, rejoined.member_id, "leader")
        ) == ErrorCode.none:
            assert time.monotonic() < deadline, "the member that never synced is still in the group"
            time.sleep(0.05)
        assert code == ErrorCode.rebalance_in_progress
        alone = join(client, group, rejoined.member_id, instance="leader", rebalance_ms=2000)
        assert alone.generation_id == rejoined.generation_id + 1
        assert [m.member_id for m in alone.members] == [rejoined.member_id]
    assert "removing members that never sent SyncGroup" in broker.log_text()
