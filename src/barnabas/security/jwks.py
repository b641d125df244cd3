"""A JSON Web Key Set (RFC 7517) read into the public keys that may verify a token, each with its algorithms.

Rules this module keeps (what jose4j's VerificationJwkSelector picks for Kafka, made stricter):

- Only asymmetric signature keys are kept: RSA (RS256/384/512, PS256/384/512), EC (ES256 on P-256,
  ES384 on P-384, ES512 on P-521, ES256K on secp256k1) and OKP (EdDSA). A symmetric ``oct`` key is
  dropped with a warning: a key set is public, and an HMAC key in it would let anyone sign. So a
  token signed with HMAC, or with ``alg`` none, finds no key.
- A key with ``use`` other than ``sig`` is dropped; a key with an ``alg`` verifies that algorithm only.
- A token names its key by ``kid``; without one, every key able to verify its ``alg`` is a candidate.
- A set with no usable key is an error, as is one that is not JSON with a ``keys`` array.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jwt import PyJWK, PyJWTError

__all__ = ["ASYMMETRIC_ALGORITHMS", "KeySet", "VerificationKey", "parse_jwks"]

log = logging.getLogger(__name__)

_RSA = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_BY_CURVE = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
_OKP = frozenset({"EdDSA"})
#: Every algorithm a token may be signed with.
ASYMMETRIC_ALGORITHMS = _RSA | frozenset(_EC_BY_CURVE.values()) | _OKP


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One public key of the set: its kid (if any), the key, and the algorithms it may verify."""

    kid: str | None
    key: Any
    algorithms: frozenset[str]


@dataclass(frozen=True, slots=True)
class KeySet:
    """The usable keys of one JWKS."""

    keys: tuple[VerificationKey, ...]

    def candidates(self, kid: str | None, algorithm: str) -> list[VerificationKey]:
        """The keys that may verify a token signed with ``algorithm`` that names ``kid`` (None: any)."""
        return [key for key in self.keys if algorithm in key.algorithms and (kid is None or key.kid == kid)]

    def has_kid(self, kid: str) -> bool:
        return any(key.kid == kid for key in self.keys)


def _algorithms(jwk: Mapping[str, Any]) -> frozenset[str]:
    """The algorithms a JWK may verify (empty: not a usable signature key)."""
    kty = jwk.get("kty")
    if kty == "RSA":
        allowed = _RSA
    elif kty == "EC":
        curve = _EC_BY_CURVE.get(str(jwk.get("crv")))
        allowed = frozenset({curve}) if curve else frozenset()
    elif kty == "OKP":
        allowed = _OKP
    else:
        return frozenset()
    if jwk.get("use", "sig") != "sig":
        return frozenset()
    alg = jwk.get("alg")
    return allowed & {alg} if alg is not None else allowed


def _key(jwk: Mapping[str, Any], where: str) -> VerificationKey | None:
    kid = jwk.get("kid")
    algorithms = _algorithms(jwk)
    if not algorithms:
        log.warning("JWKS %s: key %s (kty %s, alg %s) is not an asymmetric signature key; ignored", where, kid,
                    jwk.get("kty"), jwk.get("alg"))  # fmt: skip
        return None
    try:
        parsed = PyJWK(dict(jwk), next(iter(sorted(algorithms))))
    except PyJWTError as exc:
        log.warning("JWKS %s: key %s does not load (%s); ignored", where, kid, exc)
        return None
    key = parsed.key
    if hasattr(key, "public_key"):  # a private JWK: verify with its public half
        key = key.public_key()
    return VerificationKey(str(kid) if kid is not None else None, key, algorithms)


def parse_jwks(text: str | bytes, where: str) -> KeySet:
    """The usable keys of a JWKS document.

    Args:
        text: the document.
        where: its file or URL, for messages.

    Raises:
        ValueError: not JSON, no ``keys`` array, or no usable key in it.
    """
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the JWKS from {where} is not JSON ({exc})") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"the JWKS from {where} has no 'keys' array")
    keys = tuple(key for entry in entries if isinstance(entry, dict) and (key := _key(entry, where)) is not None)
    if not keys:
        raise ValueError(f"the JWKS from {where} holds no usable signature key")
    return KeySet(keys)
