"""A SASL client listener's gate on one proxy connection: the broker's own authenticator, answered by the proxy.

Rules this module keeps (those of a broker's SASL listener: ``barnabas.security.sasl`` and the
broker's SaslHandshake and SaslAuthenticate handlers):

- The state is the broker's ``SaslAuthenticator``: before authentication only ApiVersions and
  SaslHandshake pass, after a handshake only SaslAuthenticate; anything else closes the connection,
  as does a request after the session ended (``connections.max.reauth.ms``) that is not a
  re-authentication (KIP-368), which must keep the mechanism and the principal.
- SaslHandshake (v1 only, as on a broker) and SaslAuthenticate (v0-v2) are answered by the proxy,
  never relayed. Each moves the state when it is read, so a request pipelined behind a login is
  judged by that login's outcome.
- A failure is logged with its reason as a broker logs it (the client is told only Kafka's
  generic message), answered after ``connection.failed.authentication.delay.ms`` (KIP-306), and
  the connection closes after the answer.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass
from typing import Any

from barnabas.protocol import decode_request, encode_response, make, response_class
from barnabas.security import KafkaPrincipal, SaslAuthenticator, SaslListener, SaslState
from barnabas.security.sasl import CredentialSource
from barnabas.security.scram import ScramCredential, ScramMechanism

from .router import CloseConnectionError

__all__ = ["AUTHENTICATE", "HANDSHAKE", "SASL_VERSIONS", "GateAnswer", "NoScramUsers", "SaslGate"]

log = logging.getLogger(__name__)

HANDSHAKE, AUTHENTICATE = 17, 36
#: What a SASL listener advertises in ApiVersions for its own two APIs (a broker's versions).
SASL_VERSIONS = {HANDSHAKE: (1, 1), AUTHENTICATE: (0, 2)}


@dataclass(frozen=True, slots=True)
class GateAnswer:
    frame: bytes
    #: How long to wait before answering (a failed login's delay).
    delay_s: float = 0.0
    #: The connection closes once this answer is written (the login failed).
    closes: bool = False


class NoScramUsers:
    """The credential source of a listener that offers no SCRAM mechanism: never asked."""

    mock_secret = b""

    def scram_credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential | None:
        return None


class SaslGate:
    def __init__(self, listener: SaslListener, credentials: CredentialSource, client_host: str) -> None:
        self._auth = SaslAuthenticator(listener, credentials)
        #: The client's address as a broker logs it (``/127.0.0.1``).
        self._client_host = client_host

    @property
    def listener(self) -> SaslListener:
        return self._auth.listener

    @property
    def principal(self) -> KafkaPrincipal | None:
        """The client's principal once it has authenticated; None before (or after a failure)."""
        return self._auth.principal if self._auth.authenticated else None

    def refusal(self, api_key: int) -> str | None:
        """Why the request ``api_key`` closes the connection now, or None when it may be served."""
        return self._auth.refusal(api_key, _now_ms())

    def answer(self, frame: bytes | memoryview) -> GateAnswer:
        """The answer to a SaslHandshake or SaslAuthenticate frame, the state moved.

        Raises:
            CloseConnectionError: a version not served, or bytes that do not decode.
        """
        try:
            request = decode_request(frame)
        except Exception as exc:
            raise CloseConnectionError(f"SASL request does not decode: {exc}") from None
        api_key, version = request.header.api_key, request.header.api_version
        low, high = SASL_VERSIONS[api_key]
        if not low <= version <= high:
            name = "SaslHandshake" if api_key == HANDSHAKE else "SaslAuthenticate"
            raise CloseConnectionError(f"{name} v{version} is not served")
        correlation_id = request.header.correlation_id
        if api_key == HANDSHAKE:
            return self._handshake(request.body, version, correlation_id)
        return self._authenticate(request.body, version, correlation_id)

    def _handshake(self, body: Any, version: int, correlation_id: int) -> GateAnswer:
        reauth = self._auth.authenticated
        outcome = self._auth.handshake(str(body.mechanism))
        response = make(response_class(HANDSHAKE, version), error_code=outcome.error, mechanisms=outcome.mechanisms)
        frame = encode_response(correlation_id, response)
        if outcome.reason is None:
            return GateAnswer(frame)
        return self._failed(frame, outcome.reason, str(body.mechanism), reauth)

    def _authenticate(self, body: Any, version: int, correlation_id: int) -> GateAnswer:
        outcome = self._auth.authenticate(bytes(body.auth_bytes), _now_ms())
        response = make(
            response_class(AUTHENTICATE, version),
            error_code=outcome.error,
            error_message=outcome.error_message,
            auth_bytes=outcome.auth_bytes,
            session_lifetime=datetime.timedelta(milliseconds=outcome.session_lifetime_ms),
        )
        frame = encode_response(correlation_id, response)
        mechanism = self._auth.mechanism or "?"
        if outcome.reason is not None:
            return self._failed(frame, outcome.reason, mechanism, outcome.reauthentication)
        if outcome.finished:
            log.debug("%s authenticated as %s on listener %s (%s)", self._client_host, self._auth.principal,
                      self.listener.name, mechanism)  # fmt: skip
        return GateAnswer(frame)

    def _failed(self, frame: bytes, reason: str, mechanism: str, reauth: bool) -> GateAnswer:
        what = "re-authentication" if reauth else "authentication"
        log.info("failed %s from %s on listener %s (%s): %s", what, self._client_host, self.listener.name, mechanism,
                 reason)  # fmt: skip
        closes = self._auth.state is SaslState.FAILED
        return GateAnswer(frame, self.listener.failure_delay_ms / 1000, closes)


def _now_ms() -> int:
    return int(time.time() * 1000)
