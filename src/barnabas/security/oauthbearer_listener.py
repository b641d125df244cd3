"""Which validator an OAUTHBEARER listener uses, built from Kafka's settings as a Kafka broker reads them.

Rules this module keeps (Kafka's SaslChannelBuilder, OAuthBearerValidatorCallbackHandler,
VerificationKeyResolverFactory, ConfigurationUtils and JaasOptionsUtils):

- The listener needs its JAAS entry ``listener.name.<l>.oauthbearer.sasl.jaas.config`` with Kafka's
  OAuthBearerLoginModule (Kafka cannot start a SASL listener without one either).
- ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` naming Kafka's
  OAuthBearerValidatorCallbackHandler verifies signed tokens against
  ``sasl.oauthbearer.jwks.endpoint.url`` (then required): ``file://`` or ``http(s)://``. Left unset
  (or naming OAuthBearerUnsecuredValidatorCallbackHandler), Kafka's default unsecured validator
  applies: anyone may name any principal, so it is logged as a warning. Setting a JWKS URL without
  the handler is refused: Kafka would ignore the URL and accept unsigned tokens. Any other class
  is refused (barnabas runs no Java).
- Each ``sasl.oauthbearer.*`` value is the most specific of ``listener.name.<l>.oauthbearer.<key>``,
  ``listener.name.<l>.<key>`` and ``<key>``.
- HTTPS to the JWKS endpoint trusts the JAAS entry's ``ssl.truststore.location`` or
  ``ssl.truststore.certificates`` (``ssl.truststore.type=PEM``), else the system's CAs, as Kafka's
  JaasOptionsUtils builds its client SSL settings from the JAAS options.
- The key set is read now; every problem is a one-line ConfigError naming the listener.
"""

from __future__ import annotations

import logging
import ssl
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from barnabas.config import ConfigError
from barnabas.config.listeners import SSL_CONFIG_LIST, SSL_CONFIGS, ListenerSettings, override_key
from barnabas.config.oauthbearer import CALLBACK_HANDLER, MECHANISM_PREFIX

from .jaas import LoginModule
from .jwks_sources import HttpsJwks, JwksFile, KeySource
from .jwt_validator import JwtSettings, JwtValidator
from .oauthbearer import TokenValidator
from .oauthbearer_unsecured import UnsecuredValidator
from .tls import client_context

__all__ = ["OAUTHBEARER_LOGIN_MODULE", "VALIDATOR_HANDLER", "oauthbearer_validator"]

log = logging.getLogger(__name__)

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
#: Kafka's names for its JWKS validator (the ``secured`` one is the deprecated alias) and its default.
_VALIDATOR_HANDLERS = frozenset({
    VALIDATOR_HANDLER, "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})  # fmt: skip
_UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
_JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _setting(config: ListenerSettings, listener: str, key: str) -> Any:
    """``key`` as the listener's OAUTHBEARER mechanism sees it (the most specific form that is set)."""
    own = config.listener_value(listener, MECHANISM_PREFIX + key)
    return own if own is not None else config.listener_value(listener, key)


def oauthbearer_validator(config: ListenerSettings, listener: str, entry: LoginModule | None) -> TokenValidator:
    """The validator OAUTHBEARER tokens on ``listener`` are checked with (see the module's rules).

    Raises:
        ConfigError: no JAAS entry, an unknown callback handler, a JWKS URL without the validator
            handler or the handler without a URL, or a key set that cannot be read (one line).
    """
    handler_key = override_key(listener, CALLBACK_HANDLER)
    if entry is None:
        raise ConfigError(
            f"listener {listener}: OAUTHBEARER needs {override_key(listener, 'oauthbearer.sasl.jaas.config')} "
            f"({OAUTHBEARER_LOGIN_MODULE} required;) and, to verify signed tokens, {handler_key}="
            f"{VALIDATOR_HANDLER} with {_JWKS_URL}"
        )
    handler = config.listener_value(listener, CALLBACK_HANDLER)
    url = (_setting(config, listener, _JWKS_URL) or "").strip() or None
    if handler in _VALIDATOR_HANDLERS:
        return _jwt_validator(config, listener, entry, url)
    if handler is not None and handler != _UNSECURED_HANDLER:
        raise ConfigError(
            f"{handler_key}: {handler} cannot run in barnabas; use {VALIDATOR_HANDLER} (signed tokens against "
            f"{_JWKS_URL}) or leave it unset (Kafka's unsecured validator)"
        )
    if url is not None and handler is None:
        raise ConfigError(
            f"listener {listener}: {_JWKS_URL} is set but {handler_key} is not, so Kafka would accept unsigned "
            f"tokens and ignore the JWKS; set it to {VALIDATOR_HANDLER}"
        )
    log.warning(
        "listener %s accepts unsecured OAUTHBEARER tokens (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler): "
        "anyone can name any principal; set %s=%s and %s to verify signed tokens", listener, handler_key,
        VALIDATOR_HANDLER, _JWKS_URL,
    )  # fmt: skip
    return UnsecuredValidator(entry.options)


def _jwt_validator(config: ListenerSettings, listener: str, entry: LoginModule, url: str | None) -> JwtValidator:
    if url is None:
        raise ConfigError(f"listener {listener}: The OAuth configuration option {_JWKS_URL} value must be non-null")
    issuer = (_setting(config, listener, "sasl.oauthbearer.expected.issuer") or "").strip() or None
    settings = JwtSettings(
        clock_skew_s=int(_setting(config, listener, "sasl.oauthbearer.clock.skew.seconds")),
        audiences=tuple(_setting(config, listener, "sasl.oauthbearer.expected.audience") or ()),
        issuer=issuer,
        scope_claim=_claim_name(config, listener, "sasl.oauthbearer.scope.claim.name"),
        sub_claim=_claim_name(config, listener, "sasl.oauthbearer.sub.claim.name"),
    )
    return JwtValidator(_key_source(config, listener, entry, url), settings)


def _claim_name(config: ListenerSettings, listener: str, key: str) -> str:
    name = str(_setting(config, listener, key) or "").strip()
    if not name:
        raise ConfigError(f"listener {listener}: The OAuth configuration option {key} value must not be blank")
    return name


def _key_source(config: ListenerSettings, listener: str, entry: LoginModule, url: str) -> KeySource:
    where = f"listener {listener}: {_JWKS_URL}"
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return _jwks_file(where, Path(urllib.request.url2pathname(parts.path)))
    if scheme not in ("https", "http"):
        raise ConfigError(f'{where}: {url} has no protocol barnabas reads ("https", "http" or "file")')
    context = _jwks_tls(listener, entry.options) if scheme == "https" else None
    try:
        return HttpsJwks(
            url, context,
            refresh_ms=int(_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms")),
            backoff_ms=int(_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")),
            backoff_max_ms=int(_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")),
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot fetch the JWKS from {url}: {_one_line(exc)}") from None


def _jwks_file(where: str, path: Path) -> JwksFile:
    if not path.exists():
        raise ConfigError(f"{where}: the file {path} does not exist")
    if path.is_dir():
        raise ConfigError(f"{where}: {path} is a directory, not a file")
    try:
        return JwksFile(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: {_one_line(exc)}") from None


def _jwks_tls(listener: str, options: dict[str, str]) -> ssl.SSLContext:
    """The client TLS context for the JWKS endpoint, from the JAAS entry's ssl.* options (Kafka's JaasOptionsUtils)."""
    settings = {definition.name: definition.default for definition in SSL_CONFIG_LIST}
    for key, text in options.items():
        if key in SSL_CONFIGS:
            settings[key] = SSL_CONFIGS[key].parse(text)
    has_trust = settings["ssl.truststore.location"] is not None or settings["ssl.truststore.certificates"] is not None
    if has_trust and str(settings["ssl.truststore.type"]).upper() != "PEM":
        raise ConfigError(
            f'listener {listener}: the OAUTHBEARER JAAS entry\'s truststore must be PEM (ssl.truststore.type="PEM")'
        )
    return client_context(f"{listener} (JWKS endpoint)", settings)
