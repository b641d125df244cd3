"""Certificates for TLS tests, made fresh per test with trustme (no key file is ever committed).

One CA signs a broker certificate (for 127.0.0.1 and localhost) and a client certificate; each is
written as PEM the way Kafka's ``ssl.keystore.type=PEM`` reads it (the key, then the chain, in
one file), and the CA as a truststore. :func:`broker_ssl_settings` gives a broker's ssl.* settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["Certificates", "broker_ssl_settings", "make_certificates"]


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
