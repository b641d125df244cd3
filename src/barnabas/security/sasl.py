"""A SASL listener's side of a connection: which requests it takes when, and the exchange itself (sans-IO).

Rules this module keeps (Kafka's SaslServerAuthenticator, KIP-43, KIP-152 and KIP-368):

- The states and what each lets through are tables (``ALLOWED``, ``TRANSITIONS``); a test walks
  them. Before authentication only ApiVersions and SaslHandshake are taken; after a handshake
  only SaslAuthenticate; anything else closes the connection (Kafka's IllegalSaslStateException).
  SaslHandshake v0's raw tokens are not served: the registry advertises v1 only, as Kafka 4 does
  (KIP-896), and both librdkafka and kafka-python use v1 with SaslAuthenticate.
- A handshake for a mechanism the listener has not enabled is answered UNSUPPORTED_SASL_MECHANISM
  with the enabled ones, and the connection fails.
- A failed exchange fails the connection: it is answered SASL_AUTHENTICATION_FAILED with a
  message that never says whether the user exists, after ``connection.failed.authentication.delay.ms``
  (KIP-306; the caller waits), and closed.
- Once authenticated the principal is ``User:<name>``, or ``User:<authzid>`` when a proxy user
  (``sasl.proxy.principals``) names whom it acts for; anyone else naming another is refused. With
  ``connections.max.reauth.ms`` above 0 the session lasts that long (told to the client in
  SaslAuthenticate v1+), and never longer than the credential (an OAUTHBEARER token's exp, as
  Kafka's SaslServerAuthenticator bounds it); after it any request but SaslHandshake closes the
  connection, and a SaslHandshake starts re-authentication (KIP-368), which must use the same
  mechanism and end with the same principal. Until the session ends the connection serves as before.
- Before authentication a frame may be at most ``sasl.server.max.receive.size`` bytes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from barnabas.client import SaslClientMechanism
from barnabas.protocol import ErrorCode

from .oauthbearer import OAUTHBEARER, OAuthBearerServer, TokenValidator
from .plain import PLAIN, PlainClient, PlainServer
from .principal import KafkaPrincipal
from .sasl_errors import SaslAuthenticationError
from .scram import MECHANISMS, ScramClient, ScramCredential, ScramMechanism, ScramServer

__all__ = [
    "ALLOWED",
    "SUPPORTED_MECHANISMS",
    "TRANSITIONS",
    "AuthenticateOutcome",
    "CredentialSource",
    "Event",
    "HandshakeOutcome",
    "SaslAuthenticator",
    "SaslListener",
    "SaslState",
    "sasl_client_factory",
    "session_lifetime_ms",
]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS, OAUTHBEARER)


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "reauthenticate"
    FAILED = "failed"


class Event(enum.Enum):
    HANDSHAKE = "handshake"
    CHALLENGE = "challenge"
    SUCCESS = "success"
    FAILURE = "failure"


#: The API keys each state takes; None means every one.
ALLOWED: dict[SaslState, frozenset[int] | None] = {
    SaslState.HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    SaslState.AUTHENTICATED: None,
    SaslState.REAUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    SaslState.FAILED: frozenset(),
}

TRANSITIONS: dict[tuple[SaslState, Event], SaslState] = {
    (SaslState.HANDSHAKE, Event.HANDSHAKE): SaslState.AUTHENTICATE,
    (SaslState.HANDSHAKE, Event.FAILURE): SaslState.FAILED,
    (SaslState.AUTHENTICATE, Event.CHALLENGE): SaslState.AUTHENTICATE,
    (SaslState.AUTHENTICATE, Event.SUCCESS): SaslState.AUTHENTICATED,
    (SaslState.AUTHENTICATE, Event.FAILURE): SaslState.FAILED,
    (SaslState.AUTHENTICATED, Event.HANDSHAKE): SaslState.REAUTHENTICATE,
    (SaslState.AUTHENTICATED, Event.FAILURE): SaslState.FAILED,
    (SaslState.REAUTHENTICATE, Event.CHALLENGE): SaslState.REAUTHENTICATE,
    (SaslState.REAUTHENTICATE, Event.SUCCESS): SaslState.AUTHENTICATED,
    (SaslState.REAUTHENTICATE, Event.FAILURE): SaslState.FAILED,
}


@dataclass(frozen=True, slots=True)
class SaslListener:
    """How one SASL listener authenticates: its mechanisms, PLAIN's users, the session and failure settings."""

    name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    reauth_ms: int = 0
    failure_delay_ms: int = 100
    max_receive_size: int = 524288
    #: How OAUTHBEARER tokens are checked (None unless the listener offers OAUTHBEARER).
    oauthbearer: TokenValidator | None = None
    #: Users who may act for another by naming it in the authzid (``sasl.proxy.principals``): proxies.
    proxy_users: frozenset[str] = frozenset()


class CredentialSource(Protocol):
    """Where SCRAM credentials come from (the broker's credential cache, kept current by a watch)."""

    def scram_credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential | None: ...

    @property
    def mock_secret(self) -> bytes:
        """The cluster's secret that unknown users' made-up credentials derive from."""
        ...


class _Server(Protocol):
    mechanism: str
    username: str
    #: Whom a proxy user acts for (its authzid); empty when the user acts for itself.
    acting_for: str
    #: When the credential expires (ms since the epoch); None when it does not.
    expires_ms: int | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, response: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class HandshakeOutcome:
    error: ErrorCode
    mechanisms: tuple[str, ...]
    #: Why it failed, for the log (None when it did not).
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class AuthenticateOutcome:
    error: ErrorCode
    auth_bytes: bytes = b""
    error_message: str | None = None
    #: The session's lifetime told to the client (KIP-368); 0 means no re-authentication is due.
    session_lifetime_ms: int = 0
    #: Why it failed, for the log.
    reason: str | None = None
    #: Whether this ended an exchange (successfully or not) and whether that was a re-authentication.
    finished: bool = False
    reauthentication: bool = False


class SaslAuthenticator:
    """One connection's SASL state on a SASL listener; the connection asks it before serving anything."""

    def __init__(self, listener: SaslListener, credentials: CredentialSource) -> None:
        self.listener = listener
        self._credentials = credentials
        self.state = SaslState.HANDSHAKE
        self.principal: KafkaPrincipal | None = None
        #: The proxy user that logged in for ``principal``; None when the principal logged in itself.
        self.proxy: KafkaPrincipal | None = None
        self._server: _Server | None = None
        self._mechanism: str | None = None
        self._session_expires_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self.state is not SaslState.FAILED

    @property
    def mechanism(self) -> str | None:
        return self._mechanism

    def _move(self, event: Event) -> None:
        self.state = TRANSITIONS[(self.state, event)]

    def refusal(self, api_key: int, now_ms: int) -> str | None:
        """Why the request ``api_key`` closes the connection now, or None when it may be served."""
        allowed = ALLOWED[self.state]
        if allowed is not None and api_key not in allowed:
            return f"api_key {api_key} is not allowed in SASL state {self.state.value} (authenticate first)"
        expires = self._session_expires_ms
        expired = self.state is SaslState.AUTHENTICATED and expires is not None and now_ms >= expires
        if expired and api_key != SASL_HANDSHAKE:
            return "the authentication session expired (connections.max.reauth.ms) without re-authentication"
        return None

    def handshake(self, mechanism: str) -> HandshakeOutcome:
        """SaslHandshake: choose the mechanism (again, for a re-authentication)."""
        enabled = self.listener.mechanisms
        if self.state not in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED):
            self.state = SaslState.FAILED
            return HandshakeOutcome(ErrorCode.illegal_sasl_state, enabled, "SaslHandshake out of turn")
        if mechanism not in enabled:
            self._move(Event.FAILURE)
            return HandshakeOutcome(
                ErrorCode.unsupported_sasl_mechanism, enabled, f"mechanism {mechanism!r} is not enabled"
            )
        if self.state is SaslState.AUTHENTICATED and mechanism != self._mechanism:
            self._move(Event.FAILURE)
            return HandshakeOutcome(
                ErrorCode.unsupported_sasl_mechanism, enabled,
                f"re-authentication must keep mechanism {self._mechanism}, not {mechanism}",
            )  # fmt: skip
        self._server = self._new_server(mechanism)
        self._mechanism = mechanism
        self._move(Event.HANDSHAKE)
        return HandshakeOutcome(ErrorCode.none, enabled)

    def _new_server(self, mechanism: str) -> _Server:
        proxies = self.listener.proxy_users
        if mechanism == PLAIN:
            return PlainServer(self.listener.plain_users, proxies)
        if mechanism == OAUTHBEARER:
            assert self.listener.oauthbearer is not None, "a listener offering OAUTHBEARER has its validator"
            return OAuthBearerServer(self.listener.oauthbearer)
        source = self._credentials
        return ScramServer(MECHANISMS[mechanism], source.scram_credential, source.mock_secret, proxies=proxies)

    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateOutcome:
        """SaslAuthenticate: one token of the exchange; on success the principal is set."""
        server = self._server
        reauth = self.state is SaslState.REAUTHENTICATE
        if server is None or self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE):
            self.state = SaslState.FAILED
            return AuthenticateOutcome(
                ErrorCode.illegal_sasl_state, error_message="SaslAuthenticate before SaslHandshake",
                reason="SaslAuthenticate out of turn", finished=True, reauthentication=reauth,
            )  # fmt: skip
        try:
            answer = server.evaluate(token)
        except SaslAuthenticationError as exc:
            return self._failed(server, str(exc), exc.client_message, reauth)
        if not server.complete:
            self._move(Event.CHALLENGE)
            return AuthenticateOutcome(ErrorCode.none, answer)
        principal = KafkaPrincipal("User", server.acting_for or server.username)
        if reauth and principal != self.principal:
            return self._failed(
                server, f"re-authentication changed the principal from {self.principal} to {principal}",
                f"Cannot change principals during re-authentication from {self.principal}: {principal}", reauth,
            )  # fmt: skip
        self.principal = principal
        self.proxy = KafkaPrincipal("User", server.username) if server.acting_for else None
        self._server = None
        self._move(Event.SUCCESS)
        lifetime = session_lifetime_ms(self.listener.reauth_ms, server.expires_ms, now_ms)
        self._session_expires_ms = now_ms + lifetime if lifetime is not None else None
        return AuthenticateOutcome(
            ErrorCode.none, answer, session_lifetime_ms=lifetime or 0, finished=True, reauthentication=reauth
        )

    def _failed(self, server: _Server, reason: str, message: str | None, reauth: bool) -> AuthenticateOutcome:
        self._move(Event.FAILURE)
        self._server = None
        user = f" (user {server.username!r})" if server.username else ""
        generic = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {server.mechanism}"  # noqa: E501
        return AuthenticateOutcome(
            ErrorCode.sasl_authentication_failed, error_message=message or generic,
            reason=f"{server.mechanism}{user}: {reason}", finished=True, reauthentication=reauth,
        )  # fmt: skip


def session_lifetime_ms(reauth_ms: int, credential_expires_ms: int | None, now_ms: int) -> int | None:
    """How long a session lasts: ``connections.max.reauth.ms`` bounded by the credential's expiry; None: forever.

    Kafka's SaslServerAuthenticator.handleSaslToken: the smaller of the two that are set, never negative.
    """
    bounds = [reauth_ms] if reauth_ms > 0 else []
    if credential_expires_ms is not None:
        bounds.append(max(0, credential_expires_ms - now_ms))
    return min(bounds) if bounds else None


def sasl_client_factory(
    mechanism: str, username: str, password: str, authzid: str = ""
) -> Callable[[], SaslClientMechanism]:
    """Makes the client side of ``mechanism`` afresh for each connection (a SCRAM exchange has state).

    Args:
        mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
        username: who logs in.
        password: its password.
        authzid: whom it acts for (a proxy naming its client); empty: itself.

    Raises:
        ValueError: ``mechanism`` is not one barnabas implements.
    """
    if mechanism == PLAIN:
        return lambda: PlainClient(username, password, authzid)
    scram = MECHANISMS.get(mechanism)
    if scram is None:
        raise ValueError(f"SASL mechanism {mechanism} is not supported here (use {PLAIN}, {', '.join(MECHANISMS)})")
    return lambda: ScramClient(scram, username, password, authzid=authzid)
