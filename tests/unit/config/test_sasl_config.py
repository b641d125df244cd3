"""SASL listener settings as Kafka takes them: mechanisms per listener, JAAS entries, the inter-broker login."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_broker_config
from barnabas.config.broker import BrokerConfig
from barnabas.security import client_security, listener_security

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";'
SASL = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}


def load_with(settings: dict[str, str]) -> BrokerConfig:
    return load_broker_config(overrides=settings, environ={})


def test_a_sasl_listener_offers_its_mechanisms_and_plain_users() -> None:
    config = load_with(SASL)
    assert config.listener_setup.get("SASL_PLAINTEXT").sasl_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    security = {s.name: s for s in listener_security(config)}
    assert security["PLAINTEXT"].sasl is None
    sasl = security["SASL_PLAINTEXT"].sasl
    assert sasl is not None and dict(sasl.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert (sasl.reauth_ms, sasl.failure_delay_ms, sasl.max_receive_size) == (0, 100, 524288)
    assert client_security(config).sasl is None, "the inter-broker listener is PLAINTEXT"


def test_a_listener_overrides_the_mechanisms() -> None:
    config = load_with({
        **SASL, "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093,SCRAM://:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SCRAM:SASL_SSL",
        "listener.name.scram.sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/k.pem",
    }).listener_setup  # fmt: skip
    assert config.get("SCRAM").sasl_mechanisms == ("SCRAM-SHA-512",)
    assert config.get("SASL_PLAINTEXT").sasl_mechanisms == ("PLAIN", "SCRAM-SHA-256")


def test_the_inter_broker_login_comes_from_the_listener_jaas_entry() -> None:
    config = load_with({
        **SASL, "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    })  # fmt: skip
    security = client_security(config)
    assert security.sasl is not None and security.sasl().mechanism == "SCRAM-SHA-256"
    plain = client_security(load_with({**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT",
                                       "sasl.mechanism.inter.broker.protocol": "PLAIN"}))  # fmt: skip
    assert plain.sasl is not None and plain.sasl().initial_response() == b"\0admin\0admin-secret"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param({**SASL, "sasl.enabled.mechanisms": "GSSAPI"},
                     "sasl.enabled.mechanisms: GSSAPI (Kerberos, Kafka's default) is not supported; use PLAIN, "
                     "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER", id="GSSAPI"),
        pytest.param({"listeners": "SASL_SSL://:9093", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k"},
                     "sasl.enabled.mechanisms: GSSAPI (Kerberos, Kafka's default) is not supported",
                     id="Kafka's default"),
        pytest.param({**SASL, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
                      "inter.broker.listener.name": "SASL_PLAINTEXT",
                      "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
                     "sasl.mechanism.inter.broker.protocol: OAUTHBEARER cannot be the inter-broker mechanism",
                     id="inter-broker OAUTHBEARER"),
        pytest.param({**SASL, "sasl.enabled.mechanisms": "DIGEST-MD5"}, "unknown SASL mechanism DIGEST-MD5",
                     id="unknown"),
        pytest.param({**SASL, "sasl.enabled.mechanisms": ""}, "enables no mechanism", id="none"),
        pytest.param({**SASL, "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "x required;"},
                     "GSSAPI (Kerberos, Kafka's default) is not supported", id="GSSAPI JAAS"),
        pytest.param({**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT"},
                     "sasl.mechanism.inter.broker.protocol: GSSAPI (Kerberos, Kafka's default) is not supported",
                     id="inter-broker GSSAPI"),
        pytest.param({**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT",
                      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
                     "SCRAM-SHA-512 is not enabled on the inter-broker listener SASL_PLAINTEXT",
                     id="inter-broker not enabled"),
    ],
)  # fmt: skip
def test_bad_sasl_settings_stop_the_broker_with_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_with(settings)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param({**SASL, "listener.name.sasl_plaintext.plain.sasl.jaas.config": None},
                     "PLAIN needs listener.name.sasl_plaintext.plain.sasl.jaas.config", id="PLAIN without JAAS"),
        pytest.param({**SASL, "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS + PLAIN_JAAS},
                     "2 login modules, a SASL listener takes one", id="two modules"),
        pytest.param({**SASL, "listener.name.sasl_plaintext.plain.sasl.jaas.config": SCRAM_JAAS},
                     "the login module for PLAIN must be org.apache.kafka.common.security.plain.PlainLoginModule",
                     id="wrong module"),
        pytest.param({**SASL, "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_a="1"'},
                     "listener.name.sasl_plaintext.plain.sasl.jaas.config: the entry of x does not end with ';'",
                     id="no semicolon"),
        pytest.param({**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT",
                      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
                     "the inter-broker login needs username", id="inter-broker without JAAS"),
    ],
)  # fmt: skip
def test_bad_jaas_entries_stop_the_broker_with_one_line(settings: dict[str, str | None], message: str) -> None:
    config = load_with({key: value for key, value in settings.items() if value is not None})
    with pytest.raises(ConfigError) as caught:
        listener_security(config)
        client_security(config)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert "admin-secret" not in str(caught.value)
