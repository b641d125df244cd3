"""TLS contexts from ssl.* settings, checked by real handshakes on loopback (certificates from trustme)."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from barnabas.config import ConfigError, load_broker_config
from barnabas.config.broker import BrokerConfig
from barnabas.security import ANONYMOUS, KafkaPrincipal, client_context, client_security, listener_security
from tests.support.tls import Certificates, broker_ssl_settings, make_certificates


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path / "certs")


def ssl_config(certs: Certificates, **settings: str) -> BrokerConfig:
    overrides = {"listeners": "SSL://127.0.0.1:0", **broker_ssl_settings(certs), **settings}
    return load_broker_config(overrides={k.replace("_", "."): v for k, v in overrides.items()}, environ={})


def client_tls(certs: Certificates, *, with_certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca_file))
    if with_certificate:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


@dataclass
class Handshake:
    """What both ends saw: the server side's principal, and the protocol and cipher negotiated."""

    principal: KafkaPrincipal
    version: str | None
    cipher: str | None


async def handshake(config: BrokerConfig, client: ssl.SSLContext, server_hostname: str = "127.0.0.1") -> Handshake:
    """Serve ``config``'s SSL listener on loopback, connect with ``client``, exchange one byte."""
    (security,) = listener_security(config)
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[KafkaPrincipal] = loop.create_future()

    class Server(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.set_result(security.principal(transport.get_extra_info("ssl_object")))
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(b"!")

    server = await loop.create_server(Server, "127.0.0.1", 0, ssl=security.context)
    try:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=server_hostname)
        try:
            async with asyncio.timeout(10):
                assert await reader.readexactly(1) == b"!"
                principal = await accepted
            ssl_object = writer.get_extra_info("ssl_object")
            cipher = ssl_object.cipher()
            return Handshake(principal, ssl_object.version(), cipher[0] if cipher else None)
        finally:
            writer.close()
    finally:
        server.close()


def test_a_client_without_certificate_is_anonymous(certs: Certificates) -> None:
    seen = asyncio.run(handshake(ssl_config(certs), client_tls(certs)))
    assert seen.principal == ANONYMOUS
    assert seen.version == "TLSv1.3"


def test_a_verified_client_certificate_is_the_principal_through_the_rules(certs: Certificates) -> None:
    rules = "RULE:^CN=([^,]+),OU=ServiceUsers.*$/$1/U,DEFAULT"
    config = ssl_config(certs, ssl_client_auth="required", ssl_principal_mapping_rules=rules)
    seen = asyncio.run(handshake(config, client_tls(certs, with_certificate=True)))
    assert seen.principal == KafkaPrincipal("User", "ALICE")


def test_without_rules_the_principal_is_the_whole_distinguished_name(certs: Certificates) -> None:
    config = ssl_config(certs, ssl_client_auth="requested")
    seen = asyncio.run(handshake(config, client_tls(certs, with_certificate=True)))
    assert seen.principal.name.startswith("CN=alice,OU=ServiceUsers,O=")
    assert asyncio.run(handshake(config, client_tls(certs))).principal == ANONYMOUS, "requested, not required"


def test_required_client_auth_refuses_a_client_without_certificate(certs: Certificates) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        asyncio.run(handshake(ssl_config(certs, ssl_client_auth="required"), client_tls(certs)))


def test_ssl_protocol_caps_the_version(certs: Certificates) -> None:
    seen = asyncio.run(handshake(ssl_config(certs, ssl_protocol="TLSv1.2"), client_tls(certs)))
    assert seen.version == "TLSv1.2"


def test_cipher_suites_by_their_iana_names(certs: Certificates) -> None:
    # trustme's keys are ECDSA; naming no TLS 1.3 suite leaves TLS 1.2, as the JVM would.
    config = ssl_config(certs, ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
    seen = asyncio.run(handshake(config, client_tls(certs)))
    assert (seen.version, seen.cipher) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")


def test_only_tls_13_suites_turn_tls_12_off(certs: Certificates) -> None:
    every13 = "TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,TLS_AES_128_GCM_SHA256"
    client = client_tls(certs)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    config = ssl_config(certs, ssl_cipher_suites=every13)
    (security,) = listener_security(config)
    assert security.context is not None and security.context.minimum_version is ssl.TLSVersion.TLSv1_3
    with pytest.raises((ssl.SSLError, ConnectionError)):
        asyncio.run(handshake(config, client))


def test_inline_pem_keystore_and_truststore(certs: Certificates) -> None:
    chain = b"".join(blob.bytes() for blob in certs.broker.cert_chain_pems).decode()
    config = load_broker_config(
        overrides={
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": chain,
            "ssl.keystore.key": certs.broker.private_key_pem.bytes().decode(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certs.ca.cert_pem.bytes().decode(),
            "ssl.client.auth": "required",
        },
        environ={},
    )
    seen = asyncio.run(handshake(config, client_tls(certs, with_certificate=True)))
    assert seen.principal.name.startswith("CN=alice")


def test_an_encrypted_key_needs_its_password_and_never_prompts(certs: Certificates, tmp_path: Path) -> None:
    key = serialization.load_pem_private_key(certs.broker.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    keystore = tmp_path / "encrypted.pem"
    keystore.write_bytes(encrypted + b"".join(blob.bytes() for blob in certs.broker.cert_chain_pems))
    with pytest.raises(ConfigError, match="not a PEM private key with its certificate chain, or a wrong key password"):
        listener_security(ssl_config(certs, ssl_keystore_location=str(keystore)))
    config = ssl_config(certs, ssl_keystore_location=str(keystore), ssl_key_password="s3cret")
    assert asyncio.run(handshake(config, client_tls(certs))).principal == ANONYMOUS


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssl_keystore_location": "/no/such/keystore.pem"}, "ssl.keystore.location /no/such/keystore.pem: No such"),
        ({"ssl_truststore_location": "/no/such/ca.pem", "ssl_client_auth": "required"}, "No such file"),
        ({"ssl_cipher_suites": "TLS_NO_SUCH_SUITE"}, "ssl.cipher.suites: unknown cipher suite TLS_NO_SUCH_SUITE"),
        ({"ssl_cipher_suites": "TLS_AES_128_GCM_SHA256"}, "TLS 1.3 suites can only be enabled all together"),
        (
            {"ssl_cipher_suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ssl_enabled_protocols": "TLSv1.3"},
            "names no suite of an enabled TLS version",
        ),
        ({"ssl_protocol": "TLSv1.2", "ssl_enabled_protocols": "TLSv1.3"}, "allows none of ssl.enabled.protocols"),
        ({"ssl_principal_mapping_rules": "RULE:^CN=(.*$/$1/"}, "pattern does not compile"),
    ],
)
def test_settings_that_cannot_be_served_are_one_line_errors(
    certs: Certificates, settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        listener_security(ssl_config(certs, **settings))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_keystore_that_is_not_pem_is_refused(certs: Certificates, tmp_path: Path) -> None:
    garbage = tmp_path / "keystore.jks"
    garbage.write_bytes(b"\xfe\xed\xfe\xed not pem")
    with pytest.raises(ConfigError, match=r"listener SSL: ssl\.keystore\.location .*jks: not a PEM private key"):
        listener_security(ssl_config(certs, ssl_keystore_location=str(garbage)))


def test_the_client_side_checks_the_host_name_unless_told_not_to(certs: Certificates) -> None:
    config = ssl_config(certs)
    strict = client_security(config).context
    assert strict is not None and strict.check_hostname
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(handshake(config, strict, server_hostname="kafka.example"))
    loose = client_context("SSL", {**config.ssl_for("SSL"), "ssl.endpoint.identification.algorithm": ""})
    assert asyncio.run(handshake(config, loose, server_hostname="kafka.example")).version == "TLSv1.3"


def test_a_plaintext_inter_broker_listener_has_no_client_context(certs: Certificates) -> None:
    config = load_broker_config(
        overrides={"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **broker_ssl_settings(certs)}, environ={}
    )
    security = client_security(config)
    assert (security.listener, security.context) == ("PLAINTEXT", None)
    assert [(s.name, s.context is not None) for s in listener_security(config)] == [("PLAINTEXT", False), ("SSL", True)]
