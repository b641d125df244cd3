"""OAUTHBEARER's exchange (RFC 7628 as Kafka reads it) and the session a token bounds, through SaslAuthenticator."""

from __future__ import annotations

import time

import pytest

from barnabas.protocol import ErrorCode
from barnabas.security import KafkaPrincipal, SaslAuthenticationError
from barnabas.security.oauthbearer import (
    OAuthBearerClient,
    OAuthBearerServer,
    OAuthBearerToken,
    TokenValidationError,
    error_challenge,
)
from barnabas.security.sasl import SaslAuthenticator, SaslListener, SaslState, session_lifetime_ms

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"


class Validator:
    """Accepts the one token it knows, for ``alice``, expiring at ``expires_ms``."""

    def __init__(self, expires_ms: int = 2**42) -> None:
        self.expires_ms = expires_ms
        self.seen: list[str] = []

    def validate(self, token: str) -> OAuthBearerToken:
        self.seen.append(token)
        if token != TOKEN:
            raise TokenValidationError("signature does not verify")
        return OAuthBearerToken("alice", frozenset({"read"}), self.expires_ms)


def first_message(token: str = TOKEN, authzid: str = "", extensions: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


@pytest.mark.parametrize(
    "message",
    [first_message(), first_message(authzid="alice"), first_message(extensions="traceId=abc 123\x01"),
     b"n,,\x01auth=bearer " + TOKEN.encode() + b"\x01\x01", OAuthBearerClient(TOKEN).initial_response()],
    ids=["plain", "authzid", "extension", "lower-case scheme", "our client"],
)  # fmt: skip
def test_a_well_formed_first_message_is_accepted(message: bytes) -> None:
    server = OAuthBearerServer(Validator())
    assert server.evaluate(message) == b""
    assert server.complete and server.username == "alice" and server.expires_ms == 2**42


@pytest.mark.parametrize(
    "message",
    [b"", b"n,,\x01\x01", b"y,,\x01auth=Bearer x\x01\x01", f"n,,\x01auth=Basic {TOKEN}\x01\x01".encode(),
     f"n,,\x01auth=Bearer{TOKEN}\x01\x01".encode(), f"n,,\x01auth=Bearer {TOKEN}\x01".encode(),
     f"n,,\x01auth=Bearer {TOKEN}!\x01\x01".encode(), b"n,,\x01auth=Bearer \xff\x01\x01",
     f"n,a=x,y,\x01auth=Bearer {TOKEN}\x01\x01".encode()],
    ids=["empty", "no auth", "gs2 flag", "Basic", "no space", "one terminator", "bad token character", "not UTF-8",
         "comma in authzid"],
)  # fmt: skip
def test_a_malformed_first_message_fails_with_the_generic_message(message: bytes) -> None:
    validator = Validator()
    with pytest.raises(SaslAuthenticationError) as caught:
        OAuthBearerServer(validator).evaluate(message)
    assert caught.value.client_message is None, "the generic message (Kafka's SaslException)"
    assert not validator.seen


def test_a_refused_token_is_answered_with_the_json_challenge_and_fails_on_the_clients_x01() -> None:
    server = OAuthBearerServer(Validator())
    assert server.evaluate(first_message("a.b.c")) == b'{"status":"invalid_token"}'
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as caught:
        server.evaluate(b"\x01")
    assert caught.value.client_message == '{"status":"invalid_token"}'
    assert "signature does not verify" in str(caught.value) and "a.b.c" not in str(caught.value)


def test_anything_but_x01_after_the_challenge_fails_too_and_is_no_second_try() -> None:
    validator = Validator()
    server = OAuthBearerServer(validator)
    server.evaluate(first_message("a.b.c"))
    with pytest.raises(SaslAuthenticationError, match="did not acknowledge"):
        server.evaluate(first_message())
    assert validator.seen == ["a.b.c"]


def test_an_authzid_other_than_the_principal_is_refused_with_kafkas_message() -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        OAuthBearerServer(Validator()).evaluate(first_message(authzid="bob"))
    assert caught.value.client_message == (
        "Authentication failed: Client requested an authorization id (bob) that is different from the token's "
        "principal name (alice)"
    )


def test_the_error_json_carries_the_scope_as_kafka_writes_it() -> None:
    error = TokenValidationError("why", "insufficient_scope", "[a, b]")
    assert error_challenge(error) == '{"status":"insufficient_scope", "scope":"[a, b]"}'


def test_the_client_acknowledges_an_error_and_ends_on_an_empty_answer() -> None:
    client = OAuthBearerClient(TOKEN, authzid="alice")
    assert client.initial_response() == first_message(authzid="alice")
    assert client.evaluate_challenge(b'{"status":"invalid_token"}') == b"\x01"
    assert client.evaluate_challenge(b"") is None


@pytest.mark.parametrize(
    ("reauth_ms", "expires_ms", "expected"),
    [(0, None, None), (60_000, None, 60_000), (0, 1_000 + 5_000, 5_000), (60_000, 1_000 + 5_000, 5_000),
     (3_000, 1_000 + 5_000, 3_000), (0, 500, 0)],
    ids=["forever", "reauth only", "token only", "token first", "reauth first", "already expired"],
)  # fmt: skip
def test_the_session_is_the_shorter_of_reauth_ms_and_the_token(
    reauth_ms: int, expires_ms: int | None, expected: int | None
) -> None:
    assert session_lifetime_ms(reauth_ms, expires_ms, 1_000) == expected


def listener(validator: Validator, reauth_ms: int = 0) -> SaslListener:
    return SaslListener("OAUTH", ("OAUTHBEARER",), {}, reauth_ms=reauth_ms, oauthbearer=validator)


class NoCredentials:
    mock_secret = b"x" * 32

    def scram_credential(self, mechanism: object, username: str) -> None:
        return None


def test_the_tokens_exp_bounds_the_session_and_expiry_closes_it_until_reauthentication() -> None:
    now = int(time.time() * 1000)
    validator = Validator(expires_ms=now + 2_000)
    sasl = SaslAuthenticator(listener(validator, reauth_ms=60_000), NoCredentials())
    assert sasl.handshake("OAUTHBEARER").error == ErrorCode.none
    outcome = sasl.authenticate(first_message(), now)
    assert (outcome.error, outcome.session_lifetime_ms) == (ErrorCode.none, 2_000)
    assert sasl.principal == KafkaPrincipal("User", "alice")
    assert sasl.refusal(3, now + 1_999) is None
    assert "expired" in (sasl.refusal(3, now + 2_000) or "")
    assert sasl.refusal(17, now + 2_000) is None, "SaslHandshake starts re-authentication"
    validator.expires_ms = now + 10_000
    sasl.handshake("OAUTHBEARER")
    assert sasl.authenticate(first_message(), now + 2_000).session_lifetime_ms == 8_000
    assert sasl.state is SaslState.AUTHENTICATED and sasl.refusal(3, now + 5_000) is None


def test_a_refused_token_fails_the_connection_through_the_authenticator() -> None:
    sasl = SaslAuthenticator(listener(Validator()), NoCredentials())
    sasl.handshake("OAUTHBEARER")
    challenge = sasl.authenticate(first_message("x.y.z"), 0)
    assert (challenge.error, challenge.auth_bytes, challenge.finished) == (
        ErrorCode.none, b'{"status":"invalid_token"}', False,
    )  # fmt: skip
    failed = sasl.authenticate(b"\x01", 0)
    assert failed.error == ErrorCode.sasl_authentication_failed
    assert failed.error_message == '{"status":"invalid_token"}'
    assert failed.reason is not None and "OAUTHBEARER: invalid token: signature does not verify" in failed.reason
    assert sasl.state is SaslState.FAILED and not sasl.authenticated
