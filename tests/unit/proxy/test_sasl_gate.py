"""A proxy connection's SASL gate over real frames: the broker's states, answers and failures, without sockets."""

from __future__ import annotations

from typing import Any

import pytest

from barnabas.protocol import ErrorCode, decode_response, encode_request, request_class
from barnabas.proxy.router import CloseConnectionError
from barnabas.proxy.sasl_gate import AUTHENTICATE, HANDSHAKE, GateAnswer, NoScramUsers, SaslGate
from barnabas.security import KafkaPrincipal, SaslListener

from .wire import payload

PRODUCE, API_VERSIONS = 0, 18
LISTENER = SaslListener("SASL_PLAINTEXT", ("PLAIN",), {"alice": "alice-secret"}, failure_delay_ms=250)


def gate() -> SaslGate:
    return SaslGate(LISTENER, NoScramUsers(), "/127.0.0.1")


def frame(api_key: int, version: int, **body: Any) -> bytes:
    return payload(encode_request(api_key, version, 9, "client", request_class(api_key, version)(**body)))


def answered(answer: GateAnswer, api_key: int, version: int) -> Any:
    correlation_id, response = decode_response(api_key, version, payload(answer.frame))
    assert correlation_id == 9
    return response


def test_nothing_but_api_versions_and_the_login_passes_before_it() -> None:
    sasl = gate()
    assert sasl.refusal(API_VERSIONS) is None and sasl.refusal(HANDSHAKE) is None
    assert "not allowed in SASL state handshake" in (sasl.refusal(PRODUCE) or "")
    handshake = sasl.answer(frame(HANDSHAKE, 1, mechanism="PLAIN"))
    assert answered(handshake, HANDSHAKE, 1).error_code == ErrorCode.none and not handshake.closes
    assert "not allowed in SASL state authenticate" in (sasl.refusal(PRODUCE) or "")
    login = sasl.answer(frame(AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"))
    assert answered(login, AUTHENTICATE, 2).error_code == ErrorCode.none and login.delay_s == 0
    assert sasl.principal == KafkaPrincipal("User", "alice")
    assert sasl.refusal(PRODUCE) is None


def test_a_failed_login_is_answered_late_with_kafkas_error_and_closes(caplog: pytest.LogCaptureFixture) -> None:
    sasl = gate()
    sasl.answer(frame(HANDSHAKE, 1, mechanism="PLAIN"))
    with caplog.at_level("INFO", "barnabas.proxy.sasl_gate"):
        failed = sasl.answer(frame(AUTHENTICATE, 1, auth_bytes=b"\0alice\0wrong"))
    response = answered(failed, AUTHENTICATE, 1)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
    )
    assert (failed.delay_s, failed.closes, sasl.principal) == (0.25, True, None)
    assert caplog.messages == [
        "failed authentication from /127.0.0.1 on listener SASL_PLAINTEXT (PLAIN): PLAIN (user 'alice'): "
        "invalid password"
    ]


def test_an_unknown_mechanism_gets_the_enabled_ones_and_closes() -> None:
    answer = gate().answer(frame(HANDSHAKE, 1, mechanism="SCRAM-SHA-512"))
    response = answered(answer, HANDSHAKE, 1)
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism and list(response.mechanisms) == ["PLAIN"]
    assert answer.closes


def test_a_handshake_v0_or_bytes_that_do_not_decode_close_the_connection() -> None:
    with pytest.raises(CloseConnectionError, match="SaslHandshake v0 is not served"):
        gate().answer(frame(HANDSHAKE, 0, mechanism="PLAIN"))
    with pytest.raises(CloseConnectionError, match="does not decode"):
        gate().answer(frame(HANDSHAKE, 1, mechanism="PLAIN")[:-3])
