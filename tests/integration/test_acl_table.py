"""Every API the broker serves, once denied and once allowed, generated from the authorization table.

One broker with authorization on: its PLAINTEXT listener's principal, User:ANONYMOUS, is the one
under test and has no ACL to start with; User:admin (PLAIN on a SASL_PLAINTEXT listener, a super
user) sets up through confluent-kafka's AdminClient. For each API key in
``barnabas.broker.handlers._authorize.RULES``: with no ACL the request gets the error of the row's
first check (or, where Kafka filters silently, is answered without what it may not see); with an
ALLOW ACL for each unconditional check of the row it gets the answer an allowed principal gets.
SaslHandshake, SaslAuthenticate and ApiVersions are answered with no ACL at all.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
)
from confluent_kafka.admin import AclOperation as KafkaOperation
from confluent_kafka.admin import ResourceType as KafkaResourceType

from barnabas.broker.handlers._authorize import RULES, Check
from barnabas.protocol import ErrorCode, request_class
from barnabas.security.acl import CLUSTER_NAME, ResourceType
from barnabas.testing import free_ports
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import HOST, batch, unique
from tests.support.tls import TlsBroker

pytestmark = pytest.mark.timeout(120)

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
TOPIC, GROUP, TXN = unique("acl-table"), unique("acl-table-group"), unique("acl-table-txn")
NO_GROUP = unique("no-such-group")
UNDER_TEST = "User:ANONYMOUS"
E = ErrorCode


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@dataclass(frozen=True)
class Case:
    """One API: its request (at the version given), where its answer's error is, and the error when allowed."""

    version: int
    body: Callable[[], Any]
    error: Callable[[Any], int]
    allowed: ErrorCode = E.none
    #: The resource the row's checks name, by resource type (topics: TOPIC, groups: GROUP, ...).
    names: Callable[[], dict[ResourceType, str]] = lambda: {}


def r(api_key: int, version: int, name: str | None = None, /, **fields: Any) -> Any:
    return request_class(api_key, version, name)(**fields)


def first(items: Any) -> Any:
    return items[0]


#: Created by each DeleteTopics case, so the allowed one deletes a topic of its own.
DOOMED: list[str] = []


def _doomed() -> str:
    return DOOMED[-1]


CASES: dict[int, Case] = {
    0: Case(11, lambda: r(0, 11, transactional_id=None, acks=1, timeout=ms(5000), topic_data=(
        r(0, 11, "TopicProduceData", name=TOPIC, partition_data=(r(0, 11, "PartitionProduceData", index=0,
                                                                   records=batch(b"v")),)),)),
            lambda a: first(first(a.responses).partition_responses).error_code),
    1: Case(12, lambda: r(1, 12, cluster_id=None, replica_id=-1, max_wait=ms(0), min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                          topics=(r(1, 12, "FetchTopic", topic=TOPIC, partitions=(
                              r(1, 12, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),)),
            lambda a: first(first(a.responses).partitions).error_code),
    2: Case(8, lambda: r(2, 8, replica_id=-1, isolation_level=0, topics=(r(2, 8, "ListOffsetsTopic", name=TOPIC,
            partitions=(r(2, 8, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),)),)),
            lambda a: first(first(a.topics).partitions).error_code),
    3: Case(12, lambda: r(3, 12, topics=(r(3, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC),),
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            lambda a: first(a.topics).error_code),
    8: Case(9, lambda: r(8, 9, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                         topics=(r(8, 9, "OffsetCommitRequestTopic", name=TOPIC, partitions=(
                             r(8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                               committed_leader_epoch=-1, committed_metadata=None),)),)),
            lambda a: first(first(a.topics).partitions).error_code),
    9: Case(9, lambda: r(9, 9, require_stable=False, groups=(r(9, 9, "OffsetFetchRequestGroup", group_id=GROUP,
            member_id=None, member_epoch=-1, topics=(r(9, 9, "OffsetFetchRequestTopics", name=TOPIC,
                                                       partition_indexes=(0,)),)),)),
            lambda a: first(a.groups).error_code or first(first(first(a.groups).topics).partitions).error_code),
    10: Case(6, lambda: r(10, 6, key_type=0, coordinator_keys=(GROUP,)), lambda a: first(a.coordinators).error_code),
    11: Case(9, lambda: r(11, 9, group_id=GROUP, session_timeout=ms(10_000), rebalance_timeout=ms(10_000),
                          member_id="", group_instance_id=None, protocol_type="consumer", reason=None,
                          protocols=(r(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),)),
             lambda a: a.error_code, allowed=E.member_id_required),
    12: Case(4, lambda: r(12, 4, group_id=GROUP, generation_id=1, member_id="nobody", group_instance_id=None),
             lambda a: a.error_code, allowed=E.unknown_member_id),
    13: Case(5, lambda: r(13, 5, group_id=GROUP, members=(r(13, 5, "MemberIdentity", member_id="nobody",
                                                              group_instance_id=None, reason=None),)),
             lambda a: a.error_code or first(a.members).error_code, allowed=E.unknown_member_id),
    14: Case(5, lambda: r(14, 5, group_id=GROUP, generation_id=1, member_id="nobody", group_instance_id=None,
                          protocol_type="consumer", protocol_name="range", assignments=()),
             lambda a: a.error_code, allowed=E.unknown_member_id),
    15: Case(5, lambda: r(15, 5, groups=(GROUP,), include_authorized_operations=False),
             lambda a: first(a.groups).error_code),
    19: Case(7, lambda: r(19, 7, timeout=ms(5000), validate_only=True, topics=(r(19, 7, "CreatableTopic",
             name=unique("acl-new"), num_partitions=1, replication_factor=1, assignments=(), configs=()),)),
             lambda a: first(a.topics).error_code),
    20: Case(6, lambda: r(20, 6, timeout=ms(5000), topics=(r(20, 6, "DeleteTopicState", name=_doomed(),
                                                               topic_id=None),)),
             lambda a: first(a.responses).error_code, names=lambda: {ResourceType.TOPIC: _doomed()}),
    21: Case(2, lambda: r(21, 2, timeout=ms(5000), topics=(r(21, 2, "DeleteRecordsTopic", name=TOPIC, partitions=(
             r(21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),)),)),
             lambda a: first(first(a.topics).partitions).error_code),
    22: Case(4, lambda: r(22, 4, transactional_id=None, transaction_timeout=ms(60_000), producer_id=-1,
                          producer_epoch=-1), lambda a: a.error_code),
    23: Case(4, lambda: r(23, 4, replica_id=-1, topics=(r(23, 4, "OffsetForLeaderTopic", topic=TOPIC, partitions=(
             r(23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),)),)),
             lambda a: first(first(a.topics).partitions).error_code),
    29: Case(3, lambda: r(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                          principal_filter=None, host_filter=None, operation=1, permission_type=1),
             lambda a: a.error_code),
    30: Case(3, lambda: r(30, 3, creations=(r(30, 3, "AclCreation", resource_type=2, resource_name="nothing",
             resource_pattern_type=3, principal="User:nobody", host="*", operation=3, permission_type=3),)),
             lambda a: first(a.results).error_code),
    31: Case(3, lambda: r(31, 3, filters=(r(31, 3, "DeleteAclsFilter", resource_type_filter=2,
             resource_name_filter="nothing", pattern_type_filter=3, principal_filter="User:nobody", host_filter=None,
             operation=1, permission_type=1),)), lambda a: first(a.filter_results).error_code),
    32: Case(4, lambda: r(32, 4, include_synonyms=False, include_documentation=False, resources=(
             r(32, 4, "DescribeConfigsResource", resource_type=2, resource_name=TOPIC, configuration_keys=None),)),
             lambda a: first(a.results).error_code),
    33: Case(2, lambda: r(33, 2, validate_only=True, resources=(r(33, 2, "AlterConfigsResource", resource_type=2,
             resource_name=TOPIC, configs=(r(33, 2, "AlterableConfig", name="retention.ms", value="100000"),)),)),
             lambda a: first(a.responses).error_code),
    35: Case(4, lambda: r(35, 4, topics=None), lambda a: a.error_code),
    37: Case(3, lambda: r(37, 3, timeout=ms(5000), validate_only=True, topics=(r(37, 3, "CreatePartitionsTopic",
             name=TOPIC, count=2, assignments=None),)), lambda a: first(a.results).error_code),
    42: Case(2, lambda: r(42, 2, groups_names=(NO_GROUP,)), lambda a: first(a.results).error_code,
             allowed=E.group_id_not_found, names=lambda: {ResourceType.GROUP: NO_GROUP}),
    43: Case(2, lambda: r(43, 2, election_type=0, timeout=ms(5000), topic_partitions=(
             r(43, 2, "TopicPartitions", topic=TOPIC, partitions=(0,)),)),
             lambda a: a.error_code or first(first(a.replica_election_results).partition_result).error_code,
             allowed=E.election_not_needed),
    44: Case(1, lambda: r(44, 1, validate_only=True, resources=(r(44, 1, "AlterConfigsResource", resource_type=2,
             resource_name=TOPIC, configs=(r(44, 1, "AlterableConfig", name="retention.ms", config_operation=0,
                                             value="100000"),)),)),
             lambda a: first(a.responses).error_code),
    45: Case(0, lambda: r(45, 0, timeout=ms(5000), topics=(r(45, 0, "ReassignableTopic", name=TOPIC, partitions=(
             r(45, 0, "ReassignablePartition", partition_index=0, replicas=None),)),)),
             lambda a: a.error_code or first(first(a.responses).partitions).error_code,
             allowed=E.no_reassignment_in_progress),
    46: Case(0, lambda: r(46, 0, timeout=ms(5000), topics=None), lambda a: a.error_code),
    47: Case(0, lambda: r(47, 0, group_id=GROUP, topics=(r(47, 0, "OffsetDeleteRequestTopic", name=TOPIC,
             partitions=(r(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),)),
             lambda a: a.error_code or first(first(a.topics).partitions).error_code),
    48: Case(1, lambda: r(48, 1, components=(), strict=False), lambda a: a.error_code),
    49: Case(1, lambda: r(49, 1, validate_only=True, entries=(r(49, 1, "EntryData", entity=(
             r(49, 1, "EntityData", entity_type="user", entity_name="nobody"),), ops=(
             r(49, 1, "OpData", key="producer_byte_rate", value=1024.0, remove=False),)),)),
             lambda a: first(a.entries).error_code),
    50: Case(0, lambda: r(50, 0, users=None), lambda a: a.error_code),
    51: Case(0, lambda: r(51, 0, upsertions=(), deletions=(r(51, 0, "ScramCredentialDeletion", name="nobody",
                                                              mechanism=1),)),
             lambda a: first(a.results).error_code, allowed=E.resource_not_found),
    64: Case(0, lambda: r(64, 0, broker_id=7), lambda a: a.error_code, allowed=E.broker_id_not_registered),
    75: Case(0, lambda: r(75, 0, topics=(r(75, 0, "TopicRequest", name=TOPIC),), response_partition_limit=2000,
                          cursor=None),
             lambda a: first(a.topics).error_code),
}  # fmt: skip

#: Kafka filters these instead of answering an error: what a denied principal still sees, and an allowed one.
FILTERED: dict[int, tuple[int, Callable[[], Any], Callable[[Any], bool]]] = {
    16: (5, lambda: r(16, 5, states_filter=(), types_filter=()),
         lambda a: a.error_code == E.none and GROUP in {g.group_id for g in a.groups}),
    60: (1, lambda: r(60, 1, include_cluster_authorized_operations=True, endpoint_type=1),
         lambda a: a.error_code == E.none and a.cluster_authorized_operations != 0),
}  # fmt: skip

#: Never checked: answered to a principal without any ACL (on a listener without SASL both SASL APIs say so).
UNCHECKED: dict[int, tuple[int, Callable[[], Any], ErrorCode]] = {
    17: (1, lambda: r(17, 1, mechanism="PLAIN"), E.illegal_sasl_state),
    18: (4, lambda: r(18, 4, client_software_name="tests", client_software_version="1"), E.none),
    36: (2, lambda: r(36, 2, auth_bytes=b""), E.illegal_sasl_state),
}


def test_every_api_in_the_table_has_a_case() -> None:
    assert RULES.keys() == CASES.keys() | FILTERED.keys() | UNCHECKED.keys()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    (sasl_port,) = free_ports(1)
    properties = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    broker = TlsBroker(tmp_path_factory.mktemp("acl-table") / "data", 0, {"SASL_PLAINTEXT": sasl_port},
                       properties=properties)  # fmt: skip
    broker.start()
    yield broker
    broker.kill()


@pytest.fixture(scope="module")
def admin_config(broker: TlsBroker) -> dict[str, str]:
    return {"bootstrap.servers": broker.tls_bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}  # fmt: skip


def commit_offset(admin_config: dict[str, str]) -> None:
    """The super user commits an offset for GROUP, so that the group exists (Empty)."""
    consumer = Consumer({**admin_config, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def admin(admin_config: dict[str, str]) -> AdminClient:
    """The super user's client; the topic and the group made."""
    client = AdminClient(admin_config)
    client.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    commit_offset(admin_config)
    return client


KAFKA_TYPES = {ResourceType.TOPIC: KafkaResourceType.TOPIC, ResourceType.GROUP: KafkaResourceType.GROUP,
               ResourceType.CLUSTER: KafkaResourceType.BROKER,
               ResourceType.TRANSACTIONAL_ID: KafkaResourceType.TRANSACTIONAL_ID}  # fmt: skip
DEFAULT_NAMES = {ResourceType.TOPIC: TOPIC, ResourceType.GROUP: GROUP, ResourceType.CLUSTER: CLUSTER_NAME,
                 ResourceType.TRANSACTIONAL_ID: TXN}  # fmt: skip


def grants(api_key: int, names: dict[ResourceType, str]) -> list[AclBinding]:
    """ALLOW ACLs for the row's first check and every other check it always makes."""
    checks: list[Check] = [check for i, check in enumerate(RULES[api_key]) if i == 0 or not check.when]
    return [
        AclBinding(KAFKA_TYPES[check.resource], {**DEFAULT_NAMES, **names}[check.resource], ResourcePatternType.LITERAL,
                   UNDER_TEST, "*", KafkaOperation[check.operation.name], AclPermissionType.ALLOW)
        for check in checks
    ]  # fmt: skip


def revoke_all(admin: AdminClient) -> None:
    every = AclBindingFilter(KafkaResourceType.ANY, None, ResourcePatternType.ANY, None, None, KafkaOperation.ANY,
                             AclPermissionType.ANY)  # fmt: skip
    for future in admin.delete_acls([every]).values():
        future.result(30)


def ask(broker: TlsBroker, api_key: int, version: int, body: Any) -> Any:
    with RawKafkaClient.connect(HOST, broker.port) as client:
        return client.request(api_key, version, body)


def prepare(admin: AdminClient, api_key: int) -> None:
    """No ACL at all; for DeleteTopics a topic of its own to delete."""
    revoke_all(admin)
    if api_key == 20:
        name = unique("acl-doomed")
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        DOOMED.append(name)


@pytest.mark.parametrize("api_key", sorted(CASES))
def test_denied_without_an_acl(broker: TlsBroker, admin: AdminClient, api_key: int) -> None:
    prepare(admin, api_key)
    case = CASES[api_key]
    assert case.error(ask(broker, api_key, case.version, case.body())) == RULES[api_key][0].error


@pytest.mark.parametrize("api_key", sorted(CASES))
def test_allowed_with_the_acls_kafka_checks(broker: TlsBroker, admin: AdminClient, api_key: int) -> None:
    prepare(admin, api_key)
    case = CASES[api_key]
    for future in admin.create_acls(grants(api_key, case.names())).values():
        future.result(30)
    try:
        assert case.error(ask(broker, api_key, case.version, case.body())) == case.allowed
    finally:
        revoke_all(admin)


@pytest.mark.parametrize("api_key", sorted(FILTERED))
def test_filtered_without_an_acl_and_whole_with_one(
    broker: TlsBroker, admin: AdminClient, admin_config: dict[str, str], api_key: int
) -> None:
    version, body, sees_all = FILTERED[api_key]
    commit_offset(admin_config)  # the group exists, whatever OffsetDelete's case left
    revoke_all(admin)
    assert not sees_all(ask(broker, api_key, version, body()))
    for future in admin.create_acls(grants(api_key, {})).values():
        future.result(30)
    try:
        assert sees_all(ask(broker, api_key, version, body()))
    finally:
        revoke_all(admin)


@pytest.mark.parametrize("api_key", sorted(UNCHECKED))
def test_never_checked(broker: TlsBroker, admin: AdminClient, api_key: int) -> None:
    revoke_all(admin)
    version, body, expected = UNCHECKED[api_key]
    assert ask(broker, api_key, version, body()).error_code == expected
