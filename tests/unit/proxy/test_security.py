"""The proxy's security built from its settings: the client listener by the broker's code, its own login."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_proxy_config
from barnabas.proxy.security import proxy_security

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}
PLAIN_USERS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
TO_BROKERS = {"broker.security.protocol": "SASL_PLAINTEXT", "broker.sasl.mechanism": "SCRAM-SHA-512"}
SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="proxy" password="p";'


def test_the_client_listener_is_a_brokers_sasl_listener() -> None:
    security = proxy_security(load_proxy_config(None, {
        **BOOTSTRAP, "listeners": "SASL_PLAINTEXT://127.0.0.1:9193", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "connection.failed.authentication.delay.ms": "250",
    }))  # fmt: skip
    sasl = security.listener.sasl
    assert sasl is not None and dict(sasl.plain_users) == {"alice": "alice-secret"}
    assert (sasl.failure_delay_ms, sasl.proxy_users) == (250, frozenset()), "no one acts for another at the proxy"
    assert security.listener.context is None and security.broker_login is None


def test_the_proxys_login_names_whom_it_acts_for() -> None:
    security = proxy_security(load_proxy_config(None, {**BOOTSTRAP, **TO_BROKERS,
                                                       "broker.sasl.jaas.config": SCRAM_LOGIN}))  # fmt: skip
    assert security.broker_login is not None and security.broker_user == "proxy"
    assert security.broker_login("alice").initial_response().startswith(b"n,a=alice,n=proxy,r=")
    assert security.broker_login("").initial_response().startswith(b"n,,n=proxy,r="), "its own requests: itself"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9193", "sasl.enabled.mechanisms": "PLAIN"},
         "listener SASL_PLAINTEXT: PLAIN needs listener.name.sasl_plaintext.plain.sasl.jaas.config"),
        ({**TO_BROKERS, "broker.sasl.jaas.config": "not jaas"},
         "broker.sasl.jaas.config: 'jaas' is not a control flag"),
        ({**TO_BROKERS, "broker.sasl.jaas.config": PLAIN_USERS},
         "broker.sasl.jaas.config: broker.sasl.mechanism=SCRAM-SHA-512 takes one "
         "org.apache.kafka.common.security.scram.ScramLoginModule entry"),
        ({**TO_BROKERS, "broker.sasl.jaas.config": SCRAM_LOGIN.replace(' password="p"', "")},
         "the proxy's login needs username"),
    ],
)  # fmt: skip
def test_what_cannot_be_built_is_refused_in_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        proxy_security(load_proxy_config(None, {**BOOTSTRAP, **settings}))
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_an_oauthbearer_listener_gets_the_brokers_validator() -> None:
    security = proxy_security(load_proxy_config(None, {
        **BOOTSTRAP, "listeners": "SASL_PLAINTEXT://127.0.0.1:9193", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    }))  # fmt: skip
    sasl = security.listener.sasl
    assert sasl is not None and type(sasl.oauthbearer).__name__ == "UnsecuredValidator"
