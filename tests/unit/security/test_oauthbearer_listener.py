"""An OAUTHBEARER listener built from Kafka's settings: which validator, which JWKS, and every way it must not start.

The HTTPS cases fetch from a real server on 127.0.0.1 (tests/support/oauth.py) trusted through the
JAAS entry's ssl.truststore.* options, as Kafka's JaasOptionsUtils reads them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from barnabas.config import ConfigError, load_broker_config
from barnabas.security import listener_security
from barnabas.security.jwks_sources import HttpsJwks
from barnabas.security.jwt_validator import JwtValidator
from barnabas.security.oauthbearer import TokenValidationError, TokenValidator
from barnabas.security.oauthbearer_unsecured import UnsecuredValidator
from tests.support.oauth import AUDIENCE, ISSUER, Issuer, JwksServer, SigningKey

JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
PREFIX = "listener.name.sasl_plaintext."
BASE = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    PREFIX + "oauthbearer.sasl.jaas.config": JAAS,
}


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def jwks_file(issuer: Issuer, tmp_path: Path) -> Path:
    return issuer.write_jwks(tmp_path / "jwks.json")


def validator_for(settings: dict[str, str | None]) -> TokenValidator:
    config = load_broker_config(overrides={k: v for k, v in settings.items() if v is not None}, environ={})
    security = {s.name: s for s in listener_security(config)}
    sasl = security["SASL_PLAINTEXT"].sasl
    assert sasl is not None and sasl.oauthbearer is not None
    return sasl.oauthbearer


def secured(jwks_file: Path, **more: str) -> dict[str, str | None]:
    return {**BASE, PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER,
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(), **more}  # fmt: skip


def test_the_validator_handler_checks_signed_tokens_with_the_listeners_settings(
    issuer: Issuer, jwks_file: Path
) -> None:
    validator = validator_for(secured(
        jwks_file, **{"sasl.oauthbearer.expected.audience": "other", PREFIX + "sasl.oauthbearer.expected.audience":
                      f"x,{AUDIENCE}", PREFIX + "oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER},
    ))  # fmt: skip
    assert isinstance(validator, JwtValidator)
    assert validator.validate(issuer.token()).principal == "alice", "the listener's audience list wins"
    with pytest.raises(TokenValidationError, match="InvalidIssuerError"):
        validator.validate(issuer.token(iss="https://other.test"))


def test_without_a_handler_kafkas_unsecured_validator_applies_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(validator_for(BASE), UnsecuredValidator)
    assert "accepts unsecured OAUTHBEARER tokens" in caplog.text


@pytest.mark.parametrize(
    ("change", "message"),
    [({PREFIX + "oauthbearer.sasl.jaas.config": None},
      "listener SASL_PLAINTEXT: OAUTHBEARER needs listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"),
     ({PREFIX + "oauthbearer.sasl.jaas.config": "x.Y required;"},
      "the login module for OAUTHBEARER must be org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"),
     ({"sasl.oauthbearer.jwks.endpoint.url": "file:///jwks.json"},
      "sasl.oauthbearer.jwks.endpoint.url is set but listener.name.sasl_plaintext.oauthbearer.sasl.server.callback."
      "handler.class is not, so Kafka would accept unsigned tokens"),
     ({PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER},
      "sasl.oauthbearer.jwks.endpoint.url value must be non-null"),
     ({PREFIX + "oauthbearer.sasl.server.callback.handler.class": "com.example.Handler"},
      "com.example.Handler cannot run in barnabas"),
     ({PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER,
       "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"},
      "the file /nonexistent/jwks.json does not exist"),
     ({PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER,
       "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}, "has no protocol barnabas reads"),
     ({PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER,
       "sasl.oauthbearer.jwks.endpoint.url": "https://127.0.0.1:1/jwks",
       "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "0"},
      "cannot fetch the JWKS from https://127.0.0.1:1/jwks"),
     ({"sasl.oauthbearer.clock.skew.seconds": "-1"},
      "sasl.oauthbearer.clock.skew.seconds: value -1 must be at least 0")],
    ids=["no JAAS", "wrong module", "URL without handler", "handler without URL", "unknown handler", "no file",
         "bad scheme", "unreachable", "negative skew"],
)  # fmt: skip
def test_a_listener_that_cannot_validate_as_configured_stops_the_broker(
    change: dict[str, str | None], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        validator_for({**BASE, **change})
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unreadable_jwks_file_stops_the_broker(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    with pytest.raises(ConfigError, match="holds no usable signature key"):
        validator_for(secured(tmp_path / "jwks.json"))


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server(ca: trustme.CA) -> Iterator[JwksServer]:
    with JwksServer(Issuer(), ca) as server:
        yield server


def https(server: JwksServer, ca_file: Path, **more: str) -> dict[str, str | None]:
    jaas = JAAS.removesuffix(";") + f' ssl.truststore.type="PEM" ssl.truststore.location="{ca_file}";'
    return {**BASE, PREFIX + "oauthbearer.sasl.jaas.config": jaas,
            PREFIX + "oauthbearer.sasl.server.callback.handler.class": HANDLER,
            PREFIX + "oauthbearer.sasl.oauthbearer.jwks.endpoint.url": server.url,
            "sasl.oauthbearer.expected.audience": AUDIENCE, **more}  # fmt: skip


def test_a_jwks_over_https_is_trusted_through_the_jaas_truststore(
    server: JwksServer, ca: trustme.CA, tmp_path: Path
) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    validator = validator_for(https(server, tmp_path / "ca.pem"))
    assert isinstance(validator, JwtValidator) and isinstance(validator.keys, HttpsJwks)
    try:
        assert validator.validate(server.issuer.token()).principal == "alice"
        assert server.requests == 1
    finally:
        validator.keys.close()
    untrusted = {**https(server, tmp_path / "ca.pem"), PREFIX + "oauthbearer.sasl.jaas.config": JAAS,
                 "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "0"}  # fmt: skip
    with pytest.raises(ConfigError, match="CERTIFICATE_VERIFY_FAILED"):
        validator_for(untrusted)


def test_an_unknown_kid_fetches_the_jwks_again_at_once_but_at_most_once_a_minute(
    server: JwksServer, ca: trustme.CA, tmp_path: Path
) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    validator = validator_for(https(server, tmp_path / "ca.pem"))
    assert isinstance(validator, JwtValidator) and isinstance(validator.keys, HttpsJwks)
    rotated = SigningKey("key-2")
    server.issuer.keys.append(rotated)
    try:
        with pytest.raises(TokenValidationError, match="no key with kid 'key-2'"):
            validator.validate(server.issuer.token(rotated))
        accepted = None
        for _ in range(200):  # the refresh thread fetches it; poll until the swapped set has it
            try:
                accepted = validator.validate(server.issuer.token(rotated))
                break
            except TokenValidationError:
                time.sleep(0.01)
        assert accepted is not None and accepted.principal == "alice"
        assert server.requests == 2
        for _ in range(3):
            with pytest.raises(TokenValidationError):
                validator.validate(server.issuer.token(SigningKey("key-3")))
        assert server.requests <= 3, "one fetch for key-3 in a minute, however many tokens name it"
    finally:
        validator.keys.close()
