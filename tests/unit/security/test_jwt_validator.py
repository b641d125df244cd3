"""Signed tokens against a JWKS file (Kafka's OAuthBearerValidatorCallbackHandler rules), and unsigned ones."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from barnabas.security.jwks import parse_jwks
from barnabas.security.jwks_sources import JwksFile
from barnabas.security.jwt_validator import JwtSettings, JwtValidator
from barnabas.security.oauthbearer import TokenValidationError
from barnabas.security.oauthbearer_unsecured import UnsecuredValidator
from tests.support.oauth import AUDIENCE, ISSUER, Issuer, SigningKey

SETTINGS = JwtSettings(clock_skew_s=30, audiences=(AUDIENCE,), issuer=ISSUER)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer([SigningKey("rsa-1"), SigningKey("ec-1", "ES256")])


@pytest.fixture
def validator(issuer: Issuer, tmp_path: Path) -> JwtValidator:
    return JwtValidator(JwksFile(issuer.write_jwks(tmp_path / "jwks.json")), SETTINGS)


def unsigned(claims: dict[str, object], header: dict[str, object] | None = None, signature: str = "") -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}.{signature}"


def test_a_signed_token_names_its_principal_scope_and_lifetime(issuer: Issuer, validator: JwtValidator) -> None:
    for key in issuer.keys:
        token = validator.validate(issuer.token(key, sub=" alice ", lifetime_s=120))
        assert (token.principal, token.scope) == ("alice", frozenset({"produce", "consume"}))
        assert abs(token.expires_ms - (time.time() + 120) * 1000) < 2000
        assert token.issued_ms is not None


def public_pem(issuer: Issuer) -> bytes:
    key = issuer.keys[0].private.public_key()
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def hmac_with_the_public_key(issuer: Issuer) -> str:
    """The key-confusion attack: HS256 with the RSA public key (as PEM) as the secret."""
    segments = [base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=")
                for part in ({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, issuer.claims())]  # fmt: skip
    import hashlib
    import hmac

    signature = hmac.new(public_pem(issuer), b".".join(segments), hashlib.sha256).digest()
    return b".".join([*segments, base64.urlsafe_b64encode(signature).rstrip(b"=")]).decode()


REFUSALS = {
    "expired": (lambda i: i.token(lifetime_s=-31), "ExpiredSignatureError"),
    "not before": (lambda i: i.token(nbf=int(time.time()) + 120), "ImmatureSignatureError"),
    "issued in the future": (lambda i: i.token(iat=int(time.time()) + 120), "ImmatureSignatureError"),
    "wrong audience": (lambda i: i.token(aud="someone-else"), "InvalidAudienceError"),
    "no audience": (lambda i: i.token(aud=None), "MissingRequiredClaimError"),
    "wrong issuer": (lambda i: i.token(iss="https://evil.test"), "InvalidIssuerError"),
    "no issuer": (lambda i: i.token(iss=None), "MissingRequiredClaimError"),
    "no exp": (lambda i: i.token(exp=None), "MissingRequiredClaimError"),
    "no iat": (lambda i: i.token(iat=None), "MissingRequiredClaimError"),
    "no sub": (lambda i: i.token(sub=None), "the sub claim must be a string"),
    "blank sub": (lambda i: i.token(sub="  "), "the sub claim must not be empty"),
    "duplicate scope": (lambda i: i.token(scope=["a", "a"]), "must not contain duplicates"),
    "bad signature": (lambda i: i.token(SigningKey("rsa-1")), "InvalidSignatureError"),
    "unknown kid": (lambda i: i.token(SigningKey("rsa-9")), "no key with kid 'rsa-9'"),
    "alg none": (lambda i: unsigned(i.claims(), {"alg": "none", "kid": "rsa-1"}), "expected three sections"),
    "alg none with a signature": (lambda i: unsigned(i.claims(), {"alg": "none"}, "c2ln"), "is not allowed"),
    "HMAC with the public key": (hmac_with_the_public_key, "alg 'HS256' is not allowed"),
    "RS256 header on the EC key": (lambda i: i.token(i.keys[0], headers={"kid": "ec-1"}), "no key for alg RS256"),
    "garbage": (lambda i: "not-a-jwt", "malformed JWT"),
    "empty section": (lambda i: "a..c", "malformed JWT"),
    "garbage header": (lambda i: "e30K!.e30.e30", "malformed JWT header"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_bad_token_is_refused_with_the_reason(issuer: Issuer, validator: JwtValidator, case: str) -> None:
    make, reason = REFUSALS[case]
    with pytest.raises(TokenValidationError, match=reason) as caught:
        validator.validate(make(issuer))
    assert caught.value.status == "invalid_token"


def test_without_an_expected_audience_a_token_with_aud_is_refused_as_jose4j_does(
    issuer: Issuer, tmp_path: Path
) -> None:
    keys = JwksFile(issuer.write_jwks(tmp_path / "jwks.json"))
    lenient = JwtValidator(keys, JwtSettings())
    assert lenient.validate(issuer.token(aud=None, iss="anyone")).principal == "alice"
    with pytest.raises(TokenValidationError, match="InvalidAudienceError"):
        lenient.validate(issuer.token())


def test_claim_names_and_clock_skew_come_from_the_settings(issuer: Issuer, tmp_path: Path) -> None:
    keys = JwksFile(issuer.write_jwks(tmp_path / "jwks.json"))
    settings = JwtSettings(clock_skew_s=120, audiences=("x", AUDIENCE), sub_claim="client_id", scope_claim="scp")
    token = JwtValidator(keys, settings).validate(issuer.token(client_id="svc", scp=["a", "b"], lifetime_s=-60))
    assert (token.principal, token.scope) == ("svc", frozenset({"a", "b"}))


def test_a_token_without_kid_is_checked_against_every_key_of_its_alg(issuer: Issuer, validator: JwtValidator) -> None:
    token = jwt.encode(issuer.claims(), issuer.keys[1].private, algorithm="ES256")
    assert validator.validate(token).principal == "alice"


def test_the_file_is_reread_when_it_changes_so_a_new_kid_is_found(issuer: Issuer, tmp_path: Path) -> None:
    path = issuer.write_jwks(tmp_path / "jwks.json")
    validator = JwtValidator(JwksFile(path), SETTINGS)
    rotated = Issuer([*issuer.keys, SigningKey("rsa-2")])
    with pytest.raises(TokenValidationError, match="no key with kid 'rsa-2'"):
        validator.validate(rotated.token(rotated.keys[2]))
    rotated.write_jwks(path)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert validator.validate(rotated.token(rotated.keys[2])).principal == "alice"
    path.write_text("{not json")
    assert validator.validate(rotated.token(rotated.keys[2])).principal == "alice", "a bad reread keeps the keys"


def test_symmetric_and_encryption_keys_are_dropped_from_a_jwks(issuer: Issuer) -> None:
    oct_key = {"kty": "oct", "k": base64.urlsafe_b64encode(b"s" * 32).decode(), "kid": "hmac"}
    enc_key = {**issuer.keys[0].jwk(), "use": "enc", "kid": "enc"}
    keys = parse_jwks(json.dumps({"keys": [oct_key, enc_key, issuer.keys[0].jwk()]}), "test")
    assert [key.kid for key in keys.keys] == ["rsa-1"]
    with pytest.raises(ValueError, match="no usable signature key"):
        parse_jwks(json.dumps({"keys": [oct_key]}), "test")
    with pytest.raises(ValueError, match="no 'keys' array"):
        parse_jwks("[]", "test")


# -- Kafka's default unsecured validator ---------------------------------------------------------


def test_the_unsecured_validator_takes_an_unsigned_token() -> None:
    now = time.time()
    token = UnsecuredValidator({}).validate(unsigned({"sub": "dev", "iat": now, "exp": now + 60, "scope": "a b"}))
    assert (token.principal, token.scope) == ("dev", frozenset({"a", "b"}))


@pytest.mark.parametrize(
    ("claims", "header", "signature", "reason"),
    [({"sub": "dev", "exp": 1}, None, "", "expired"),
     ({"exp": 2**40}, None, "", "no principal name"),
     ({"sub": "dev"}, None, "", "required claim missing: exp"),
     ({"sub": "dev", "exp": 2**40, "iat": 2**39}, None, "", "iat claim is after now"),
     ({"sub": "dev", "exp": 2**40}, {"alg": "RS256"}, "", "'none' for an algorithm"),
     ({"sub": "dev", "exp": 2**40}, None, "c2ln", "must not contain a digital signature")],
    ids=["expired", "no sub", "no exp", "iat in the future", "alg", "signature"],
)  # fmt: skip
def test_the_unsecured_validator_refuses(
    claims: dict[str, object], header: dict[str, object] | None, signature: str, reason: str
) -> None:
    with pytest.raises(TokenValidationError, match=reason):
        UnsecuredValidator({}).validate(unsigned(claims, header, signature))


def test_the_unsecured_validator_answers_a_missing_scope_with_insufficient_scope() -> None:
    options = {"unsecuredValidatorRequiredScope": "write read", "unsecuredValidatorPrincipalClaimName": "client"}
    with pytest.raises(TokenValidationError) as caught:
        UnsecuredValidator(options).validate(unsigned({"client": "dev", "exp": 2**40, "scope": ["read"]}))
    assert (caught.value.status, caught.value.scope) == ("insufficient_scope", "[write, read]")
