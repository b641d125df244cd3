"""A broker with the two secured client listeners deployments use, and every client family's settings for them.

:class:`SecureBroker` serves PLAINTEXT (the harness's), SASL_SSL taking SCRAM-SHA-512 logins only
(its user added through the PLAINTEXT listener before a test runs) and MTLS, an SSL listener with
``ssl.client.auth=required``. A :class:`Transport` says how a client reaches one of them, in each
family's words: librdkafka, kafka-python, aiokafka, kafkajs (the JSON ``--client-config`` of
tests/interop/node) and the Java client (the properties file of tests/interop/java).
:class:`SaslSslCluster` is a cluster whose brokers replicate over SASL_SSL and whose clients use it too.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from barnabas.testing import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.tls import Certificates, TlsBroker, broker_ssl_settings, make_certificates

__all__ = ["SCRAM_LOGIN", "SaslSslCluster", "SecureBroker", "Transport", "add_scram_user", "java_keystore"]

#: The SCRAM-SHA-512 user every SecureBroker knows: (name, password).
SCRAM_LOGIN = ("alice", "alice-secret")
#: The SCRAM-SHA-512 user a SaslSslCluster's brokers log in to each other as.
BROKER_LOGIN = ("broker", "broker-secret")


def add_scram_user(bootstrap: str, user: str, password: str, settings: dict[str, str] | None = None) -> None:
    """Give ``user`` a SCRAM-SHA-512 credential (AlterUserScramCredentials, 4096 iterations)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(settings or {})})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


def java_keystore(leaf: trustme.LeafCert, path: Path) -> Path:
    """``leaf``'s key (PKCS#8, which the Java client's PEM keystore needs) and certificate chain in one file."""
    key = load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    path.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return path


@dataclass(frozen=True)
class Transport:
    """One secured listener as a client reaches it: with a SCRAM-SHA-512 ``login``, or (None) a client certificate."""

    name: str
    bootstrap: str
    certs: Certificates
    login: tuple[str, str] | None = None

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.login is not None else "SSL"

    def librdkafka(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol,
                  "ssl.ca.location": str(self.certs.ca_file)}  # fmt: skip
        if self.login is None:
            return config | {"ssl.certificate.location": str(self.certs.client_cert),
                             "ssl.key.location": str(self.certs.client_key)}  # fmt: skip
        username, password = self.login
        return config | {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": username, "sasl.password": password}

    def kafka_python(self) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol,
                                  "ssl_cafile": str(self.certs.ca_file)}  # fmt: skip
        if self.login is None:
            return config | {"ssl_certfile": str(self.certs.client_cert), "ssl_keyfile": str(self.certs.client_key)}
        return config | self._python_sasl()

    def aiokafka(self) -> dict[str, Any]:
        context = ssl.create_default_context(cafile=str(self.certs.ca_file))
        if self.login is None:
            context.load_cert_chain(str(self.certs.client_cert), str(self.certs.client_key))
        config = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol, "ssl_context": context}
        return config if self.login is None else config | self._python_sasl()

    def _python_sasl(self) -> dict[str, str]:
        assert self.login is not None
        username, password = self.login
        return {"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": username, "sasl_plain_password": password}

    def kafkajs(self, path: Path) -> Path:
        """The kafkajs tools' ``--client-config`` file: the ``ssl`` and ``sasl`` options, files named by path."""
        tls: dict[str, str] = {"ca": str(self.certs.ca_file)}
        config: dict[str, Any] = {"ssl": tls}
        if self.login is None:
            tls |= {"cert": str(self.certs.client_cert), "key": str(self.certs.client_key)}
        else:
            username, password = self.login
            config["sasl"] = {"mechanism": "scram-sha-512", "username": username, "password": password}
        path.write_text(json.dumps(config))
        return path

    def java(self, path: Path) -> Path:
        """The Java tools' ``--client-config`` file: the client's security properties (PEM stores)."""
        lines = [f"security.protocol={self.protocol}", "ssl.truststore.type=PEM",
                 f"ssl.truststore.location={self.certs.ca_file}"]  # fmt: skip
        if self.login is None:
            keystore = java_keystore(self.certs.client, path.with_suffix(".keystore.pem"))
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"]
        else:
            username, password = self.login
            jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" password="{password}";'  # noqa: E501
            lines += ["sasl.mechanism=SCRAM-SHA-512", f"sasl.jaas.config={jaas}"]
        path.write_text("\n".join(lines) + "\n")
        return path


class SecureBroker(TlsBroker):
    """A broker with PLAINTEXT, SASL_SSL (SCRAM-SHA-512 only) and MTLS listeners, and any ``extra_listeners``
    (name: protocol); ``properties`` go over its settings."""

    def __init__(
        self, data_dir: Path, certs: Certificates, properties: Mapping[str, str] = {},
        extra_listeners: Mapping[str, str] = {},
    ) -> None:  # fmt: skip
        protocols = {"SASL_SSL": "SASL_SSL", "MTLS": "SSL", **extra_listeners}
        settings = {
            **broker_ssl_settings(certs),
            "listener.security.protocol.map": ",".join(
                f"{n}:{p}" for n, p in {"PLAINTEXT": "PLAINTEXT", **protocols}.items()
            ),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.mtls.ssl.client.auth": "required",
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            **properties,
        }
        super().__init__(
            data_dir, 0, dict(zip(protocols, free_ports(len(protocols)), strict=True)), properties=settings
        )
        self.certs = certs

    def start(self, timeout_s: float | None = None) -> SecureBroker:
        super().start(timeout_s)
        add_scram_user(self.bootstrap, *SCRAM_LOGIN)
        return self

    def sasl_ssl(self) -> Transport:
        return Transport("SASL_SSL", self.tls_bootstrap("SASL_SSL"), self.certs, SCRAM_LOGIN)

    def mtls(self) -> Transport:
        return Transport("MTLS", self.tls_bootstrap("MTLS"), self.certs)


class SaslSslCluster(BrokerCluster):
    """Brokers with the harness's PLAINTEXT listener and a SASL_SSL one (SCRAM-SHA-512, certificates made in
    ``base``/certs) that they replicate over and clients use; ``properties`` go over these settings.

    The SCRAM users (BROKER_LOGIN, SCRAM_LOGIN) are added once the brokers run, over PLAINTEXT, as
    ``kafka-storage --add-scram`` would before a first start: until then followers retry their login.
    """

    def __init__(self, base: Path, size: int = 3, coordination_url: str | None = None,
                 properties: Mapping[str, str] | None = None, **kwargs: Any) -> None:  # fmt: skip
        self.certs = make_certificates(Path(base) / "certs")
        username, password = BROKER_LOGIN
        secured = {
            **broker_ssl_settings(self.certs),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram."
            f'ScramLoginModule required username="{username}" password="{password}";',
        }
        super().__init__(base, size, coordination_url, {**secured, **(properties or {})}, **kwargs)

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        (port,) = free_ports(1)
        return TlsBroker(data_dir, broker_id, {"SASL_SSL": port}, extra_args=["--coordination", self.coordination_url],
                         properties=dict(properties))  # fmt: skip

    def start(self) -> SaslSslCluster:
        super().start()
        for user, password in (BROKER_LOGIN, SCRAM_LOGIN):
            add_scram_user(self.brokers[0].bootstrap, user, password)
        return self

    def client_access(self) -> tuple[str, dict[str, str]]:
        brokers: list[TlsBroker] = self.brokers  # type: ignore[assignment]
        bootstrap = ",".join(broker.tls_bootstrap("SASL_SSL") for broker in brokers)
        settings = Transport("SASL_SSL", bootstrap, self.certs, SCRAM_LOGIN).librdkafka()
        del settings["bootstrap.servers"]
        return bootstrap, settings
