"""Listener settings as Kafka takes them: names, protocols, advertised endpoints, the inter-broker listener."""

from __future__ import annotations

from pathlib import Path

import pytest

from barnabas.config import ConfigError, load_broker_config
from barnabas.config.broker import BrokerConfig
from barnabas.config.listeners import SecurityProtocol

PEM = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/keystore.pem"}


def load_with(settings: dict[str, str]) -> BrokerConfig:
    return load_broker_config(overrides=settings, environ={})


def test_one_plaintext_listener_by_default() -> None:
    setup = load_with({}).listener_setup
    assert [(listener.name, listener.protocol) for listener in setup.listeners] == [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT)
    ]
    assert setup.inter_broker == "PLAINTEXT"


def test_several_named_listeners_with_their_protocols_and_advertised_entries() -> None:
    setup = load_with({
        "listeners": "CLIENT://0.0.0.0:9093,REPLICATION://127.0.0.1:9094,PLAINTEXT://:9092",
        "listener.security.protocol.map": "CLIENT:SSL,REPLICATION:SSL,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "CLIENT://kafka-0.example:9093",
        "inter.broker.listener.name": "replication",
        **PEM,
    }).listener_setup  # fmt: skip
    assert [(listener.name, listener.protocol.value, listener.port) for listener in setup.listeners] == [
        ("CLIENT", "SSL", 9093), ("REPLICATION", "SSL", 9094), ("PLAINTEXT", "PLAINTEXT", 9092)
    ]  # fmt: skip
    assert setup.get("CLIENT").advertised is not None and setup.get("CLIENT").advertised.host == "kafka-0.example"
    assert setup.get("REPLICATION").advertised is None, "advertised as bound"
    assert setup.inter_broker == "REPLICATION"


def test_the_inter_broker_listener_by_protocol_or_as_the_only_one() -> None:
    both = {"listeners": "PLAINTEXT://:9092,SSL://:9093", **PEM}
    assert load_with(both).listener_setup.inter_broker == "PLAINTEXT"
    assert load_with({**both, "security.inter.broker.protocol": "SSL"}).listener_setup.inter_broker == "SSL"
    assert load_with({"listeners": "SSL://:9093", **PEM}).listener_setup.inter_broker == "SSL"


def test_the_same_port_on_ipv4_and_ipv6_addresses_is_two_listeners() -> None:
    setup = load_with({
        "listeners": "PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
    }).listener_setup  # fmt: skip
    assert [listener.host for listener in setup.listeners] == ["127.0.0.1", "::1"]


def test_a_listener_override_applies_to_that_listener_alone() -> None:
    config = load_with({
        "listeners": "INTERNAL://:9093,EXTERNAL://:9094", "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL", **PEM,
        "listener.name.external.ssl.keystore.location": "/external.pem",
        "listener.name.EXTERNAL.ssl.client.auth": "required",
    })  # fmt: skip
    assert config.ssl_for("EXTERNAL")["ssl.keystore.location"] == "/external.pem"
    assert config.ssl_for("EXTERNAL")["ssl.client.auth"] == "required"
    assert config.ssl_for("INTERNAL")["ssl.keystore.location"] == "/keystore.pem"
    assert config.ssl_for("INTERNAL")["ssl.client.auth"] == "none"


def test_a_listener_override_may_give_the_only_keystore() -> None:
    config = load_with({
        "listeners": "SSL://:9093", "ssl.keystore.type": "PEM", "listener.name.ssl.ssl.keystore.location": "/k.pem",
    })  # fmt: skip
    assert config.ssl_for("SSL")["ssl.keystore.location"] == "/k.pem"


def test_java_tls_provider_settings_are_ignored_not_fatal() -> None:
    assert "ssl.keymanager.algorithm" in load_with({"ssl.keymanager.algorithm": "SunX509"}).ignored


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param(
            {"listeners": "EXT://:9093", "listener.security.protocol.map": "EXT:TLS"},
            "listener.security.protocol.map: unknown security protocol 'TLS'",
            id="unknown protocol",
        ),
        pytest.param(
            {"listener.security.protocol.map": "PLAINTEXT"}, "is not of the form NAME:PROTOCOL", id="malformed map"
        ),
        pytest.param(
            {"listener.security.protocol.map": "A:SSL,a:PLAINTEXT"}, "listener name a appears twice", id="map twice"
        ),
        pytest.param(
            {"listeners": "CLIENT://:9093"},
            "listeners: listener name CLIENT is not in listener.security.protocol.map",
            id="name not in the map",
        ),
        pytest.param(
            {"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"},
            "listener name PLAINTEXT appears twice",
            id="duplicate name",
        ),
        pytest.param(
            {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://:9092", **PEM},
            "listeners: PLAINTEXT and SSL both use port 9092",
            id="duplicate port",
        ),
        pytest.param({"listeners": ""}, "at least one listener is required", id="no listener"),
        pytest.param({"listeners": "SSL://:9093"}, "listener SSL: SSL needs a keystore", id="SSL without keystore"),
        pytest.param(
            {"listeners": "SASL_SSL://:9094"},
            "sasl.enabled.mechanisms: GSSAPI (Kerberos, Kafka's default) is not supported; use PLAIN, SCRAM-SHA-256, "
            "SCRAM-SHA-512",
            id="SASL with Kafka's default mechanism",
        ),
        pytest.param(
            {"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9095"},
            "sasl.enabled.mechanisms: GSSAPI (Kerberos, Kafka's default) is not supported",
            id="SASL_PLAINTEXT with Kafka's default mechanism",
        ),
        pytest.param(
            {"listeners": "A://:9092,B://:9093", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"},
            "inter.broker.listener.name: set it to one of the listeners (A, B)",
            id="no inter-broker listener",
        ),
        pytest.param(
            {"inter.broker.listener.name": "REPLICATION"},
            "inter.broker.listener.name: REPLICATION is not one of the listeners",
            id="inter-broker listener missing",
        ),
        pytest.param(
            {"security.inter.broker.protocol": "SSL"},
            "security.inter.broker.protocol: no listener is named SSL",
            id="inter-broker protocol without its listener",
        ),
        pytest.param(
            {"security.inter.broker.protocol": "PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT"},
            "cannot both be set",
            id="both inter-broker settings",
        ),
        pytest.param(
            {"advertised.listeners": "EXTERNAL://kafka:9092"},
            "advertised.listeners: EXTERNAL is not one of the listeners",
            id="advertised name not a listener",
        ),
        pytest.param(
            {"advertised.listeners": "PLAINTEXT://kafka:0"}, "port 0 cannot be advertised", id="advertised port 0"
        ),
        pytest.param(
            {"advertised.listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"},
            "advertised.listeners: listener name PLAINTEXT appears twice",
            id="advertised twice",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", "ssl.keystore.location": "/k.jks"},
            "listener SSL: ssl.keystore.type=JKS is not supported; convert the store to PEM",
            id="JKS keystore",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", **PEM, "ssl.keystore.type": "PKCS12"},
            "ssl.keystore.type=PKCS12 is not supported",
            id="PKCS12 keystore",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", **PEM, "ssl.truststore.location": "/ca.pem"},
            "ssl.truststore.type=JKS is not supported",
            id="JKS truststore",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", **PEM, "ssl.keystore.password": "secret"},
            "ssl.keystore.password does not apply to PEM; use ssl.key.password",
            id="keystore password with PEM",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", **PEM, "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"},
            "set ssl.keystore.location or the inline ssl.keystore.* PEM, not both",
            id="file and inline keystore",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", "ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"},
            "ssl.keystore.certificate.chain and ssl.keystore.key go together",
            id="inline key without chain",
        ),
        pytest.param(
            {"listeners": "SSL://:9093", **PEM, "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"},
            "ssl.enabled.protocols: 'TLSv1.1' is not one of TLSv1.2, TLSv1.3",
            id="old TLS version",
        ),
        pytest.param({"ssl.client.auth": "maybe"}, "ssl.client.auth: 'maybe' is not one of", id="client auth"),
        pytest.param(
            {"listener.name.ssl.ssl.no.such": "1"}, "unknown setting 'listener.name.ssl.ssl.no.such'", id="bad override"
        ),
        pytest.param(
            {"listener.name.ssl.ssl.client.auth": "sometimes"},
            "ssl.client.auth: 'sometimes' is not one of none, requested, required (from command line, as "
            "listener.name.ssl.ssl.client.auth)",
            id="bad override value",
        ),
    ],
)
def test_bad_listener_settings_stop_the_broker_with_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_with(settings)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_properties_file_with_kafkas_listener_settings(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=PLAINTEXT://:9092,SSL://:9093\n"
        "advertised.listeners=PLAINTEXT://kafka-0:9092,SSL://kafka-0:9093\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "inter.broker.listener.name=SSL\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/etc/kafka/keystore.pem\n"
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.client.auth=required\nssl.endpoint.identification.algorithm=\n"
        "ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT\n"
    )
    config = load_broker_config(properties, environ={})
    assert config.listener_setup.inter_broker == "SSL"
    assert config.ssl_for("SSL")["ssl.endpoint.identification.algorithm"] == ""
    assert not config.ignored, "inter.broker.listener.name is a setting now, not an ignored KRaft one"
