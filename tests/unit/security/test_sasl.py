"""A SASL listener's connection state: the tables walked exhaustively, then whole exchanges through it."""

from __future__ import annotations

import pytest

from barnabas.protocol import ErrorCode
from barnabas.security import KafkaPrincipal
from barnabas.security.plain import PlainClient
from barnabas.security.sasl import (
    ALLOWED,
    TRANSITIONS,
    Event,
    SaslAuthenticator,
    SaslListener,
    SaslState,
    sasl_client_factory,
)
from barnabas.security.scram import SCRAM_SHA_256, ScramClient, ScramCredential, ScramMechanism, make_credential

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE, METADATA = 18, 17, 36, 0, 3


class Credentials:
    def __init__(self, users: dict[str, ScramCredential]) -> None:
        self.users = users
        self.mock_secret = b"x" * 32

    def scram_credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential | None:
        return self.users.get(username) if mechanism is SCRAM_SHA_256 else None


LISTENER = SaslListener("SASL", ("PLAIN", "SCRAM-SHA-256"), {"alice": "alice-secret", "bob": "bob-secret"})
CREDENTIALS = Credentials({"carol": make_credential(SCRAM_SHA_256, "carol-secret")})


def authenticator(listener: SaslListener = LISTENER) -> SaslAuthenticator:
    return SaslAuthenticator(listener, CREDENTIALS)


def test_every_transition_leads_to_a_state_and_only_failure_reaches_failed() -> None:
    for (state, event), target in TRANSITIONS.items():
        assert state in ALLOWED and target in ALLOWED
        assert (target is SaslState.FAILED) == (event is Event.FAILURE)
    for state in SaslState:
        if state is not SaslState.FAILED:
            assert (state, Event.FAILURE) in TRANSITIONS, f"{state} cannot fail"
    assert not any(state is SaslState.FAILED for state, _ in TRANSITIONS), "failed is final"


@pytest.mark.parametrize("state", list(SaslState))
@pytest.mark.parametrize("api_key", [API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE, METADATA])
def test_what_each_state_lets_through(state: SaslState, api_key: int) -> None:
    sasl = authenticator()
    sasl.state = state
    allowed = {
        SaslState.HANDSHAKE: {API_VERSIONS, SASL_HANDSHAKE},
        SaslState.AUTHENTICATE: {SASL_AUTHENTICATE},
        SaslState.REAUTHENTICATE: {SASL_AUTHENTICATE},
        SaslState.AUTHENTICATED: {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE, METADATA},
        SaslState.FAILED: set(),
    }[state]
    assert (sasl.refusal(api_key, 0) is None) == (api_key in allowed)


def login(sasl: SaslAuthenticator, client: PlainClient | ScramClient, now_ms: int = 0) -> ErrorCode:
    outcome = sasl.handshake(client.mechanism)
    if outcome.error is not ErrorCode.none:
        return outcome.error
    token: bytes | None = client.initial_response()
    while token is not None:
        answer = sasl.authenticate(token, now_ms)
        if answer.error is not ErrorCode.none:
            return answer.error
        token = client.evaluate_challenge(answer.auth_bytes)
    return ErrorCode.none


@pytest.mark.parametrize(
    "client", [PlainClient("alice", "alice-secret"), ScramClient(SCRAM_SHA_256, "carol", "carol-secret")],
    ids=["PLAIN", "SCRAM"],
)  # fmt: skip
def test_a_right_login_sets_the_principal(client: PlainClient | ScramClient) -> None:
    sasl = authenticator()
    assert login(sasl, client) is ErrorCode.none
    assert sasl.state is SaslState.AUTHENTICATED and sasl.authenticated
    assert sasl.principal in (KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "carol"))
    assert sasl.refusal(PRODUCE, 10**12) is None, "without connections.max.reauth.ms the session never ends"


@pytest.mark.parametrize(
    "client",
    [PlainClient("alice", "wrong"), PlainClient("nobody", "x"), ScramClient(SCRAM_SHA_256, "carol", "wrong"),
     ScramClient(SCRAM_SHA_256, "nobody", "x")],
    ids=["PLAIN wrong password", "PLAIN unknown user", "SCRAM wrong password", "SCRAM unknown user"],
)  # fmt: skip
def test_a_wrong_login_fails_the_connection_with_a_generic_message(client: PlainClient | ScramClient) -> None:
    sasl = authenticator()
    sasl.handshake(client.mechanism)
    token = client.initial_response()
    outcome = sasl.authenticate(token, 0)
    if outcome.error is ErrorCode.none:  # SCRAM: the failure comes at the proof
        outcome = sasl.authenticate(client.evaluate_challenge(outcome.auth_bytes) or b"", 0)
    assert outcome.error is ErrorCode.sasl_authentication_failed and outcome.finished
    assert outcome.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism " + client.mechanism
    )
    assert outcome.reason is not None
    assert sasl.state is SaslState.FAILED and not sasl.authenticated and sasl.principal is None
    assert sasl.refusal(SASL_AUTHENTICATE, 0) is not None and sasl.refusal(PRODUCE, 0) is not None


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_and_fails() -> None:
    sasl = authenticator()
    outcome = sasl.handshake("SCRAM-SHA-512")
    assert outcome.error is ErrorCode.unsupported_sasl_mechanism
    assert outcome.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert sasl.state is SaslState.FAILED


def test_authenticate_before_the_handshake_is_an_illegal_state() -> None:
    sasl = authenticator()
    assert sasl.refusal(SASL_AUTHENTICATE, 0) is not None
    assert sasl.authenticate(b"\0alice\0alice-secret", 0).error is ErrorCode.illegal_sasl_state
    assert sasl.state is SaslState.FAILED


def test_the_session_expires_and_re_authentication_keeps_the_principal_and_mechanism() -> None:
    listener = SaslListener("SASL", ("PLAIN", "SCRAM-SHA-256"), LISTENER.plain_users, reauth_ms=1000)
    sasl = authenticator(listener)
    assert login(sasl, PlainClient("alice", "alice-secret"), now_ms=5000) is ErrorCode.none
    assert sasl.refusal(PRODUCE, 5999) is None
    assert sasl.refusal(PRODUCE, 6000) is not None, "expired: only a re-authentication is served"
    assert sasl.refusal(SASL_HANDSHAKE, 6000) is None
    assert login(sasl, PlainClient("alice", "alice-secret"), now_ms=6000) is ErrorCode.none
    assert sasl.refusal(PRODUCE, 6999) is None and sasl.refusal(PRODUCE, 7000) is not None

    other_principal = authenticator(listener)
    login(other_principal, PlainClient("alice", "alice-secret"))
    assert login(other_principal, PlainClient("bob", "bob-secret")) is ErrorCode.sasl_authentication_failed
    assert other_principal.state is SaslState.FAILED

    other_mechanism = authenticator(listener)
    login(other_mechanism, PlainClient("alice", "alice-secret"))
    assert other_mechanism.handshake("SCRAM-SHA-256").error is ErrorCode.unsupported_sasl_mechanism
    assert other_mechanism.state is SaslState.FAILED


def test_a_failed_re_authentication_fails_the_connection() -> None:
    sasl = authenticator()
    login(sasl, PlainClient("alice", "alice-secret"))
    outcome_error = login(sasl, PlainClient("alice", "wrong"))
    assert outcome_error is ErrorCode.sasl_authentication_failed and sasl.state is SaslState.FAILED


def test_the_client_factory_makes_a_fresh_client_each_time() -> None:
    make = sasl_client_factory("SCRAM-SHA-256", "carol", "carol-secret")
    assert make() is not make() and make().mechanism == "SCRAM-SHA-256"
    assert sasl_client_factory("PLAIN", "a", "b")().mechanism == "PLAIN"
    with pytest.raises(ValueError, match="GSSAPI is not supported"):
        sasl_client_factory("GSSAPI", "a", "b")
