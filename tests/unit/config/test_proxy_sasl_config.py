"""The proxy's SASL settings: a broker's for its listener, a Kafka client's to the brokers, refused in one line."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_proxy_config
from barnabas.config.listeners import SecurityProtocol

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}
SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="proxy" password="p";'
SASL_LISTENER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9193", "sasl.enabled.mechanisms": "PLAIN"}


def test_a_sasl_listener_takes_the_brokers_settings_per_listener_too() -> None:
    config = load_proxy_config(None, {
        **BOOTSTRAP, "listeners": "CLIENTS://127.0.0.1:9193", "listener.security.protocol.map": "CLIENTS:SASL_SSL",
        "listener.name.clients.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.clients.ssl.keystore.type": "PEM", "listener.name.clients.ssl.keystore.location": "/k.pem",
        "listener.name.clients.oauthbearer.sasl.jaas.config": "x", "coordination.url": "sqlite:///c.db",
        "connections.max.reauth.ms": "60000",
    })  # fmt: skip
    assert config.protocol is SecurityProtocol.SASL_SSL
    assert config.sasl_mechanisms == ("SCRAM-SHA-512", "OAUTHBEARER")
    assert config.ssl["ssl.keystore.location"] == "/k.pem"
    assert config.listener_value("CLIENTS", "oauthbearer.sasl.jaas.config") == "x"
    assert config["connections.max.reauth.ms"] == 60000


def test_the_broker_side_logs_in_with_a_kafka_client_login() -> None:
    config = load_proxy_config(None, {**BOOTSTRAP, "broker.security.protocol": "SASL_PLAINTEXT",
                                      "broker.sasl.mechanism": "scram-sha-512",
                                      "broker.sasl.jaas.config": SCRAM_LOGIN})  # fmt: skip
    assert config.broker_sasl_mechanism == "SCRAM-SHA-512" and not config.broker_uses_tls
    assert load_proxy_config(None, BOOTSTRAP).broker_sasl_mechanism is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({**SASL_LISTENER, "sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms: GSSAPI (Kerberos"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9193", "sasl.enabled.mechanisms": ""}, "enables no mechanism"),
        ({**SASL_LISTENER, "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
         "sasl.enabled.mechanisms: SCRAM-SHA-256 on the proxy needs coordination.url"),
        ({**SASL_LISTENER, "listener.name.sasl_plaintext.max.connections": "5"},
         "unknown setting 'listener.name.sasl_plaintext.max.connections'"),
        ({"listener.name.x.no.such.setting": "1"}, "unknown setting 'listener.name.x.no.such.setting'"),
        ({"sasl.proxy.principals": "User:p"}, "unknown setting 'sasl.proxy.principals'"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "unknown setting"),
        ({"broker.security.protocol": "SASL_SSL"}, "broker.sasl.mechanism: GSSAPI (Kerberos, Kafka's default)"),
        ({"broker.security.protocol": "SASL_PLAINTEXT", "broker.sasl.mechanism": "OAUTHBEARER"},
         "broker.sasl.mechanism: the proxy has no token"),
        ({"broker.security.protocol": "SASL_PLAINTEXT", "broker.sasl.mechanism": "NTLM"}, "unknown SASL mechanism"),
        ({"broker.security.protocol": "SASL_PLAINTEXT", "broker.sasl.mechanism": "PLAIN"},
         "broker.sasl.jaas.config: broker.security.protocol=SASL_PLAINTEXT needs the proxy's own login"),
    ],
)  # fmt: skip
def test_what_the_proxy_cannot_honour_is_refused_in_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_proxy_config(None, {**BOOTSTRAP, **settings})
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value
