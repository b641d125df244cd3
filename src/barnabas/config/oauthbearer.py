"""Kafka's OAUTHBEARER broker settings (KIP-768), with Kafka's defaults, and the names a listener reads them by.

Rules this module keeps (Kafka's SaslConfigs, BrokerSecurityConfigs and ConfigurationUtils):

- Each ``sasl.oauthbearer.*`` setting is broker-wide, and a listener may override it as
  ``listener.name.<l>.sasl.oauthbearer.*`` or, for its OAUTHBEARER mechanism alone,
  ``listener.name.<l>.oauthbearer.sasl.oauthbearer.*``; the most specific one wins, as Kafka's
  ConfigurationUtils reads the mechanism-prefixed key first.
- ``sasl.server.callback.handler.class`` exists only with its listener and mechanism prefix
  (``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``), as Kafka requires of
  server callback handlers. It picks the validator: Kafka's OAuthBearerValidatorCallbackHandler
  checks signed JWTs against the JWKS; without it, Kafka's default unsecured validator applies.
- What the values mean is checked when the listener is built (``barnabas.security.oauthbearer_listener``).
"""

from __future__ import annotations

from .definitions import ConfigDef, ConfigType, at_least

__all__ = [
    "CALLBACK_HANDLER",
    "MECHANISM_PREFIX",
    "OAUTHBEARER_CONFIGS",
    "OAUTHBEARER_CONFIG_LIST",
    "OAUTHBEARER_LISTENER_CONFIGS",
]

MECHANISM_PREFIX = "oauthbearer."
#: The per-listener, per-mechanism key that names the server's validator.
CALLBACK_HANDLER = "oauthbearer.sasl.server.callback.handler.class"

_S = ConfigType.STRING
_I = ConfigType.INT
_L = ConfigType.LONG
_LIST = ConfigType.LIST

OAUTHBEARER_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", _S, None,
              "Where the JWKS that verifies OAUTHBEARER tokens is: https://, http:// or file://."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", _L, 3600000,
              "How often a JWKS fetched over HTTP(S) is fetched again (a file is reread when it changes).",
              at_least(1)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _L, 100,
              "First wait between failed JWKS fetches; it doubles up to the max.", at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _L, 10000,
              "How long one JWKS fetch keeps retrying (its waits double up to this).", at_least(0)),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", _I, 30,
              "Seconds of difference allowed between the identity provider's clock and the broker's.", at_least(0)),
    ConfigDef("sasl.oauthbearer.expected.audience", _LIST, None,
              "Audiences a token's aud claim must name one of; unset refuses any token that has an aud claim."),
    ConfigDef("sasl.oauthbearer.expected.issuer", _S, None, "The iss claim a token must carry; unset: any."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", _S, "scope", "The claim holding a token's scope."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", _S, "sub", "The claim naming a token's principal."),
)  # fmt: skip

OAUTHBEARER_CONFIGS: dict[str, ConfigDef] = {definition.name: definition for definition in OAUTHBEARER_CONFIG_LIST}

#: What ``listener.name.<l>.`` may prefix: each setting, with and without the mechanism, and the callback handler.
OAUTHBEARER_LISTENER_CONFIGS: dict[str, ConfigDef] = {
    **OAUTHBEARER_CONFIGS,
    **{MECHANISM_PREFIX + name: definition for name, definition in OAUTHBEARER_CONFIGS.items()},
    CALLBACK_HANDLER: ConfigDef(
        CALLBACK_HANDLER, _S, None,
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler to verify signed tokens.",
    ),
}  # fmt: skip
