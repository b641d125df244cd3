"""SaslHandshake (17) and SaslAuthenticate (36): a SASL listener's exchange (KIP-43, KIP-152, KIP-368).

The connection's ``SaslAuthenticator`` (request_context.SASL) holds the state; these handlers
move it and answer. On a listener without SASL both are ILLEGAL_SASL_STATE, as in Kafka's KafkaApis.
SaslHandshake is served in v1 only: v0 meant raw SASL tokens after it, which Kafka 4 dropped
(KIP-896) and no client barnabas is tested with sends. A failure (an unsupported mechanism, bad
credentials, a malformed message) is logged with its reason, counted, and answered after
``connection.failed.authentication.delay.ms`` (KIP-306); the connection closes after the answer.
A proxy user's login for another principal (``sasl.proxy.principals``) is logged with both names.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass

from barnabas.protocol import ErrorCode, Request, encode_response

from ..registry import ApiSpec
from ..request_context import CLIENT_HOST, SASL
from ._build import make, response_types
from ._needs import NodeNeeds
from ._view import view_of

__all__ = ["SPECS"]

log = logging.getLogger(__name__)

HANDSHAKE_KEY, AUTHENTICATE_KEY = 17, 36


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslHandshakeRequest:
    mechanism: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslAuthenticateRequest:
    auth_bytes: bytes


async def _failure_delay(state: NodeNeeds, listener: str, reason: str, mechanism: str, reauth: bool) -> None:
    """Log and count a failed authentication, then wait the failure delay before it is answered."""
    sasl = SASL.get()
    assert sasl is not None
    what = "re-authentication" if reauth else "authentication"
    log.info("failed %s from %s on listener %s (%s): %s", what, CLIENT_HOST.get() or "?", listener, mechanism, reason)
    state.node.metrics.authenticated(listener, success=False, reauthentication=reauth)
    await asyncio.sleep(sasl.listener.failure_delay_ms / 1000)


async def handshake(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(HANDSHAKE_KEY, request.header.api_version)
    body = view_of(SaslHandshakeRequest, request.body)
    sasl = SASL.get()
    if sasl is None:
        response = make(types.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
        return encode_response(request.header.correlation_id, response)
    reauth = sasl.authenticated
    outcome = sasl.handshake(body.mechanism)
    if outcome.reason is not None:
        await _failure_delay(state, sasl.listener.name, outcome.reason, body.mechanism, reauth)
    response = make(types.SaslHandshakeResponse, error_code=outcome.error, mechanisms=outcome.mechanisms)
    return encode_response(request.header.correlation_id, response)


async def authenticate(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(AUTHENTICATE_KEY, request.header.api_version)
    body = view_of(SaslAuthenticateRequest, request.body)
    sasl = SASL.get()
    if sasl is None:
        response = make(
            types.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate on a listener without SASL", auth_bytes=b"",
        )  # fmt: skip
        return encode_response(request.header.correlation_id, response)
    outcome = sasl.authenticate(body.auth_bytes, state.node.now_ms())
    mechanism = sasl.mechanism or "?"
    if outcome.reason is not None:
        await _failure_delay(state, sasl.listener.name, outcome.reason, mechanism, outcome.reauthentication)
    elif outcome.finished:
        state.node.metrics.authenticated(sasl.listener.name, success=True, reauthentication=outcome.reauthentication)
        log.debug("%s authenticated as %s on listener %s (%s)", CLIENT_HOST.get(), sasl.principal, sasl.listener.name,
                  mechanism)  # fmt: skip
        if sasl.proxy is not None and not outcome.reauthentication:  # sasl.proxy.principals: who speaks for whom
            log.info("%s: proxy principal %s acts for %s on listener %s (%s)", CLIENT_HOST.get(), sasl.proxy,
                     sasl.principal, sasl.listener.name, mechanism)  # fmt: skip
    response = make(
        types.SaslAuthenticateResponse,
        error_code=outcome.error,
        error_message=outcome.error_message,
        auth_bytes=outcome.auth_bytes,
        session_lifetime=datetime.timedelta(milliseconds=outcome.session_lifetime_ms),
    )
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(HANDSHAKE_KEY, "SaslHandshake", 1, 1, handshake),
    ApiSpec(AUTHENTICATE_KEY, "SaslAuthenticate", 0, 2, authenticate),
]
