"""The proxy's TLS settings: both sides parsed, and every setting it cannot honour refused in one line."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_proxy_config
from barnabas.config.listeners import SecurityProtocol

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}
KEYSTORE = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/certs/proxy.pem"}


def test_a_plaintext_listener_needs_no_tls_setting() -> None:
    config = load_proxy_config(None, BOOTSTRAP)
    assert config.protocol is SecurityProtocol.PLAINTEXT and not config.broker_uses_tls


def test_an_ssl_listener_takes_the_brokers_ssl_settings() -> None:
    config = load_proxy_config(None, {**BOOTSTRAP, "listeners": "SSL://127.0.0.1:9193", **KEYSTORE,
                                      "ssl.client.auth": "required"})  # fmt: skip
    assert config.protocol is SecurityProtocol.SSL
    assert config.ssl["ssl.keystore.location"] == "/certs/proxy.pem" and config.ssl["ssl.client.auth"] == "required"


def test_the_broker_side_takes_the_same_settings_under_broker() -> None:
    config = load_proxy_config(None, {**BOOTSTRAP, "broker.security.protocol": "SSL",
                                      "broker.ssl.truststore.type": "PEM",
                                      "broker.ssl.truststore.location": "/certs/ca.pem",
                                      "ssl.truststore.location": "/certs/clients-ca.pem"})  # fmt: skip
    assert config.broker_uses_tls
    assert config.broker_ssl["ssl.truststore.location"] == "/certs/ca.pem", "the client side reads broker.* only"
    assert config.broker_ssl["ssl.client.auth"] == "none"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "SASL_SSL://127.0.0.1:9193", "sasl.enabled.mechanisms": "PLAIN"},
         "listener SASL_SSL: SSL needs a keystore"),
        ({"listeners": "CLIENTS://127.0.0.1:9193"}, "listener name CLIENTS is not in listener.security.protocol.map"),
        ({"listeners": "SSL://127.0.0.1:9193"}, "listener SSL: SSL needs a keystore"),
        ({"listeners": "SSL://127.0.0.1:9193", "ssl.keystore.location": "/k.pem"}, "ssl.keystore.type"),
        ({"broker.security.protocol": "TLS"}, "broker.security.protocol: 'TLS' is not one of PLAINTEXT, SSL"),
        ({"broker.security.protocol": "SSL", "broker.ssl.truststore.location": "/ca.jks"},
         "broker.ssl.truststore.type: barnabas reads PEM stores only, not JKS"),
        ({"broker.ssl.client.auth": "required"}, "unknown setting 'broker.ssl.client.auth'"),
    ],
)  # fmt: skip
def test_what_the_proxy_cannot_honour_is_refused_in_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_proxy_config(None, {**BOOTSTRAP, **settings})
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value
