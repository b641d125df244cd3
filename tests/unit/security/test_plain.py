"""SASL/PLAIN's server against JAAS users (Kafka's PlainSaslServer rules) and its client."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError
from barnabas.security import SaslAuthenticationError
from barnabas.security.jaas import parse_jaas_config
from barnabas.security.plain import PlainClient, PlainServer, plain_users

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
USERS = plain_users(parse_jaas_config(JAAS)[0])


def test_the_users_are_the_user_options() -> None:
    assert USERS == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(ConfigError, match="PlainLoginModule"):
        plain_users(parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required;")[0])


@pytest.mark.parametrize("message", [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret"], ids=["", "authzid"])
def test_a_right_password_authenticates(message: bytes) -> None:
    server = PlainServer(USERS)
    assert server.evaluate(message) == b""
    assert server.complete and server.username == "alice"


def test_client_and_server_agree() -> None:
    server, client = PlainServer(USERS), PlainClient("admin", "admin-secret")
    assert client.evaluate_challenge(server.evaluate(client.initial_response())) is None
    assert server.username == "admin"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        pytest.param(b"\0alice\0wrong", "invalid password", id="wrong password"),
        pytest.param(b"\0alice\0alice-secretX", "invalid password", id="longer password"),
        pytest.param(b"\0alice\0alice-secre", "invalid password", id="prefix of the password"),
        pytest.param(b"\0mallory\0alice-secret", "unknown user", id="unknown user"),
        pytest.param(b"\0\0alice-secret", "empty user name or password", id="empty user"),
        pytest.param(b"\0alice\0", "empty user name or password", id="empty password"),
        pytest.param(b"alice\0alice-secret", "malformed", id="two fields"),
        pytest.param(b"\0alice\0alice-secret\0x", "malformed", id="four fields"),
        pytest.param(b"", "malformed", id="empty"),
        pytest.param(b"\0alice\0\xff", "not UTF-8", id="not utf-8"),
        pytest.param(b"admin\0alice\0alice-secret", "authorization id differs", id="other authzid"),
    ],
)
def test_refusals(message: bytes, reason: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError, match=reason):
        server.evaluate(message)
    assert not server.complete


def test_one_message_only() -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\0alice\0wrong")
    with pytest.raises(SaslAuthenticationError, match="one message"):
        server.evaluate(b"\0alice\0alice-secret")
    assert not server.complete


def test_the_client_refuses_data_from_the_server() -> None:
    with pytest.raises(SaslAuthenticationError):
        PlainClient("a", "b").evaluate_challenge(b"unexpected")
