"""Named listeners and TLS on real broker processes, through real clients (certificates from trustme).

One broker serves three listeners: PLAINTEXT, SSL (no client certificate asked) and MTLS (an SSL
listener whose ``listener.name.mtls.ssl.client.auth=required``). confluent-kafka and kafka-python
produce and consume over TLS; Metadata answers each client with the endpoints of the listener it
came in on; a plaintext client on a TLS port gets no Kafka answer; mTLS refuses a client without a
certificate. A three-broker cluster replicates over an SSL inter-broker listener (the brokers
present their certificates to each other) and acks=all holds.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from barnabas.testing import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.raw_client import API_VERSIONS, encode_request
from tests.support.requests import api_versions_request, unique
from tests.support.tls import (
    Certificates,
    TlsBroker,
    broker_ssl_settings,
    make_certificates,
    produce_and_consume,
    ssl_client,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[TlsBroker]:
    ssl_port, mtls_port = free_ports(2)
    properties = {
        **broker_ssl_settings(certs),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=ServiceUsers,.*$/$1/,DEFAULT",
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    broker = TlsBroker(
        tmp_path_factory.mktemp("tls-broker") / "data", 0, {"SSL": ssl_port, "MTLS": mtls_port}, properties=properties
    )
    broker.start()
    yield broker
    broker.kill()


def test_confluent_kafka_produces_and_consumes_over_ssl(tls_broker: TlsBroker, certs: Certificates) -> None:
    produce_and_consume(ssl_client(certs, tls_broker.tls_bootstrap()))


def test_confluent_kafka_over_mutual_tls(tls_broker: TlsBroker, certs: Certificates) -> None:
    produce_and_consume(ssl_client(certs, tls_broker.tls_bootstrap("MTLS"), with_certificate=True), count=200)


def test_kafka_python_produces_and_consumes_over_ssl(tls_broker: TlsBroker, certs: Certificates) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique("kafka-python-tls")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca_file)}
    producer = KafkaProducer(bootstrap_servers=tls_broker.tls_bootstrap(), acks="all", **tls)
    for i in range(500):
        producer.send(topic, f"m{i}".encode())
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=tls_broker.tls_bootstrap(),
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
        group_id=unique("kafka-python"),
        **tls,
    )
    try:
        values = [message.value for _, message in zip(range(500), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(500)]


def test_metadata_answers_with_the_endpoints_of_the_listener_asked(tls_broker: TlsBroker, certs: Certificates) -> None:
    plaintext = AdminClient({"bootstrap.servers": tls_broker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in plaintext.brokers.values()] == [("127.0.0.1", tls_broker.port)]
    over_ssl = AdminClient(ssl_client(certs, tls_broker.tls_bootstrap())).list_topics(timeout=10)
    assert [(b.host, b.port) for b in over_ssl.brokers.values()] == [("127.0.0.1", tls_broker.tls_listeners["SSL"])]
    mtls = ssl_client(certs, tls_broker.tls_bootstrap("MTLS"), with_certificate=True)
    admin = AdminClient(mtls)  # kept until the future resolves
    cluster = admin.describe_cluster().result(timeout=10)
    assert [(node.host, node.port) for node in cluster.nodes] == [("127.0.0.1", tls_broker.tls_listeners["MTLS"])]


def test_a_plaintext_client_on_the_ssl_port_gets_no_kafka_answer(tls_broker: TlsBroker) -> None:
    request = encode_request(API_VERSIONS, 3, api_versions_request(), 7, "plaintext-client")
    with socket.create_connection(("127.0.0.1", tls_broker.tls_listeners["SSL"]), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    # The TLS layer refuses the bytes: the connection ends, with at most a TLS alert record (type 21).
    assert answer == b"" or answer[0] == 21, answer[:16]
    with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10) as sock:
        sock.sendall(request)
        assert len(sock.recv(65536)) > 8, "the PLAINTEXT listener answers the same bytes"


def test_mutual_tls_refuses_a_client_without_a_certificate(tls_broker: TlsBroker, certs: Certificates) -> None:
    request = encode_request(API_VERSIONS, 3, api_versions_request(), 7, "no-certificate")
    context = ssl.create_default_context(cafile=str(certs.ca_file))
    # TLS 1.3 finishes the client's side of the handshake first; the broker's refusal comes next.
    with (
        pytest.raises((ssl.SSLError, ConnectionError)),
        socket.create_connection(("127.0.0.1", tls_broker.tls_listeners["MTLS"]), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        sock.sendall(request)
        if not sock.recv(65536):
            raise ConnectionResetError("closed without an answer")
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with (
        socket.create_connection(("127.0.0.1", tls_broker.tls_listeners["MTLS"]), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        sock.sendall(request)
        assert len(sock.recv(65536)) > 8, "with its certificate the same client is answered"


def test_a_sasl_listener_with_kafkas_default_mechanism_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "barnabas", "broker", "--data-dir", str(tmp_path / "data"),
         "--set", "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "barnabas broker: sasl.enabled.mechanisms: GSSAPI (Kerberos, Kafka's default) is not supported; use PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
    ]


class TlsCluster(BrokerCluster):
    """Brokers with a PLAINTEXT listener (for the harness) and an SSL listener that they replicate over."""

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        (ssl_port,) = free_ports(1)
        return TlsBroker(
            data_dir, broker_id, {"SSL": ssl_port}, extra_args=["--coordination", self.coordination_url],
            properties=dict(properties),
        )  # fmt: skip


def test_a_cluster_replicating_over_an_ssl_inter_broker_listener_keeps_acks_all(
    tmp_path: Path, certs: Certificates
) -> None:
    properties = {
        **broker_ssl_settings(certs, client_auth="required"),  # brokers show each other their certificates
        "inter.broker.listener.name": "SSL",
        "min.insync.replicas": "2",
    }
    cluster = TlsCluster(tmp_path, 3, properties=properties)
    try:
        cluster.start()
        topic = unique("replicated-over-tls")
        cluster.create_topic(topic, 1, 3)
        cluster.wait_for(lambda md: cluster.fully_replicated(md, topic), "every replica in sync over TLS")
        brokers: list[TlsBroker] = cluster.brokers  # type: ignore[assignment]
        client = ssl_client(certs, ",".join(broker.tls_bootstrap() for broker in brokers), with_certificate=True)
        over_ssl = AdminClient(client).list_topics(timeout=10)
        assert sorted((b.id, b.port) for b in over_ssl.brokers.values()) == [
            (broker.broker_id, broker.tls_listeners["SSL"]) for broker in brokers
        ]
        produce_and_consume(client, count=1000, topic=topic)
        assert all("inter-broker listener SSL" in broker.log_text() for broker in brokers)
    finally:
        cluster.stop()
