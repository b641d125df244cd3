"""SASL on real broker processes, through real clients: PLAIN and SCRAM, and every way a login must fail.

One broker serves PLAINTEXT (the harness's, and where ``barnabas users`` first adds SCRAM users),
SASL_PLAINTEXT and SASL_SSL, each offering PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. confluent-kafka
and kafka-python produce and consume with each mechanism; a wrong password, an unknown user, a
request before authentication, an unknown mechanism and SaslHandshake v0 all end the connection
with nothing served. A three-broker cluster replicates over a SASL_PLAINTEXT inter-broker listener
with SCRAM (its brokers' user added after they started, so they authenticate once it exists), keeps
acks=all, and a user added through one broker logs in on another without a restart.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import ErrorCode, request_class
from barnabas.security.plain import PlainClient
from barnabas.security.scram import MECHANISMS, ScramClient
from barnabas.testing import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.kafka_python import with_topic_metadata
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import HOST, api_versions_request, produce_request, unique
from tests.support.tls import Certificates, TlsBroker, broker_ssl_settings, make_certificates, produce_and_consume

pytestmark = pytest.mark.timeout(300)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
#: SCRAM users the module's broker gets through `barnabas users add`: name -> (mechanism, password).
SCRAM_USERS = {"carol": ("SCRAM-SHA-256", "carol-secret"), "dave": ("SCRAM-SHA-512", "dave-secret")}
LOGINS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("carol", "carol-secret"),
          "SCRAM-SHA-512": ("dave", "dave-secret")}  # fmt: skip
SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE = 17, 36, 0


def users_cli(bootstrap: str, *args: str, password: str | None = None, settings: Mapping[str, str] = {}) -> Any:
    command = [sys.executable, "-m", "barnabas", "users", *args, "-b", bootstrap]
    for key, value in settings.items():
        command += ["-X", f"{key}={value}"]
    return subprocess.run(command, input=f"{password}\n" if password else "", capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[TlsBroker]:
    sasl_port, sasl_ssl_port = free_ports(2)
    properties = {
        **broker_ssl_settings(certs),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    broker = TlsBroker(
        tmp_path_factory.mktemp("sasl-broker") / "data", 0, {"SASL_PLAINTEXT": sasl_port, "SASL_SSL": sasl_ssl_port},
        properties=properties,
    )  # fmt: skip
    broker.start()
    for user, (mechanism, password) in SCRAM_USERS.items():
        result = users_cli(broker.bootstrap, "add", user, "--mechanism", mechanism, password=password)
        assert result.returncode == 0, result.stderr
    yield broker
    broker.kill()


def sasl_client(
    bootstrap: str, mechanism: str, username: str, password: str, *, protocol: str = "SASL_PLAINTEXT",
    certs: Certificates | None = None,
) -> dict[str, str]:  # fmt: skip
    config = {"bootstrap.servers": bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
              "sasl.username": username, "sasl.password": password}  # fmt: skip
    if certs is not None:
        config["ssl.ca.location"] = str(certs.ca_file)
    return config


# -- real clients, every mechanism ---------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_produces_and_consumes(broker: TlsBroker, mechanism: str) -> None:
    produce_and_consume(sasl_client(broker.tls_bootstrap("SASL_PLAINTEXT"), mechanism, *LOGINS[mechanism]), 500)


def test_confluent_kafka_over_sasl_ssl_with_scram(broker: TlsBroker, certs: Certificates) -> None:
    config = sasl_client(broker.tls_bootstrap("SASL_SSL"), "SCRAM-SHA-512", "dave", "dave-secret", protocol="SASL_SSL",
                         certs=certs)  # fmt: skip
    produce_and_consume(config, 500)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes(broker: TlsBroker, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    username, password = LOGINS[mechanism]
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism, "sasl_plain_username": username,
            "sasl_plain_password": password}  # fmt: skip
    topic = unique("kafka-python-sasl")
    producer = KafkaProducer(bootstrap_servers=broker.tls_bootstrap("SASL_PLAINTEXT"), acks="all", **sasl)
    for i in range(300):
        producer.send(topic, f"m{i}".encode())
    producer.flush(60)
    producer.close()
    consumer = with_topic_metadata(KafkaConsumer(topic, bootstrap_servers=broker.tls_bootstrap("SASL_PLAINTEXT"),
                                                 auto_offset_reset="earliest", consumer_timeout_ms=20_000,
                                                 group_id=unique("kafka-python"), **sasl))  # fmt: skip
    try:
        values = [message.value for _, message in zip(range(300), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(300)]


def test_barnabas_users_lists_over_a_scram_authenticated_listener(broker: TlsBroker) -> None:
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave",
             "sasl.password": "dave-secret"}  # fmt: skip
    listed = users_cli(broker.tls_bootstrap("SASL_PLAINTEXT"), "list", "--json", settings=login)
    assert listed.returncode == 0, listed.stderr
    assert '"carol": {\n      "SCRAM-SHA-256": 4096' in listed.stdout
    wrong = users_cli(broker.tls_bootstrap("SASL_PLAINTEXT"), "list", settings={**login, "sasl.password": "nope"})
    assert wrong.returncode == 1
    assert wrong.stderr.strip().endswith(
        "SASL SCRAM-SHA-512 authentication failed: Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert len(wrong.stderr.strip().splitlines()) == 1


# -- negative: nothing is served without a right login ----------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "username", "password"),
    [("PLAIN", "alice", "wrong"), ("PLAIN", "mallory", "alice-secret"), ("SCRAM-SHA-256", "carol", "wrong"),
     ("SCRAM-SHA-256", "mallory", "x"), ("SCRAM-SHA-512", "carol", "carol-secret")],
    ids=["PLAIN wrong password", "PLAIN unknown user", "SCRAM wrong password", "SCRAM unknown user",
         "SCRAM user of the other mechanism"],
)  # fmt: skip
def test_a_wrong_login_gets_an_authentication_error_and_no_record_is_accepted(
    broker: TlsBroker, mechanism: str, username: str, password: str
) -> None:
    topic = unique("refused")
    errors: list[KafkaError] = []
    config = sasl_client(broker.tls_bootstrap("SASL_PLAINTEXT"), mechanism, username, password)
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 1000})
    producer.produce(topic, b"must not land")
    assert producer.flush(10) == 0, "the message fails (timed out) rather than staying queued"
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    assert not topic_exists(broker, topic), "nothing reached the broker, not even Metadata"


def topic_exists(broker: TlsBroker, topic: str) -> bool:
    """Whether the topic exists, asked on the PLAINTEXT listener (a produce would have created it)."""
    body = request_class(3, 12)(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with RawKafkaClient.connect(HOST, broker.port) as plaintext:
        return topic in {t.name for t in plaintext.request(3, 12, body).topics}


async def login(port: int, client: PlainClient | ScramClient) -> float:
    started = time.perf_counter()
    async with await KafkaClient.connect(HOST, port, sasl=client, timeout_s=10):
        return time.perf_counter() - started


async def until_known(port: int, user: str, timeout_s: float = 10.0) -> float:
    """Ask the broker on ``port`` (PLAINTEXT) for ``user``'s credentials until it has them; how long that took."""
    started = time.monotonic()
    body = request_class(50, 0)(users=(request_class(50, 0, "UserName")(name=user),))
    async with await KafkaClient.connect(HOST, port) as client, asyncio.timeout(timeout_s):
        while (await client.request(50, 0, body)).results[0].error_code != ErrorCode.none:
            pass
    return time.monotonic() - started


def test_the_failure_is_delayed_logged_and_closes_the_connection(broker: TlsBroker) -> None:
    port = broker.tls_listeners["SASL_PLAINTEXT"]
    broker.output.clear()
    started = time.perf_counter()
    with pytest.raises(BrokerConnectionError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        asyncio.run(login(port, ScramClient(MECHANISMS["SCRAM-SHA-256"], "mallory", "guess")))
    assert time.perf_counter() - started >= 0.1, "connection.failed.authentication.delay.ms (100 ms)"
    assert any("failed authentication" in line and "SCRAM-SHA-256 (user 'mallory'): unknown user" in line
               for line in broker.output), "the log names the reason, the client is told nothing more"  # fmt: skip
    assert asyncio.run(login(port, PlainClient("alice", "alice-secret"))) < 1.0


def test_a_request_before_authentication_closes_the_connection(broker: TlsBroker) -> None:
    topic = unique("before-auth")
    broker.output.clear()
    with RawKafkaClient.connect(HOST, broker.tls_listeners["SASL_PLAINTEXT"]) as raw:
        raw.send_request(PRODUCE, 9, produce_request(topic, 0, b"x" * 70))
        assert raw.is_closed(), "Produce before SaslHandshake"
    with RawKafkaClient.connect(HOST, broker.tls_listeners["SASL_PLAINTEXT"]) as raw:
        handshake = raw.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.none
        raw.send_request(PRODUCE, 9, produce_request(topic, 0, b"x" * 70))
        assert raw.is_closed(), "Produce between SaslHandshake and SaslAuthenticate"
    assert any("not allowed in SASL state handshake" in line for line in broker.output)
    assert any("not allowed in SASL state authenticate" in line for line in broker.output)
    assert not topic_exists(broker, topic)


def test_an_unknown_mechanism_gets_the_enabled_ones_and_v0_handshakes_are_refused(broker: TlsBroker) -> None:
    port = broker.tls_listeners["SASL_PLAINTEXT"]
    with RawKafkaClient.connect(HOST, port) as raw:
        versions = raw.request(18, 3, api_versions_request())
        assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}[SASL_HANDSHAKE] == (1, 1)
        answer = raw.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.is_closed()
    with RawKafkaClient.connect(HOST, port) as raw:
        raw.send_request(SASL_HANDSHAKE, 0, request_class(SASL_HANDSHAKE, 0)(mechanism="PLAIN"))
        assert raw.is_closed(), "SaslHandshake v0 (raw tokens) is not served"


def test_a_large_frame_before_authentication_closes_the_connection(broker: TlsBroker) -> None:
    with RawKafkaClient.connect(HOST, broker.tls_listeners["SASL_PLAINTEXT"]) as raw:
        raw.send_frame((600_000).to_bytes(4, "big") + b"\0" * 1024)
        assert raw.is_closed(), "sasl.server.max.receive.size is 512 KiB"


# -- a cluster replicating over SASL --------------------------------------------------------------


class SaslCluster(BrokerCluster):
    """Brokers with the harness's PLAINTEXT listener and a SASL_PLAINTEXT one they replicate over."""

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        (port,) = free_ports(1)
        return TlsBroker(data_dir, broker_id, {"REPLICATION": port},
                         extra_args=["--coordination", self.coordination_url], properties=dict(properties))  # fmt: skip


def test_a_cluster_replicating_over_scram_keeps_acks_all_and_sees_new_users_at_once(tmp_path: Path) -> None:
    properties = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.replication.scram-sha-512.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";'
        ),
        "min.insync.replicas": "2",
        "replica.fetch.backoff.ms": "200",
    }
    cluster = SaslCluster(tmp_path, 3, properties=properties)
    try:
        cluster.start()
        brokers: list[TlsBroker] = cluster.brokers  # type: ignore[assignment]
        # The first user: added over a PLAINTEXT listener, as kafka-storage --add-scram would before the first start.
        added = users_cli(brokers[0].bootstrap, "add", "broker", "--mechanism", "SCRAM-SHA-512", password="b-secret")
        assert added.returncode == 0, added.stderr
        topic = unique("replicated-over-scram")
        cluster.create_topic(topic, 1, 3)
        produce_and_consume({"bootstrap.servers": cluster.bootstrap}, count=1000, topic=topic)
        assert all("inter-broker listener REPLICATION" in broker.log_text() for broker in brokers)

        assert (
            users_cli(brokers[0].bootstrap, "add", "erin", "-m", "SCRAM-SHA-512", password="e-secret").returncode == 0
        )
        last = brokers[2]
        seen_after = asyncio.run(until_known(last.port, "erin"))  # another broker's cache, through its watch
        erin = ScramClient(MECHANISMS["SCRAM-SHA-512"], "erin", "e-secret")
        took = asyncio.run(login(last.tls_listeners["REPLICATION"], erin))
        print(f"a new user was known on another broker {seen_after * 1000:.0f} ms after the CLI returned; "
              f"its SCRAM-SHA-512 login (connect, handshake, two round trips, 4096 PBKDF2 rounds) took "
              f"{took * 1000:.1f} ms")  # fmt: skip
    finally:
        cluster.stop()
