"""Signed OAUTHBEARER tokens checked against a JWKS: Kafka's OAuthBearerValidatorCallbackHandler (KIP-768).

Rules this module keeps (Kafka's ValidatorAccessTokenValidator on jose4j, and ClaimValidationUtils):

- A token is three non-empty dot-separated sections (Kafka's SerializedJwt).
- Its ``alg`` must be an asymmetric signature algorithm (``jwks.py``): ``none`` and HMAC are
  refused before any key is looked at, as jose4j's DISALLOW_NONE and the key types allow.
- Its key is the JWKS key with its ``kid``; a kid the set lacks asks the key source to look again
  (``jwks_sources.py``) and refuses this token. Without a kid, every key for its ``alg`` is tried.
- ``exp`` and ``iat`` are required; ``exp`` and ``nbf`` are checked with
  ``sasl.oauthbearer.clock.skew.seconds`` of slack, and an ``iat`` in the future beyond it is refused.
- With ``sasl.oauthbearer.expected.audience`` the ``aud`` claim must name one of them; without it a
  token that has an ``aud`` claim is refused (jose4j's default, which Kafka inherits). With
  ``sasl.oauthbearer.expected.issuer``, ``iss`` must equal it.
- The principal is the ``sasl.oauthbearer.sub.claim.name`` claim (default ``sub``): a string,
  trimmed, not empty. The scope is the ``sasl.oauthbearer.scope.claim.name`` claim: a
  space-delimited string (RFC 6749 §3.3) or a list of strings, none empty, no duplicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt

from .jwks import ASYMMETRIC_ALGORITHMS, VerificationKey
from .jwks_sources import KeySource
from .oauthbearer import OAuthBearerToken, TokenValidationError

__all__ = ["JwtSettings", "JwtValidator", "token_scope"]


@dataclass(frozen=True, slots=True)
class JwtSettings:
    """What a token's claims must say (Kafka's sasl.oauthbearer.* broker settings)."""

    clock_skew_s: int = 30
    audiences: tuple[str, ...] = ()
    issuer: str | None = None
    scope_claim: str = "scope"
    sub_claim: str = "sub"


def _text(name: str, value: object) -> str:
    """A claim that must be a non-blank string, trimmed (ClaimValidationUtils.validateString)."""
    if not isinstance(value, str):
        raise TokenValidationError(f"the {name} claim must be a string")
    if not value.strip():
        raise TokenValidationError(f"the {name} claim must not be empty")
    return value.strip()


def token_scope(name: str, raw: object) -> frozenset[str]:
    """A scope claim as a set: space-delimited text or a list of strings.

    Raises:
        TokenValidationError: not text or a list of strings, an empty element, or a duplicate.
    """
    if raw is None:
        return frozenset()
    items: Sequence[object]
    if isinstance(raw, str):
        items = raw.split()
    elif isinstance(raw, list):
        items = raw
    else:
        raise TokenValidationError(f"the {name} claim must be a string or a list of strings")
    scope = [_text(name, item) for item in items]
    if len(set(scope)) != len(scope):
        raise TokenValidationError(f"the {name} claim must not contain duplicates")
    return frozenset(scope)


def _timestamp_ms(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TokenValidationError(f"the {name} claim must be a non-negative number")
    return int(value * 1000)


class JwtValidator:
    """Validates signed JWTs against the keys of one JWKS source."""

    def __init__(self, keys: KeySource, settings: JwtSettings) -> None:
        self._keys = keys
        self._settings = settings

    @property
    def keys(self) -> KeySource:
        return self._keys

    def validate(self, token: str) -> OAuthBearerToken:
        """The principal, scope and lifetime of a signed token.

        Raises:
            TokenValidationError: see the module's rules.
        """
        token = token.strip()
        if len(token.split(".")) != 3 or not all(section.strip() for section in token.split(".")):
            raise TokenValidationError("malformed JWT: expected three sections (header, payload and signature)")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"malformed JWT header: {exc}") from None
        algorithm = header.get("alg")
        if algorithm not in ASYMMETRIC_ALGORITHMS:
            raise TokenValidationError(f"the JWT's alg {algorithm!r} is not allowed (asymmetric signatures only)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenValidationError("the JWT's kid is not a string")
        candidates = self._keys.key_set().candidates(kid, str(algorithm))
        if not candidates:
            if kid is not None and not self._keys.key_set().has_kid(kid):
                self._keys.missing(kid)
                raise TokenValidationError(f"no key with kid {kid[:100]!r} in the JWKS from {self._keys.location}")
            raise TokenValidationError(
                f"no key for alg {algorithm} (kid {kid!r}) in the JWKS from {self._keys.location}"
            )
        claims = self._verified_claims(token, str(algorithm), candidates)
        return self._token(claims)

    def _verified_claims(self, token: str, algorithm: str, candidates: list[VerificationKey]) -> dict[str, Any]:
        settings = self._settings
        failure: jwt.PyJWTError | None = None
        for candidate in candidates:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token, candidate.key, algorithms=[algorithm], audience=list(settings.audiences) or None,
                    issuer=settings.issuer, leeway=settings.clock_skew_s,
                    options={"require": ["exp", "iat"], "verify_sub": False, "verify_jti": False},
                )  # fmt: skip
                return claims
            except jwt.InvalidSignatureError as exc:
                failure = exc  # another key of the same algorithm may have signed it
            except jwt.PyJWTError as exc:
                raise TokenValidationError(f"{type(exc).__name__}: {exc}") from None
        raise TokenValidationError(f"{type(failure).__name__}: {failure}")

    def _token(self, claims: dict[str, Any]) -> OAuthBearerToken:
        settings = self._settings
        principal = _text(settings.sub_claim, claims.get(settings.sub_claim))
        scope = token_scope(settings.scope_claim, claims.get(settings.scope_claim))
        expires_ms = _timestamp_ms("exp", claims["exp"])
        issued_ms = _timestamp_ms("iat", claims["iat"])
        return OAuthBearerToken(principal, scope, expires_ms, issued_ms)
