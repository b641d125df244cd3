"""Unsigned OAUTHBEARER tokens: Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler, for development only.

Kafka validates OAUTHBEARER this way on any listener that names no server callback handler; anyone
can write such a token for any principal, so ``oauthbearer_listener.py`` logs a warning when a
listener uses it. Rules this module keeps (OAuthBearerUnsecuredJws and OAuthBearerValidationUtils):

- The token is ``<header>.<claims>.`` (Base64URL JSON), the header's ``alg`` is ``none`` and the
  signature section is empty.
- Options come from the listener's JAAS entry: ``unsecuredValidatorPrincipalClaimName`` (default
  ``sub``), ``unsecuredValidatorScopeClaimName`` (default ``scope``),
  ``unsecuredValidatorRequiredScope`` (space-delimited) and
  ``unsecuredValidatorAllowableClockSkewMs`` (default 0).
- The principal claim must be a non-blank string; ``exp`` is required and must be after now minus
  the skew; ``iat``, if there, must not be after now plus the skew, and must be before ``exp``.
- A token missing a required scope is answered ``insufficient_scope`` with the required scope.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from barnabas.config import ConfigError

from .jwt_validator import token_scope
from .oauthbearer import OAuthBearerToken, TokenValidationError

__all__ = ["UnsecuredValidator"]

PRINCIPAL_CLAIM_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
CLOCK_SKEW_OPTION = "unsecuredValidatorAllowableClockSkewMs"


def _section(text: str, what: str) -> dict[str, Any]:
    try:
        decoded = base64.b64decode(text.translate(str.maketrans("-_", "+/")) + "=" * (-len(text) % 4), validate=True)
        value = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise TokenValidationError(f"the unsecured JWS {what} is not Base64URL-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"the unsecured JWS {what} is not a JSON object")
    return value


def _seconds(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenValidationError(f"the {name} claim is not a number")
    return float(value)


class UnsecuredValidator:
    """Validates unsigned JWTs with the options of the listener's OAuthBearerLoginModule entry."""

    def __init__(self, options: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        """Read the validator options.

        Raises:
            ConfigError: the clock skew is not a non-negative integer.
        """
        self._principal_claim = options.get(PRINCIPAL_CLAIM_OPTION, "").strip() or "sub"
        self._scope_claim = options.get(SCOPE_CLAIM_OPTION, "").strip() or "scope"
        self._required_scope = tuple(options.get(REQUIRED_SCOPE_OPTION, "").split())
        skew = options.get(CLOCK_SKEW_OPTION, "").strip() or "0"
        if not skew.isdigit():
            raise ConfigError(f"{CLOCK_SKEW_OPTION}: {skew!r} is not a non-negative integer")
        self._skew_ms = int(skew)
        self._clock = clock

    def validate(self, token: str) -> OAuthBearerToken:
        """The principal, scope and lifetime of an unsigned token.

        Raises:
            TokenValidationError: see the module's rules.
        """
        sections = token.split(".")
        if len(sections) != 3 or ".." in token:
            raise TokenValidationError("unsecured JWS compact serializations must have 3 dot-separated values")
        header, claims = _section(sections[0], "header"), _section(sections[1], "claims")
        if header.get("alg") != "none":
            raise TokenValidationError("an unsecured JWS must have 'none' for an algorithm")
        if sections[2]:
            raise TokenValidationError("an unsecured JWS must not contain a digital signature")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"no principal name in the JWT claim {self._principal_claim}")
        now_ms = self._clock() * 1000
        issued, expires = _seconds(claims, "iat"), _seconds(claims, "exp")
        if issued is not None and issued * 1000 > now_ms + self._skew_ms:
            raise TokenValidationError("the iat claim is after now plus the allowable clock skew")
        if expires is None:
            raise TokenValidationError("required claim missing: exp")
        if now_ms - self._skew_ms >= expires * 1000:
            raise TokenValidationError("the token expired (now minus the allowable clock skew is past exp)")
        if issued is not None and expires <= issued:
            raise TokenValidationError("the exp claim is not after the iat claim")
        scope = token_scope(self._scope_claim, claims.get(self._scope_claim))
        missing = [item for item in self._required_scope if item not in scope]
        if missing:
            required = "[" + ", ".join(self._required_scope) + "]"
            raise TokenValidationError(f"the token's scope lacks {missing[0]}", "insufficient_scope", required)
        return OAuthBearerToken(
            principal, scope, int(expires * 1000), int(issued * 1000) if issued is not None else None
        )
