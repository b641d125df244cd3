"""ACLs on a real broker process, through real clients: two SCRAM users, one allowed and one denied.

The broker has authorization on (StandardAuthorizer), User:admin (PLAIN) as its super user, and
SCRAM-SHA-512 users alice and bob added through ``barnabas users`` as admin. confluent-kafka's and
kafka-python's admin clients create, describe and delete ACLs; alice produces and consumes what
they allow, bob is refused with Kafka's errors and sees no topic in Metadata; nobody but a super
user may change credentials any more; ``barnabas acls`` manages ACLs and fails in one line; and
``__consumer_offsets`` can be neither written nor deleted, even by the super user.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from barnabas.testing import free_ports
from tests.support.requests import unique
from tests.support.tls import TlsBroker, produce_and_consume

pytestmark = pytest.mark.timeout(180)

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
PREFIX = unique("acl-orders")


def cli(*args: str, settings: Mapping[str, str], password: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", *args]
    for key, value in settings.items():
        command += ["-X", f"{key}={value}"]
    return subprocess.run(command, input=f"{password}\n" if password else "", capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    (sasl_port,) = free_ports(1)
    properties = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    broker = TlsBroker(tmp_path_factory.mktemp("acls") / "data", 0, {"SASL_PLAINTEXT": sasl_port},
                       properties=properties)  # fmt: skip
    broker.start()
    yield broker
    broker.kill()


def login(broker: TlsBroker, user: str) -> dict[str, str]:
    mechanism = "PLAIN" if user == "admin" else "SCRAM-SHA-512"
    return {"bootstrap.servers": broker.tls_bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": f"{user}-secret"}  # fmt: skip


@pytest.fixture(scope="module")
def admin(broker: TlsBroker) -> AdminClient:
    """The super user; alice and bob exist as SCRAM users."""
    for user in ("alice", "bob"):
        added = cli("users", "add", user, "--mechanism", "SCRAM-SHA-512", "-b", broker.tls_bootstrap("SASL_PLAINTEXT"),
                    settings=login(broker, "admin"), password=f"{user}-secret")  # fmt: skip
        assert added.returncode == 0, added.stderr
    return AdminClient(login(broker, "admin"))


def alice_may_use(prefix: str) -> list[AclBinding]:
    """What a producer and consumer need: WRITE and READ on the topics, READ on the groups (both prefixed)."""
    topic = [AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:alice", "*", op,
                        AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]  # fmt: skip
    group = AclBinding(ResourceType.GROUP, "group-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)  # fmt: skip
    return [*topic, group]


def delivery_error(config: dict[str, str], topic: str) -> Any:
    errors: list[Any] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    return errors[0] if errors else None


def test_confluent_kafka_manages_acls_that_allow_alice_and_refuse_bob(broker: TlsBroker, admin: AdminClient) -> None:
    topic = f"{PREFIX}-1"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    for future in admin.create_acls(alice_may_use(PREFIX)).values():
        future.result(30)
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
                            AclPermissionType.ANY)  # fmt: skip
    assert {(b.name, b.operation) for b in admin.describe_acls(mine).result(30)} == {
        (PREFIX, AclOperation.WRITE), (PREFIX, AclOperation.READ), ("group-", AclOperation.READ),
    }  # fmt: skip
    alice, bob = login(broker, "alice"), login(broker, "bob")
    produce_and_consume(alice, 200, topic=topic)  # its consumer's group is group-<random>
    assert delivery_error(bob, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic not in AdminClient(bob).list_topics(timeout=10).topics  # Metadata leaves out what bob may not see
    assert topic in AdminClient(alice).list_topics(timeout=10).topics
    deleted = admin.delete_acls([mine])[mine].result(30)
    assert len(deleted) == 3
    assert delivery_error(alice, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_creates_describes_and_deletes_acls(broker: TlsBroker, admin: AdminClient) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as PatternType
    from kafka.admin import ResourceType as KafkaPythonResourceType

    client = KafkaAdminClient(bootstrap_servers=broker.tls_bootstrap("SASL_PLAINTEXT"),
                              security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_plain_username="admin", sasl_plain_password="admin-secret")  # fmt: skip
    try:
        name = unique("kp-topic")
        pattern = ResourcePattern(KafkaPythonResourceType.TOPIC, name, PatternType.LITERAL)
        acl = ACL(principal="User:bob", host="*", operation=ACLOperation.DESCRIBE,
                  permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)  # fmt: skip
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found = ACLFilter(principal="User:bob", host="*", operation=ACLOperation.ANY,
                          permission_type=ACLPermissionType.ANY,
                          resource_pattern=ResourcePatternFilter(KafkaPythonResourceType.TOPIC, name,
                                                                 PatternType.LITERAL))  # fmt: skip
        acls, error = client.describe_acls(found)
        assert error.errno == 0 and [a.resource_pattern.resource_name for a in acls] == [name]
        ((_, deleted, delete_error),) = client.delete_acls([found])
        assert delete_error.errno == 0 and len(deleted) == 1
    finally:
        client.close()


def test_only_a_super_user_changes_credentials_or_acls(broker: TlsBroker, admin: AdminClient) -> None:
    bootstrap = ["-b", broker.tls_bootstrap("SASL_PLAINTEXT")]
    as_alice = cli("users", "add", "mallory", "--mechanism", "SCRAM-SHA-512", *bootstrap,
                   settings=login(broker, "alice"), password="mallory-secret")  # fmt: skip
    assert as_alice.returncode == 1
    assert "cluster_authorization_failed" in as_alice.stderr.lower()
    acls = cli("acls", "create", "--allow-principal", "User:alice", "--operation", "All", "--cluster", *bootstrap,
               settings=login(broker, "alice"))  # fmt: skip
    assert acls.returncode == 1
    assert len(acls.stderr.strip().splitlines()) == 1 and "CLUSTER_AUTHORIZATION_FAILED" in acls.stderr


def test_barnabas_acls_creates_lists_and_deletes(broker: TlsBroker, admin: AdminClient) -> None:
    bootstrap, settings = ["-b", broker.tls_bootstrap("SASL_PLAINTEXT")], login(broker, "admin")
    group = unique("cli-group")
    created = cli("acls", "create", "--allow-principal", "User:bob", "--operation", "read", "--operation",
                  "Describe", "--group", group, *bootstrap, settings=settings)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout.count("created ALLOW User:bob") == 2
    listed = cli("acls", "list", "--group", group, "--json", *bootstrap, settings=settings)
    assert listed.returncode == 0, listed.stderr
    assert sorted(acl["operation"] for acl in json.loads(listed.stdout)["acls"]) == ["DESCRIBE", "READ"]
    deleted = cli("acls", "delete", "--group", group, *bootstrap, settings=settings)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.count("deleted ALLOW User:bob") == 2
    after = cli("acls", "list", "--group", group, "--json", *bootstrap, settings=settings)
    assert json.loads(after.stdout)["acls"] == []
    no_resource = cli("acls", "delete", *bootstrap, settings=settings)
    assert no_resource.returncode == 1
    assert no_resource.stderr.strip().splitlines() == [no_resource.stderr.strip()]


def test_the_offsets_topic_is_neither_written_nor_deleted_even_by_a_super_user(
    broker: TlsBroker, admin: AdminClient
) -> None:
    super_user = login(broker, "admin")
    produce_and_consume(super_user, 10)  # its consumer group makes __consumer_offsets exist
    # confluent-kafka names INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION
    assert delivery_error(super_user, "__consumer_offsets").code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as refused:
        admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)
    assert "__consumer_offsets" in admin.list_topics(timeout=10).topics
