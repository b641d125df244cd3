"""SASL through the proxy, on real processes: clients log in to the proxy, and the brokers authorize them.

One broker serves the harness's PLAINTEXT listener and a SASL_PLAINTEXT one (SCRAM-SHA-512, and PLAIN
for its super user admin), with ACLs on, ``sasl.proxy.principals=User:proxy`` and short SASL sessions. A
proxy node's SASL_PLAINTEXT listener takes SCRAM-SHA-512 logins, its users read from the broker's
coordination store; it logs in to the broker as ``proxy``, naming each client as the authorization id.
confluent-kafka and kafka-python produce and consume through it as alice, whom the ACLs allow; bob is
refused TOPIC_AUTHORIZATION_FAILED, so the broker authorized each client, not the proxy (a super user).
A client of a PLAINTEXT proxy listener is ANONYMOUS at the broker, one of an mTLS listener its mapped
certificate name. A wrong password at the proxy is refused, delayed and logged while the proxy serves on;
a user the broker does not trust cannot name another, directly or as a proxy (which then stops at start in
one line); a client connection outlives the SASL sessions on both sides (KIP-368). The super user ops
administers ACLs, client quotas and SCRAM users through the proxy.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import ErrorCode, request_class
from barnabas.security.plain import PlainClient
from barnabas.security.scram import MECHANISMS, ScramClient
from barnabas.testing import ProxyNode, free_ports
from tests.support.kafka_python import with_topic_metadata
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import HOST, api_versions_request, produce_request, unique
from tests.support.tls import TlsBroker, broker_ssl_settings, make_certificates, produce_and_consume, ssl_client

pytestmark = pytest.mark.timeout(180)

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
SCRAM = "SCRAM-SHA-512"
#: SCRAM users: the clients, the proxy's own user, one the broker does not trust to act for others, and a
#: super user who administers the cluster through the proxy.
USERS = ("alice", "bob", "proxy", "mallory", "ops")
TOPIC = unique("proxied")
REFUSED = "Client requested an authorization id that is different from username"
HANDSHAKE, AUTHENTICATE = 17, 36
#: The broker's SASL sessions end this soon (KIP-368): the proxy renews its connections before.
REAUTH_MS = 3000


class SaslProxyNode(ProxyNode):
    """A proxy node whose client listener is SASL_PLAINTEXT (``--listen`` would make it PLAINTEXT)."""

    protocol = "SASL_PLAINTEXT"

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--listen")
        del command[at : at + 2]
        return [*command, "--set", f"listeners={self.protocol}://{self.host}:{self.port}"]


class SslProxyNode(SaslProxyNode):
    protocol = "SSL"


def login(bootstrap: str, user: str, password: str | None = None) -> dict[str, str]:
    mechanism = "PLAIN" if user == "admin" else SCRAM
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password or f"{user}-secret"}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    directory = tmp_path_factory.mktemp("proxy-sasl")
    (sasl_port,) = free_ports(1)
    properties = {
        "sasl.enabled.mechanisms": f"PLAIN,{SCRAM}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
        "sasl.proxy.principals": "User:proxy",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # The proxy reads every topic's metadata for its routing; ops administers through the proxy.
        "super.users": "User:admin;User:proxy;User:ops",
        "connections.max.reauth.ms": str(REAUTH_MS),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    coordination = f"sqlite:///{directory / 'coordination.db'}"
    started = TlsBroker(directory / "data", 0, {"SASL_PLAINTEXT": sasl_port}, properties=properties,
                        extra_args=["--coordination", coordination])  # fmt: skip
    started.coordination_url = coordination  # type: ignore[attr-defined]
    started.start()
    admin = AdminClient(login(started.tls_bootstrap("SASL_PLAINTEXT"), "admin"))
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts = [UserScramCredentialUpsertion(user, credential, f"{user}-secret".encode()) for user in USERS]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    allowed = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                          AclPermissionType.ALLOW)
               for operation in (AclOperation.WRITE, AclOperation.READ)]  # fmt: skip
    allowed.append(AclBinding(ResourceType.GROUP, "group-", ResourcePatternType.PREFIXED, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW))  # fmt: skip
    for future in admin.create_acls(allowed).values():
        future.result(30)
    yield started
    started.kill()


def to_brokers(user: str = "proxy") -> dict[str, str]:
    """The proxy's side towards the brokers: SASL_PLAINTEXT, logged in as ``user``."""
    return {
        "broker.security.protocol": "SASL_PLAINTEXT",
        "broker.sasl.mechanism": SCRAM,
        "broker.sasl.jaas.config": (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{user}-secret";'
        ),
    }


def proxy_node(directory: Path, broker: TlsBroker, user: str = "proxy") -> SaslProxyNode:
    (port,) = free_ports(1)
    properties = {
        "sasl.enabled.mechanisms": SCRAM,
        "connections.max.reauth.ms": str(REAUTH_MS * 2 // 3),  # clients re-authenticate with the proxy too
        "coordination.url": broker.coordination_url,  # type: ignore[attr-defined]
        "proxy.node.id": "0",
        **to_brokers(user),
    }
    return SaslProxyNode(directory, broker.tls_bootstrap("SASL_PLAINTEXT"), port, properties=properties)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, broker: TlsBroker) -> Iterator[SaslProxyNode]:
    node = proxy_node(tmp_path_factory.mktemp("proxy"), broker)
    node.start()
    yield node
    node.stop()


def delivery_error(config: dict[str, str]) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(TOPIC, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    return errors[0] if errors else None


def test_clients_reach_the_brokers_through_the_proxy_as_themselves(broker: TlsBroker, proxy: SaslProxyNode) -> None:
    broker.output.clear()
    produce_and_consume(login(proxy.bootstrap, "alice"), count=300, topic=TOPIC)
    refused = delivery_error(login(proxy.bootstrap, "bob"))
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    logged = list(broker.output)
    assert any("proxy principal User:proxy acts for User:alice" in line for line in logged), logged[-20:]
    assert any("proxy principal User:proxy acts for User:bob" in line for line in logged), logged[-20:]


def test_client_connections_outlive_the_sessions_on_both_sides(broker: TlsBroker, proxy: SaslProxyNode) -> None:
    """KIP-368 on both sides: librdkafka re-authenticates with the proxy (which would close its connection
    otherwise), and the proxy opens new broker connections before the broker's sessions end."""
    delivered: list[KafkaError | None] = []
    producer = Producer({**login(proxy.bootstrap, "alice"), "acks": "all"})
    producer.produce(TOPIC, b"before", on_delivery=lambda err, _: delivered.append(err))
    assert producer.flush(20) == 0
    broker.output.clear()
    proxy_log = len(proxy.log_text())
    time.sleep(REAUTH_MS / 1000)  # the session's length itself is what is waited for
    producer.produce(TOPIC, b"after", on_delivery=lambda err, _: delivered.append(err))
    assert producer.flush(20) == 0
    assert delivered == [None, None]
    logged = list(broker.output)
    assert any("proxy principal User:proxy acts for User:alice" in line for line in logged), "a new link"
    assert not any("session expired" in line for line in logged), "nothing was sent on an ended session"
    assert "closing the connection" not in proxy.log_text()[proxy_log:], "the client re-authenticated in time"


def test_kafka_python_produces_and_consumes_through_the_proxy(proxy: SaslProxyNode) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": SCRAM, "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret"}  # fmt: skip
    sent = [f"kp{i}".encode() for i in range(100)]
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks="all", **sasl)
    for value in sent:
        producer.send(TOPIC, value)
    producer.flush(30)
    producer.close()
    consumer = with_topic_metadata(KafkaConsumer(TOPIC, bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest",
                                                 consumer_timeout_ms=20_000, group_id=unique("group-kafka-python"),
                                                 **sasl))  # fmt: skip
    read: list[bytes] = []
    try:
        for message in consumer:  # ends early only at consumer_timeout_ms
            read += [message.value] if message.value.startswith(b"kp") else []
            if len(read) == len(sent):
                break
    finally:
        consumer.close()
    assert read == sent


def test_a_wrong_password_at_the_proxy_is_refused_and_logged_and_the_proxy_serves_on(proxy: SaslProxyNode) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**login(proxy.bootstrap, "alice", "wrong"), "error_cb": errors.append,
                         "message.timeout.ms": 1000})  # fmt: skip
    producer.produce(TOPIC, b"must not land")
    assert producer.flush(10) == 0
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert "failed authentication from /127.0.0.1 on listener SASL_PLAINTEXT (SCRAM-SHA-512): SCRAM-SHA-512 " \
        "(user 'alice'): invalid credentials" in proxy.log_text()  # fmt: skip
    started = time.perf_counter()
    with pytest.raises(BrokerConnectionError, match=r"invalid credentials with SASL mechanism SCRAM-SHA-512$"):
        asyncio.run(_connect(proxy.port, ScramClient(MECHANISMS[SCRAM], "mallory", "guess")))
    assert time.perf_counter() - started >= 0.1, "connection.failed.authentication.delay.ms (100 ms)"
    assert "SCRAM-SHA-512 (user 'mallory'): invalid credentials" in proxy.log_text(), "a known user: wrong password"
    assert TOPIC in AdminClient(login(proxy.bootstrap, "alice")).list_topics(timeout=10).topics


def test_nothing_but_the_login_is_served_before_it(proxy: SaslProxyNode) -> None:
    with RawKafkaClient.connect(HOST, proxy.port) as raw:
        versions = raw.request(18, 3, api_versions_request())
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert (advertised[HANDSHAKE], advertised[AUTHENTICATE]) == ((1, 1), (0, 2))
        raw.send_request(0, 9, produce_request(TOPIC, 0, b"x" * 70))
        assert raw.is_closed(), "Produce before SaslHandshake"
    with RawKafkaClient.connect(HOST, proxy.port) as raw:
        assert raw.request(HANDSHAKE, 1, request_class(HANDSHAKE, 1)(mechanism=SCRAM)).error_code == ErrorCode.none
        raw.send_request(3, 12, request_class(3, 12)(topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))  # fmt: skip
        assert raw.is_closed(), "Metadata between SaslHandshake and SaslAuthenticate"
    assert "not allowed in SASL state authenticate (authenticate first)" in proxy.log_text()


async def _connect(port: int, client: PlainClient | ScramClient) -> None:
    async with await KafkaClient.connect(HOST, port, sasl=client, timeout_s=10):
        pass


@pytest.mark.parametrize(
    "client",
    [ScramClient(MECHANISMS[SCRAM], "mallory", "mallory-secret", authzid="alice"),
     PlainClient("admin", "admin-secret", authzid="alice")],
    ids=["SCRAM", "PLAIN"],
)  # fmt: skip
def test_a_user_not_in_sasl_proxy_principals_cannot_name_another(
    broker: TlsBroker, client: PlainClient | ScramClient
) -> None:
    with pytest.raises(BrokerConnectionError, match=REFUSED):
        asyncio.run(_connect(broker.tls_listeners["SASL_PLAINTEXT"], client))


def test_a_proxy_whose_user_the_brokers_do_not_trust_stops_at_start(tmp_path: Path, broker: TlsBroker) -> None:
    node = proxy_node(tmp_path, broker, user="mallory")
    node.launch()
    assert node.process.wait_exit(60) not in (None, 0)
    last = node.log_text().strip().splitlines()[-1]
    assert "does not let User:mallory act for the proxy's clients (add it to the brokers' sasl.proxy.principals)" \
        in last and REFUSED in last, last  # fmt: skip


def test_a_client_of_a_plaintext_proxy_listener_is_anonymous_at_the_brokers(tmp_path: Path, broker: TlsBroker) -> None:
    """The proxy's own principal is a super user: its clients must not borrow it."""
    (port,) = free_ports(1)
    node = ProxyNode(tmp_path, broker.tls_bootstrap("SASL_PLAINTEXT"), port, properties=to_brokers())
    node.start()
    try:
        broker.output.clear()
        refused = delivery_error({"bootstrap.servers": node.bootstrap})
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
        assert any("proxy principal User:proxy acts for User:ANONYMOUS" in line for line in broker.output)
    finally:
        node.stop()


def test_a_client_certificate_names_the_principal_the_brokers_see(tmp_path: Path, broker: TlsBroker) -> None:
    """On an mTLS listener the proxy names the client by its certificate, mapped as a broker would map it."""
    certs = make_certificates(tmp_path / "certs")
    (port,) = free_ports(1)
    tls = {**broker_ssl_settings(certs, client_auth="required"),
           "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT"}  # fmt: skip
    node = SslProxyNode(tmp_path, broker.tls_bootstrap("SASL_PLAINTEXT"), port, properties={**tls, **to_brokers()})
    node.start()
    try:
        broker.output.clear()
        produce_and_consume(ssl_client(certs, node.bootstrap, with_certificate=True), count=50, topic=TOPIC)
        assert any("proxy principal User:proxy acts for User:alice" in line for line in broker.output)
    finally:
        node.stop()


def quotas_cli(proxy: SaslProxyNode, *args: str) -> str:
    """``barnabas quotas`` through the proxy as ops; its output."""
    settings = [
        f"-X{key}={value}" for key, value in login(proxy.bootstrap, "ops").items() if key != "bootstrap.servers"
    ]
    done = subprocess.run([sys.executable, "-m", "barnabas", "quotas", *args, "-b", proxy.bootstrap, *settings],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_acls_quotas_and_scram_users_are_administered_through_the_proxy(proxy: SaslProxyNode) -> None:
    """The admin APIs Kafka's brokers forward to the controller (CreateAcls, DescribeAcls, DeleteAcls,
    AlterClientQuotas, DescribeClientQuotas, AlterUserScramCredentials, DescribeUserScramCredentials) go
    through the proxy to a broker, which applies them: a new SCRAM user logs in to the proxy at once."""
    admin = AdminClient(login(proxy.bootstrap, "ops"))
    topic = unique("acl-through-proxy")
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding]).values():
        future.result(30)
    matching = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                AclPermissionType.ANY)  # fmt: skip
    assert admin.describe_acls(matching).result(30) == [binding]
    assert admin.delete_acls([matching])[matching].result(30) == [binding]
    assert admin.describe_acls(matching).result(30) == []

    quotas_cli(proxy, "alter", "--user", "carol", "--add-config", "producer_byte_rate=1048576")
    described = json.loads(quotas_cli(proxy, "describe", "--user", "carol", "--json"))["quotas"]
    assert described == [{"entity": {"user": "carol"}, "quotas": {"producer_byte_rate": 1048576.0}}]

    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion("carol", credential, b"carol-secret")
    admin.alter_user_scram_credentials([upsert])["carol"].result(30)
    (info,) = admin.describe_user_scram_credentials(["carol"])["carol"].result(30).scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
    assert AdminClient(login(proxy.bootstrap, "carol")).list_topics(timeout=10).brokers  # carol logs in
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])[
        "carol"
    ].result(30)
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
