"""SASL/OAUTHBEARER (RFC 7628, KIP-255): the server side against a token validator, and the client side.

Rules this module keeps (Kafka's OAuthBearerSaslServer and OAuthBearerClientInitialResponse):

- The client's first message is ``n,[a=<authzid>],%x01auth=Bearer <token>%x01[<key>=<value>%x01]...%x01``,
  matched with Kafka's patterns; anything else fails with the generic message (Kafka's SaslException).
  Extensions are accepted and ignored, as both of Kafka's validators accept every one.
- The listener's validator (``jwt_validator.py`` for signed tokens, ``oauthbearer_unsecured.py`` for
  Kafka's default) checks the token. A token it refuses is answered as RFC 7628 §3.2.2 says: the
  challenge ``{"status":"invalid_token"}`` with no error; the client answers ``%x01`` and the exchange
  then fails with that JSON as the client's message (SASL_AUTHENTICATION_FAILED). Any other answer
  fails it too (Kafka would take it as a new first message: a second try in one exchange gains a
  client nothing but skipping the failure delay). Why the token was refused goes to the log only.
- An authorization id, if sent, must be the token's principal.
- The session lasts no longer than the token (KIP-368): :attr:`OAuthBearerServer.expires_ms`.
- The token itself is a credential: it never appears in a reason or a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from .sasl_errors import SaslAuthenticationError

__all__ = [
    "OAUTHBEARER",
    "OAuthBearerClient",
    "OAuthBearerServer",
    "OAuthBearerToken",
    "TokenValidationError",
    "TokenValidator",
    "error_challenge",
]

OAUTHBEARER = "OAUTHBEARER"
_SEPARATOR = "\x01"
_CONTROL_A = b"\x01"
# Kafka's OAuthBearerClientInitialResponse patterns, written out for Python's re.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+{_SEPARATOR})*"
_FIRST_MESSAGE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>{_KVPAIRS}){_SEPARATOR}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A token a validator accepted (Kafka's OAuthBearerToken): who it names, for what, until when."""

    principal: str
    scope: frozenset[str]
    #: When it expires, in ms since the epoch (its exp claim).
    expires_ms: int
    #: When it was issued (its iat claim), if it says.
    issued_ms: int | None = None


class TokenValidationError(ValueError):
    """The token is refused: ``str(exc)`` says why (for the log), ``status`` and ``scope`` go to the client."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    """Checks a compact-serialized token (a JWT) and says whom it names."""

    def validate(self, token: str) -> OAuthBearerToken:
        """The token's principal, scope and lifetime.

        Raises:
            TokenValidationError: the token is malformed, unsigned where a signature is needed,
                expired, for another audience or issuer, or lacks its principal.
        """
        ...


def error_challenge(error: TokenValidationError) -> str:
    """The JSON a refused token is answered with, spaced as Kafka's OAuthBearerSaslServer writes it."""
    text = f'{{"status":"{error.status}"'
    if error.scope is not None:
        text += f', "scope":"{error.scope}"'
    return text + "}"


@dataclass(frozen=True, slots=True)
class _FirstMessage:
    token: str
    authzid: str


def _parse_first_message(response: bytes) -> _FirstMessage:
    """The token and authorization id of a client's first message.

    Raises:
        SaslAuthenticationError: it does not match RFC 7628's grammar as Kafka reads it.
    """
    try:
        text = response.decode()
    except UnicodeDecodeError:
        raise SaslAuthenticationError("the OAUTHBEARER client first message is not UTF-8") from None
    match = _FIRST_MESSAGE.fullmatch(text)
    if match is None:
        raise SaslAuthenticationError("invalid OAUTHBEARER client first message")
    pairs = dict(pair.partition("=")[::2] for pair in match["kvpairs"].split(_SEPARATOR) if pair)
    auth = pairs.get("auth")
    if auth is None:
        raise SaslAuthenticationError("invalid OAUTHBEARER client first message: 'auth' not specified")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise SaslAuthenticationError("invalid OAUTHBEARER client first message: invalid 'auth' format")
    if bearer["scheme"].lower() != "bearer":
        raise SaslAuthenticationError("invalid scheme in the OAUTHBEARER client first message (Bearer expected)")
    return _FirstMessage(bearer["token"], match["authzid"] or "")


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange: the token in, an empty answer or an error challenge out."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self.username = ""
        #: A token names its own principal: no one acts for another over OAUTHBEARER.
        self.acting_for = ""
        self._complete = False
        self._refused: tuple[str, str] | None = None  # (reason, JSON challenge) awaiting the client's %x01
        self._used = False
        #: When the accepted token expires, in ms since the epoch; None until one is accepted.
        self.expires_ms: int | None = None
        self.token: OAuthBearerToken | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate(self, response: bytes) -> bytes:
        """Take the client's first message (or its ``%x01`` after an error challenge).

        Returns:
            An empty answer for an accepted token, the JSON error challenge for a refused one.

        Raises:
            SaslAuthenticationError: a malformed message, an authzid that is not the token's
                principal, or the end of an exchange whose token was refused.
        """
        if self._refused is not None:
            reason, challenge = self._refused
            if response != _CONTROL_A:
                reason += " (and the client did not acknowledge the error with %x01)"
            raise SaslAuthenticationError(reason, challenge)
        if self._used:
            raise SaslAuthenticationError("OAUTHBEARER takes one client message")
        self._used = True
        message = _parse_first_message(response)
        try:
            token = self._validator.validate(message.token)
        except TokenValidationError as exc:
            challenge = error_challenge(exc)
            self._refused = (f"invalid token: {exc}", challenge)
            return challenge.encode()
        self.username = token.principal
        if message.authzid and message.authzid != token.principal:
            raise SaslAuthenticationError(
                "the authorization id differs from the token's principal",
                f"Authentication failed: Client requested an authorization id ({message.authzid}) that is "
                f"different from the token's principal name ({token.principal})",
            )
        self.token = token
        self.expires_ms = token.expires_ms
        self._complete = True
        return b""


class OAuthBearerClient:
    """The client side: sends the token once, and ``%x01`` to an error challenge (as Kafka's client does)."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, authzid: str = "") -> None:
        authorization = f"a={authzid}" if authzid else ""
        self._message = f"n,{authorization},{_SEPARATOR}auth=Bearer {token}{_SEPARATOR}{_SEPARATOR}".encode()

    def initial_response(self) -> bytes:
        return self._message

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """An empty answer ends the exchange; an error challenge is acknowledged so the server can fail it."""
        return _CONTROL_A if challenge else None
