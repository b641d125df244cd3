"""Certificates for TLS tests, made fresh per test with trustme (no key file is ever committed).

One CA signs a broker certificate (for 127.0.0.1 and localhost) and a client certificate; each is
written as PEM the way Kafka's ``ssl.keystore.type=PEM`` reads it (the key, then the chain, in
one file), and the CA as a truststore. :func:`broker_ssl_settings` gives a broker's ssl.* settings;
:class:`TlsBroker` runs one with TLS listeners beside its PLAINTEXT one, and
:func:`produce_and_consume` checks a client configuration end to end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka import Consumer, KafkaError, Producer

from tests.support.broker_process import BrokerProcess
from tests.support.requests import unique

__all__ = ["Certificates", "TlsBroker", "broker_ssl_settings", "make_certificates", "produce_and_consume", "ssl_client"]


@dataclass(frozen=True)
class Certificates:
    ca: trustme.CA
    #: The CA's certificate: every truststore.
    ca_file: Path
    #: The broker's key and certificate chain in one PEM file (a keystore).
    broker_keystore: Path
    broker: trustme.LeafCert
    #: The client's certificate chain and key, apart (as librdkafka and kafka-python take them), and together.
    client_cert: Path
    client_key: Path
    client_keystore: Path
    client: trustme.LeafCert


def _write_keystore(path: Path, leaf: trustme.LeafCert) -> Path:
    path.write_bytes(leaf.private_key_pem.bytes() + b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return path


def make_certificates(directory: Path, *, client_name: str = "alice") -> Certificates:
    """A CA, a broker certificate for 127.0.0.1/localhost and a client certificate (CN=``client_name``)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="barnabas tests")
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    broker = ca.issue_cert("127.0.0.1", "localhost", common_name="broker", organization_unit_name="Brokers")
    client = ca.issue_cert("client.example", common_name=client_name, organization_unit_name="ServiceUsers")
    client_cert = directory / "client.pem"
    client_cert.write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    client_key = directory / "client.key"
    client.private_key_pem.write_to_path(str(client_key))
    return Certificates(
        ca=ca,
        ca_file=ca_file,
        broker_keystore=_write_keystore(directory / "broker-keystore.pem", broker),
        broker=broker,
        client_cert=client_cert,
        client_key=client_key,
        client_keystore=_write_keystore(directory / "client-keystore.pem", client),
        client=client,
    )


def broker_ssl_settings(certs: Certificates, client_auth: str = "none") -> dict[str, str]:
    """A broker's ssl.* settings: its PEM keystore, the CA as truststore, ``ssl.client.auth``."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_file),
        "ssl.client.auth": client_auth,
    }


class TlsBroker(BrokerProcess):
    """A broker with a PLAINTEXT listener first (the harness's port) and SSL listeners on ports of their own."""

    def __init__(self, data_dir: Path, broker_id: int, tls_listeners: Mapping[str, int], **kwargs: Any) -> None:
        super().__init__(data_dir, broker_id, **kwargs)
        self.tls_listeners = dict(tls_listeners)

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--listen")  # --listen sets one PLAINTEXT listener; these brokers have several
        del command[at : at + 2]
        listeners = [f"PLAINTEXT://{self.host}:{self.port}"]
        listeners += [f"{name}://{self.host}:{port}" for name, port in self.tls_listeners.items()]
        return [*command, "--set", "listeners=" + ",".join(listeners)]

    def tls_bootstrap(self, name: str = "SSL") -> str:
        return f"{self.host}:{self.tls_listeners[name]}"


def ssl_client(certs: Certificates, bootstrap: str, *, with_certificate: bool = False) -> dict[str, str]:
    config = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(certs.ca_file)}
    if with_certificate:
        config |= {"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)}
    return config


def produce_and_consume(config: dict[str, str], count: int = 2000, topic: str | None = None) -> None:
    """acks=all produce, then read everything back through a consumer group (FindCoordinator on this listener)."""
    topic = topic or unique("tls")
    acked: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode() * 20, on_delivery=lambda err, _: acked.append(err))
    assert producer.flush(60) == 0
    assert acked == [None] * count
    consumer = Consumer({**config, "group.id": unique("group"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [f"value-{i}".encode() * 20 for i in range(count)]
