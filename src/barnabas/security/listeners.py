"""How each listener serves and how this broker connects to others, built once from the config.

Rules this module keeps:

- Every bound listener gets a :class:`ListenerSecurity`: its protocol, the TLS context it serves
  with (None for PLAINTEXT) and the principal mapper of its ``ssl.principal.mapping.rules``.
  Building them reads every key, certificate and CA file, so a broker that cannot serve TLS as
  configured stops before it binds anything.
- Broker-to-broker clients connect on the inter-broker listener with its protocol
  (:class:`ClientSecurity`); its client-side TLS context uses that listener's ssl.* settings.
- A connection's principal (:meth:`ListenerSecurity.principal`) is ``User:ANONYMOUS`` unless a
  verified client certificate names someone; a name no mapping rule applies to is an error the
  connection fails with (Kafka fails its authentication). On a SASL listener the SASL exchange
  names it instead (``sasl.py``).
- A SASL listener's JAAS entries are read now: each is one login module, Kafka's for its mechanism
  (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule). PLAIN needs one, with its
  ``user_<name>`` options; SCRAM's users are in coordination, so its entry is needed only where this
  broker logs in as a client. OAUTHBEARER needs one, and its validator and key set are built now
  (``oauthbearer_listener.py``).
- ``sasl.proxy.principals`` names the users every SASL listener lets act for another (a proxy
  node naming its client in the authzid). The proxy builds its own SASL client listener with
  :func:`sasl_listener` too, from settings under the same names.
- On a SASL inter-broker listener this broker logs in with ``sasl.mechanism.inter.broker.protocol``
  as the ``username`` and ``password`` of that mechanism's JAAS entry on that listener.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from barnabas.client import SaslClientMechanism
from barnabas.config import BrokerConfig, ConfigError
from barnabas.config.listeners import ListenerSettings, SecurityProtocol

from .jaas import LoginModule, parse_jaas_config
from .oauthbearer import OAUTHBEARER, TokenValidator
from .oauthbearer_listener import OAUTHBEARER_LOGIN_MODULE, oauthbearer_validator
from .plain import PLAIN, PLAIN_LOGIN_MODULE, plain_users
from .principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper, distinguished_name
from .sasl import SaslListener, sasl_client_factory
from .tls import client_context, server_context

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_LOGIN_MODULES = {PLAIN: PLAIN_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}

__all__ = [
    "PLAINTEXT_CLIENT",
    "ClientSecurity",
    "ListenerSecurity",
    "client_security",
    "jaas_entry",
    "listener_security",
    "sasl_listener",
    "serving_security",
]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one bound listener serves: its name and protocol, its TLS context, how it names clients."""

    name: str
    protocol: SecurityProtocol
    #: None for a PLAINTEXT listener.
    context: ssl.SSLContext | None = None
    mapper: SslPrincipalMapper | None = None
    #: How a SASL listener authenticates; None for PLAINTEXT and SSL.
    sasl: SaslListener | None = None

    def principal(self, ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> KafkaPrincipal:
        """Who is on a connection accepted by this listener (after its TLS handshake).

        Raises:
            NoMatchingRuleError: the client certificate's name matches no mapping rule.
        """
        if ssl_object is None or self.mapper is None:
            return ANONYMOUS
        certificate = ssl_object.getpeercert()
        if not certificate:  # no certificate sent (ssl.client.auth none or requested)
            return ANONYMOUS
        subject = certificate.get("subject", ())
        return KafkaPrincipal("User", self.mapper.name(distinguished_name(subject)))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How this broker connects to others: on which listener, with which TLS context (None: plaintext)."""

    listener: str
    protocol: SecurityProtocol
    context: ssl.SSLContext | None = None
    #: Makes the client side of the inter-broker SASL mechanism for each connection (SASL listeners).
    sasl: Callable[[], SaslClientMechanism] | None = None


PLAINTEXT_CLIENT = ClientSecurity("PLAINTEXT", SecurityProtocol.PLAINTEXT)


def listener_security(config: BrokerConfig) -> tuple[ListenerSecurity, ...]:
    """Every listener's security, in the order of ``listeners``.

    Raises:
        ConfigError: a TLS setting cannot be honoured or a file does not load (one line).
    """
    proxies = frozenset(principal.removeprefix("User:") for principal in config["sasl.proxy.principals"])
    return tuple(
        serving_security(config, listener.name, listener.protocol, listener.sasl_mechanisms, proxies)
        for listener in config.listener_setup.listeners
    )


def serving_security(
    config: ListenerSettings,
    name: str,
    protocol: SecurityProtocol,
    mechanisms: tuple[str, ...] = (),
    proxy_users: frozenset[str] = frozenset(),
) -> ListenerSecurity:
    """How one listener serves (a broker's, or a proxy node's client listener).

    Args:
        config: the settings, read as listener ``name`` sees them.
        name: the listener's name.
        protocol: its security protocol.
        mechanisms: the SASL mechanisms it offers (checked already); () unless SASL.
        proxy_users: who may act for another on it (``sasl.proxy.principals``).

    Raises:
        ConfigError: as :func:`listener_security`.
    """
    sasl = sasl_listener(config, name, mechanisms, proxy_users) if protocol.uses_sasl else None
    if not protocol.uses_tls:
        return ListenerSecurity(name, protocol, sasl=sasl)
    settings = config.ssl_for(name)
    mapper = SslPrincipalMapper(settings["ssl.principal.mapping.rules"])
    return ListenerSecurity(name, protocol, server_context(name, settings), mapper, sasl)


def jaas_entry(config: ListenerSettings, listener: str, mechanism: str) -> LoginModule | None:
    """The listener's one JAAS login module for ``mechanism``, None when it has no entry.

    Raises:
        ConfigError: the entry does not parse, or has more than one login module (Kafka's JaasContext).
    """
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_value(listener, key)
    if text is None:
        return None
    where = f"listener.name.{listener.lower()}.{key}"
    try:
        modules = parse_jaas_config(str(text))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {str(exc).removeprefix('sasl.jaas.config: ')}") from None
    if len(modules) != 1:
        raise ConfigError(f"{where}: {len(modules)} login modules, a SASL listener takes one")
    expected = _LOGIN_MODULES.get(mechanism, SCRAM_LOGIN_MODULE)
    if modules[0].name != expected:
        raise ConfigError(f"{where}: the login module for {mechanism} must be {expected}")
    return modules[0]


def sasl_listener(
    config: ListenerSettings, listener: str, mechanisms: tuple[str, ...], proxy_users: frozenset[str] = frozenset()
) -> SaslListener:
    """How the SASL listener ``listener`` authenticates (a broker's, or a proxy node's client listener).

    Args:
        config: the settings, read as ``listener`` sees them.
        listener: the listener's name.
        mechanisms: the mechanisms it offers (``sasl.enabled.mechanisms``, checked).
        proxy_users: who may act for another (``sasl.proxy.principals``; brokers only).

    Raises:
        ConfigError: a JAAS entry that is missing, does not parse or names the wrong login module, or
            an OAUTHBEARER validator that cannot be built (one line).
    """
    users: dict[str, str] = {}
    validator: TokenValidator | None = None
    for mechanism in mechanisms:
        entry = jaas_entry(config, listener, mechanism)
        if mechanism == OAUTHBEARER:
            validator = oauthbearer_validator(config, listener, entry)
        if mechanism == PLAIN:
            if entry is None:
                raise ConfigError(
                    f"listener {listener}: PLAIN needs listener.name.{listener.lower()}.plain.sasl.jaas.config "
                    f'({PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;)'
                )
            users = plain_users(entry)
    return SaslListener(
        listener,
        mechanisms,
        users,
        reauth_ms=int(config["connections.max.reauth.ms"]),
        failure_delay_ms=int(config["connection.failed.authentication.delay.ms"]),
        max_receive_size=int(config["sasl.server.max.receive.size"]),
        oauthbearer=validator,
        proxy_users=proxy_users,
    )


def client_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker's own clients (followers' fetchers) connect: the inter-broker listener's protocol.

    Raises:
        ConfigError: as :func:`listener_security`.
    """
    setup = config.listener_setup
    listener = setup.inter_broker_listener
    sasl = _inter_broker_login(config, listener.name) if listener.protocol.uses_sasl else None
    if not listener.protocol.uses_tls:
        return ClientSecurity(listener.name, listener.protocol, sasl=sasl)
    context = client_context(listener.name, config.ssl_for(listener.name))
    return ClientSecurity(listener.name, listener.protocol, context, sasl)


def _inter_broker_login(config: BrokerConfig, listener: str) -> Callable[[], SaslClientMechanism]:
    """The client side this broker logs in to others with: the inter-broker mechanism's JAAS username and password."""
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
    entry = jaas_entry(config, listener, mechanism)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if entry is None or "username" not in entry.options or "password" not in entry.options:
        raise ConfigError(f'{key}: the inter-broker login needs username="..." password="..."')
    return sasl_client_factory(mechanism, entry.options["username"], entry.options["password"])
