"""Acting for another principal (``sasl.proxy.principals``): the authzid of PLAIN (RFC 4616) and SCRAM (RFC 5802).

Each scenario runs on both mechanisms: only a listed proxy user may name another, the connection's
principal is then the one named, a wrong password gets no further than without an authzid, and a
re-authentication may not change whom it acts for (KIP-368).
"""

from __future__ import annotations

import base64

import pytest

from barnabas.config import ConfigError, load_broker_config
from barnabas.protocol import ErrorCode
from barnabas.security import KafkaPrincipal, SaslAuthenticationError, listener_security
from barnabas.security.plain import PlainClient
from barnabas.security.sasl import SaslAuthenticator, SaslListener, sasl_client_factory
from barnabas.security.scram import SCRAM_SHA_256, ScramClient, ScramCredential, ScramMechanism, make_credential

REFUSED = "Authentication failed: Client requested an authorization id that is different from username"
PROXIES = frozenset({"proxy"})


class Credentials:
    mock_secret = b"x" * 32

    def scram_credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential | None:
        password = {"proxy": "proxy-secret", "alice": "alice-secret"}.get(username)
        return make_credential(SCRAM_SHA_256, password, salt=b"s" * 32) if password else None


def listener(proxies: frozenset[str] = PROXIES) -> SaslListener:
    users = {"proxy": "proxy-secret", "alice": "alice-secret"}
    return SaslListener("SASL", ("PLAIN", "SCRAM-SHA-256"), users, proxy_users=proxies)


def client(mechanism: str, user: str, password: str, authzid: str) -> PlainClient | ScramClient:
    if mechanism == "PLAIN":
        return PlainClient(user, password, authzid)
    return ScramClient(SCRAM_SHA_256, user, password, authzid=authzid)


def login(sasl: SaslAuthenticator, sasl_client: PlainClient | ScramClient) -> tuple[ErrorCode, str | None]:
    """The login's error and the message the client is told."""
    assert sasl.handshake(sasl_client.mechanism).error is ErrorCode.none
    token: bytes | None = sasl_client.initial_response()
    while token is not None:
        answer = sasl.authenticate(token, 0)
        if answer.error is not ErrorCode.none:
            return answer.error, answer.error_message
        token = sasl_client.evaluate_challenge(answer.auth_bytes)
    return ErrorCode.none, None


MECHANISMS = pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])


@MECHANISMS
def test_a_proxy_user_acts_for_the_principal_it_names(mechanism: str) -> None:
    sasl = SaslAuthenticator(listener(), Credentials())
    assert login(sasl, client(mechanism, "proxy", "proxy-secret", "alice,=bob")) == (ErrorCode.none, None)
    assert sasl.principal == KafkaPrincipal("User", "alice,=bob"), "SCRAM's =2C and =3D escapes decoded"
    assert sasl.proxy == KafkaPrincipal("User", "proxy")


@MECHANISMS
def test_naming_oneself_or_no_one_is_a_plain_login(mechanism: str) -> None:
    for authzid in ("", "alice"):
        sasl = SaslAuthenticator(listener(frozenset()), Credentials())
        assert login(sasl, client(mechanism, "alice", "alice-secret", authzid))[0] is ErrorCode.none
        assert (sasl.principal, sasl.proxy) == (KafkaPrincipal("User", "alice"), None)


@MECHANISMS
@pytest.mark.parametrize("user", ["alice", "proxy"], ids=["a client", "a proxy not listed"])
def test_anyone_not_listed_is_refused_with_kafkas_message(mechanism: str, user: str) -> None:
    sasl = SaslAuthenticator(listener(frozenset({"someone-else"})), Credentials())
    assert login(sasl, client(mechanism, user, f"{user}-secret", "bob")) == (
        ErrorCode.sasl_authentication_failed, REFUSED,
    )  # fmt: skip
    assert sasl.principal is None


@MECHANISMS
def test_a_proxy_with_a_wrong_password_acts_for_no_one(mechanism: str) -> None:
    sasl = SaslAuthenticator(listener(), Credentials())
    error, message = login(sasl, client(mechanism, "proxy", "wrong", "alice"))
    assert error is ErrorCode.sasl_authentication_failed and message is not None and "invalid credentials" in message
    assert sasl.principal is None


@MECHANISMS
def test_a_re_authentication_cannot_act_for_someone_else(mechanism: str) -> None:
    sasl = SaslAuthenticator(listener(), Credentials())
    login(sasl, client(mechanism, "proxy", "proxy-secret", "alice"))
    assert login(sasl, client(mechanism, "proxy", "proxy-secret", "alice"))[0] is ErrorCode.none, "same principal"
    error, message = login(sasl, client(mechanism, "proxy", "proxy-secret", "bob"))
    assert error is ErrorCode.sasl_authentication_failed and message is not None
    assert message.startswith("Cannot change principals during re-authentication")


def test_scram_repeats_the_authzid_in_its_channel_binding() -> None:
    """RFC 5802: c= is the base64 of the gs2 header, authzid included; a server that compares it accepts."""
    scram = ScramClient(SCRAM_SHA_256, "proxy", "proxy-secret", nonce="n0nce", authzid="alice")
    assert scram.initial_response() == b"n,a=alice,n=proxy,r=n0nce"
    final = scram.evaluate_challenge(b"r=n0nceSERVER,s=" + base64.b64encode(b"s" * 32) + b",i=4096")
    assert final is not None and final.startswith(b"c=" + base64.b64encode(b"n,a=alice,") + b",r=n0nceSERVER,p=")


def test_the_client_factory_passes_the_authzid() -> None:
    assert sasl_client_factory("PLAIN", "proxy", "pw", "alice")().initial_response() == b"alice\0proxy\0pw"
    assert sasl_client_factory("SCRAM-SHA-256", "proxy", "pw", "alice")().initial_response().startswith(b"n,a=alice,")


def test_a_plain_server_refuses_a_message_whose_authzid_breaks_the_format() -> None:
    sasl = SaslAuthenticator(listener(), Credentials())
    assert login(sasl, PlainClient("proxy", "proxy-secret", "al\0ice"))[0] is ErrorCode.sasl_authentication_failed


def test_the_broker_setting_lists_user_principals() -> None:
    config = load_broker_config(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.proxy.principals": "User:proxy-a, User:proxy-b",
    }, environ={})  # fmt: skip
    _, security = listener_security(config)
    assert security.sasl is not None and security.sasl.proxy_users == frozenset({"proxy-a", "proxy-b"})
    for bad in ("proxy", "Group:proxy", "User:"):
        with pytest.raises(ConfigError, match=f"sasl.proxy.principals: '{bad}' is not User:<name>"):
            load_broker_config(overrides={"sasl.proxy.principals": bad}, environ={})


def test_a_server_alone_refuses_a_second_authzid_message() -> None:
    from barnabas.security.plain import PlainServer

    server = PlainServer({"proxy": "proxy-secret"}, PROXIES)
    server.evaluate(b"alice\0proxy\0proxy-secret")
    assert server.acting_for == "alice"
    with pytest.raises(SaslAuthenticationError, match="PLAIN takes one message"):
        server.evaluate(b"bob\0proxy\0proxy-secret")
