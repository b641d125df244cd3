"""Request views (broker/handlers/_view.py): one typed shape per request, whatever version kio decoded.

Bodies are encoded with kio and decoded by the broker's own ``decode_request``, so the views are
built from what the native decoder really hands over (plain ints and strs, timedeltas).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema

from barnabas.broker.handlers import (
    acls,
    api_versions,
    build_registry,
    client_quotas,
    cluster,
    config_changes,
    configs,
    delete_records,
    describe_topic_partitions,
    fetch,
    group_admin,
    groups,
    leader_epochs,
    leadership,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_ids,
    sasl,
    scram_credentials,
    topics,
    unregister_broker,
)
from barnabas.broker.handlers._view import converter, view_of
from barnabas.broker.registry import ApiSpec
from barnabas.protocol import ProduceRequestData, Request, decode_request, encode_request, request_class

#: The view each handler reads its request through.
VIEWS: dict[int, type] = {
    fetch.API_KEY: fetch.FetchRequest,
    list_offsets.API_KEY: list_offsets.ListOffsetsRequest,
    metadata.API_KEY: metadata.MetadataRequest,
    offsets.OFFSET_COMMIT: offsets.OffsetCommitRequest,
    offsets.OFFSET_FETCH: offsets.OffsetFetchRequest,
    offsets.OFFSET_DELETE: offsets.OffsetDeleteRequest,
    groups.FIND_COORDINATOR: groups.FindCoordinatorRequest,
    groups.JOIN_GROUP: groups.JoinGroupRequest,
    groups.HEARTBEAT: groups.HeartbeatRequest,
    groups.LEAVE_GROUP: groups.LeaveGroupRequest,
    groups.SYNC_GROUP: groups.SyncGroupRequest,
    group_admin.DESCRIBE_GROUPS: group_admin.DescribeGroupsRequest,
    group_admin.LIST_GROUPS: group_admin.ListGroupsRequest,
    group_admin.DELETE_GROUPS: group_admin.DeleteGroupsRequest,
    topics.CREATE_TOPICS: topics.CreateTopicsRequest,
    topics.DELETE_TOPICS: topics.DeleteTopicsRequest,
    topics.CREATE_PARTITIONS: topics.CreatePartitionsRequest,
    delete_records.API_KEY: delete_records.DeleteRecordsRequest,
    producer_ids.API_KEY: producer_ids.InitProducerIdRequest,
    leader_epochs.API_KEY: leader_epochs.OffsetForLeaderEpochRequest,
    configs.DESCRIBE_CONFIGS: configs.DescribeConfigsRequest,
    config_changes.INCREMENTAL_ALTER_CONFIGS: config_changes.IncrementalAlterConfigsRequest,
    config_changes.ALTER_CONFIGS: config_changes.AlterConfigsRequest,
    log_dirs.API_KEY: log_dirs.DescribeLogDirsRequest,
    leadership.ELECT_LEADERS: leadership.ElectLeadersRequest,
    leadership.ALTER_PARTITION_REASSIGNMENTS: leadership.AlterPartitionReassignmentsRequest,
    leadership.LIST_PARTITION_REASSIGNMENTS: leadership.ListPartitionReassignmentsRequest,
    cluster.API_KEY: cluster.DescribeClusterRequest,
    describe_topic_partitions.API_KEY: describe_topic_partitions.DescribeTopicPartitionsRequest,
    sasl.HANDSHAKE_KEY: sasl.SaslHandshakeRequest,
    sasl.AUTHENTICATE_KEY: sasl.SaslAuthenticateRequest,
    scram_credentials.DESCRIBE_KEY: scram_credentials.DescribeUserScramCredentialsRequest,
    scram_credentials.ALTER_KEY: scram_credentials.AlterUserScramCredentialsRequest,
    acls.DESCRIBE_ACLS: acls.AclFilterView,
    acls.CREATE_ACLS: acls.CreateAclsRequest,
    acls.DELETE_ACLS: acls.DeleteAclsRequest,
    client_quotas.DESCRIBE_KEY: client_quotas.DescribeClientQuotasRequest,
    client_quotas.ALTER_KEY: client_quotas.AlterClientQuotasRequest,
    unregister_broker.API_KEY: unregister_broker.UnregisterBrokerRequest,
}
#: Handlers that read no kio body: ApiVersions reads none of its fields; Produce's body comes from
#: the protocol's own decoder, typed already (ProduceRequestData).
NO_VIEW = {api_versions.API_KEY, produce.API_KEY}


def served(spec: ApiSpec) -> range:
    return range(spec.min_version if spec.accept_min is None else spec.accept_min, spec.max_version + 1)


def decoded(api_key: int, version: int, body: Any) -> Any:
    """``body`` as the broker receives it: encoded by kio, decoded by ``decode_request``."""
    return decode_request(encode_request(api_key, version, 1, "views", body)[4:]).body


def entity(api_key: int, version: int, name: str | None = None, /, **fields: Any) -> Any:
    return request_class(api_key, version, name)(**fields)


# -- every served request, every served version ------------------------------------------------


def test_every_served_request_is_read_through_a_view() -> None:
    assert {spec.key for spec in build_registry()} == VIEWS.keys() | NO_VIEW
    assert not VIEWS.keys() & NO_VIEW


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(spec.key, version) for spec in build_registry() if spec.key in VIEWS for version in served(spec)],
)
def test_the_view_fits_every_served_version(api_key: int, version: int) -> None:
    """Every kio field has its view field, of a type that holds kio's values, recursively."""
    convert = converter(VIEWS[api_key], load_request_schema(api_key, version))
    assert convert is converter(VIEWS[api_key], load_request_schema(api_key, version))


@pytest.mark.parametrize("view", sorted(VIEWS.values(), key=lambda view: view.__name__))
def test_views_are_frozen_slotted_and_keyword_only(view: type) -> None:
    params = view.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert "__slots__" in vars(view)
    assert all(field.kw_only for field in dataclasses.fields(view))


# -- values: defaults for absent fields, nested views, durations -------------------------------


def fetch_body(version: int, **request_fields: Any) -> Any:
    partition = entity(1, version, "FetchPartition", partition=3, fetch_offset=42, partition_max_bytes=1024)
    topic = entity(1, version, "FetchTopic", topic="orders", partitions=(partition,))
    if version >= 7:
        request_fields.setdefault("forgotten_topics_data", ())
    return decoded(1, version, entity(1, version, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
                                      topics=(topic,), **request_fields))  # fmt: skip


def test_fields_an_old_version_lacks_take_kafkas_defaults() -> None:
    body = view_of(fetch.FetchRequest, fetch_body(4))
    assert (body.session_id, body.session_epoch, body.forgotten_topics_data) == (0, -1, ())
    assert (body.rack_id, body.cluster_id) == ("", None)
    [topic] = body.topics
    assert topic.partitions == (
        fetch.FetchPartition(
            partition=3,
            fetch_offset=42,
            partition_max_bytes=1024,
            log_start_offset=-1,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
        ),
    )


def test_fields_a_new_version_has_are_carried() -> None:
    forgotten = entity(1, 12, "ForgottenTopic", topic="gone", partitions=(1, 2))
    body = view_of(
        fetch.FetchRequest,
        fetch_body(12, replica_id=5, isolation_level=1, session_id=9, forgotten_topics_data=(forgotten,),
                   rack_id="rack-a", cluster_id="c1"),
    )  # fmt: skip
    assert (body.replica_id, body.isolation_level, body.session_id, body.rack_id, body.cluster_id) == (
        5, 1, 9, "rack-a", "c1",
    )  # fmt: skip
    assert body.forgotten_topics_data == (fetch.ForgottenTopic(topic="gone", partitions=(1, 2)),)


def test_nested_entities_become_nested_views() -> None:
    body = view_of(fetch.FetchRequest, fetch_body(12))
    assert type(body.topics) is tuple
    assert type(body.topics[0]) is fetch.FetchTopic
    assert type(body.topics[0].partitions[0]) is fetch.FetchPartition


def test_kio_durations_become_milliseconds() -> None:
    body = view_of(fetch.FetchRequest, fetch_body(4))
    assert body.max_wait_ms == 500
    assert type(body.max_wait_ms) is int
    protocol = entity(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b"\x00\x01")
    join = entity(11, 5, group_id="g", session_timeout=datetime.timedelta(seconds=45), member_id="",
                  protocol_type="consumer", protocols=(protocol,), rebalance_timeout=datetime.timedelta(minutes=5),
                  group_instance_id="static-1")  # fmt: skip
    view = view_of(groups.JoinGroupRequest, decoded(11, 5, join))
    assert (view.session_timeout_ms, view.rebalance_timeout_ms) == (45_000, 300_000)
    assert view.group_instance_id == "static-1"
    assert view.protocols == (groups.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),)


def test_join_group_v0_has_no_rebalance_timeout() -> None:
    join = entity(11, 0, group_id="g", session_timeout=datetime.timedelta(seconds=10), member_id="",
                  protocol_type="consumer", protocols=())  # fmt: skip
    view = view_of(groups.JoinGroupRequest, decoded(11, 0, join))
    assert (view.session_timeout_ms, view.rebalance_timeout_ms, view.group_instance_id) == (10_000, -1, None)


def test_null_lists_stay_null() -> None:
    assert view_of(metadata.MetadataRequest, decoded(3, 1, entity(3, 1, topics=None))).topics is None
    by_id = uuid.uuid4()
    topic = entity(3, 12, "MetadataRequestTopic", name=None, topic_id=by_id)
    body = view_of(
        metadata.MetadataRequest,
        decoded(3, 12, entity(3, 12, topics=(topic,), allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)),
    )  # fmt: skip
    assert body.topics == (metadata.MetadataRequestTopic(name=None, topic_id=by_id),)
    assert body.allow_auto_topic_creation is False


def test_metadata_before_v4_allows_auto_creation() -> None:
    topic = entity(3, 0, "MetadataRequestTopic", name="orders")
    body = view_of(metadata.MetadataRequest, decoded(3, 0, entity(3, 0, topics=(topic,))))
    assert body.allow_auto_topic_creation is True
    assert body.topics == (metadata.MetadataRequestTopic(name="orders", topic_id=None),)


def test_one_view_reads_differently_named_kio_entities() -> None:
    """OffsetFetch's topics are OffsetFetchRequestTopic before v8 and OffsetFetchRequestTopics inside groups after."""
    old_topic = entity(9, 7, "OffsetFetchRequestTopic", name="orders", partition_indexes=(0, 1))
    old = view_of(offsets.OffsetFetchRequest, decoded(9, 7, entity(9, 7, group_id="g", topics=(old_topic,))))
    new_topic = entity(9, 8, "OffsetFetchRequestTopics", name="orders", partition_indexes=(0, 1))
    group = entity(9, 8, "OffsetFetchRequestGroup", group_id="g", topics=(new_topic,))
    new = view_of(offsets.OffsetFetchRequest, decoded(9, 8, entity(9, 8, groups=(group,))))
    expected = (offsets.OffsetFetchRequestTopic(name="orders", partition_indexes=(0, 1)),)
    assert old.topics == new.groups[0].topics == expected
    assert (old.group_id, old.groups, new.group_id, new.topics) == ("g", (), "", ())
    assert (new.groups[0].member_id, new.groups[0].member_epoch) == (None, -1)


def test_views_are_frozen() -> None:
    body = view_of(fetch.FetchRequest, fetch_body(12))
    with pytest.raises(dataclasses.FrozenInstanceError):
        body.min_bytes = 0  # type: ignore[misc]


# -- views that do not fit are refused when their converter is made -----------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicWithoutId:
    name: str | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicNameNeverNull:
    name: str
    topic_id: uuid.UUID | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicIdRequired:
    name: str | None
    topic_id: uuid.UUID | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProducerTimeoutAsDuration:
    transactional_id: str | None
    transaction_timeout: datetime.timedelta
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProducerTimeoutAsText:
    transactional_id: str | None
    transaction_timeout_ms: str
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unslotted:
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        assert self.generation_id >= 0


@pytest.mark.parametrize(
    ("view", "api_key", "version", "entity_name", "problem"),
    [
        (TopicWithoutId, 3, 12, "MetadataRequestTopic", "lacks .*'topic_id'"),
        (TopicNameNeverNull, 3, 12, "MetadataRequestTopic", r"name: <class 'str'> does not fit"),
        (TopicIdRequired, 3, 9, "MetadataRequestTopic", "topic_id has no default"),
        (ProducerTimeoutAsDuration, 22, 4, None, "transaction_timeout_ms"),
        (ProducerTimeoutAsText, 22, 4, None, "milliseconds are an int"),
        (Unslotted, 22, 4, None, "must be slotted"),
        (Checked, 12, 4, None, "__post_init__"),
    ],
)
def test_views_that_do_not_fit_are_refused(
    view: type, api_key: int, version: int, entity_name: str | None, problem: str
) -> None:
    with pytest.raises(TypeError, match=problem):
        converter(view, request_class(api_key, version, entity_name))


# -- Produce keeps the protocol's typed body ---------------------------------------------------


def test_produce_reads_the_protocols_own_typed_body() -> None:
    partition = entity(0, 9, "PartitionProduceData", index=0, records=None)
    topic = entity(0, 9, "TopicProduceData", name="orders", partition_data=(partition,))
    body = entity(0, 9, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=3), topic_data=(topic,))
    request = decode_request(encode_request(0, 9, 1, "views", body)[4:])
    assert isinstance(request.body, ProduceRequestData)
    assert request.body.timeout_ms == 3000
    with pytest.raises(TypeError, match="ProduceRequestData"):
        produce.handle(None, Request(request.header, body, request.size))  # type: ignore[arg-type]
