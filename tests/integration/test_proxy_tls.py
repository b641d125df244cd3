"""The proxy over TLS, on real processes: clients reach it over SSL, and it reaches the brokers over SSL.

The proxy's SSL listener takes the broker's ssl.* settings; ``broker.security.protocol=SSL`` and
``broker.ssl.*`` are its client side. confluent-kafka produces and consumes (a consumer group
included) through a proxy in front of a broker's PLAINTEXT listener and in front of its SSL one; a
plaintext client on the proxy's SSL port gets no Kafka answer.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.testing import ProxyNode, free_ports
from tests.support.raw_client import API_VERSIONS, encode_request
from tests.support.requests import api_versions_request
from tests.support.tls import (
    Certificates,
    TlsBroker,
    broker_ssl_settings,
    make_certificates,
    produce_and_consume,
    ssl_client,
)

pytestmark = pytest.mark.timeout(300)


class TlsProxyNode(ProxyNode):
    """A proxy node whose client listener is SSL (``--listen`` would make it PLAINTEXT)."""

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--listen")
        del command[at : at + 2]
        return [*command, "--set", f"listeners=SSL://{self.host}:{self.port}"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[TlsBroker]:
    (ssl_port,) = free_ports(1)
    properties = {
        **broker_ssl_settings(certs),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    started = TlsBroker(tmp_path_factory.mktemp("broker") / "data", 0, {"SSL": ssl_port}, properties=properties)
    started.start()
    yield started
    started.kill()


def _proxy(directory: Path, bootstrap: str, certs: Certificates, **more: str) -> TlsProxyNode:
    (port,) = free_ports(1)
    properties = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),  # its names are 127.0.0.1 and localhost too
        **more,
    }
    return TlsProxyNode(directory, bootstrap, port, properties=properties)


def test_clients_reach_the_proxy_over_ssl_in_front_of_plaintext_brokers(
    tmp_path: Path, broker: TlsBroker, certs: Certificates
) -> None:
    proxy = _proxy(tmp_path, broker.bootstrap, certs)
    proxy.start()
    try:
        produce_and_consume(ssl_client(certs, proxy.bootstrap), count=1000)
    finally:
        proxy.stop()


def test_the_proxy_reaches_the_brokers_ssl_listener_over_tls(
    tmp_path: Path, broker: TlsBroker, certs: Certificates
) -> None:
    proxy = _proxy(
        tmp_path,
        broker.tls_bootstrap(),
        certs,
        **{
            "broker.security.protocol": "SSL",
            "broker.ssl.truststore.type": "PEM",
            "broker.ssl.truststore.location": str(certs.ca_file),
        },
    )
    proxy.start()
    try:
        produce_and_consume(ssl_client(certs, proxy.bootstrap), count=1000)
    finally:
        proxy.stop()


def test_a_plaintext_client_on_the_proxys_ssl_port_gets_no_kafka_answer(
    tmp_path: Path, broker: TlsBroker, certs: Certificates
) -> None:
    proxy = _proxy(tmp_path, broker.bootstrap, certs)
    proxy.start()
    try:
        request = encode_request(API_VERSIONS, 3, api_versions_request(), 7, "plaintext-client")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer == b"" or answer[0] == 21, answer[:16]  # nothing, or a TLS alert record
    finally:
        proxy.stop()
