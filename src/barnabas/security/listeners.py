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
  connection fails with (Kafka fails its authentication).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from barnabas.config import BrokerConfig
from barnabas.config.listeners import SecurityProtocol

from .principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper, distinguished_name
from .tls import client_context, server_context

__all__ = ["PLAINTEXT_CLIENT", "ClientSecurity", "ListenerSecurity", "client_security", "listener_security"]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one bound listener serves: its name and protocol, its TLS context, how it names clients."""

    name: str
    protocol: SecurityProtocol
    #: None for a PLAINTEXT listener.
    context: ssl.SSLContext | None = None
    mapper: SslPrincipalMapper | None = None

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


PLAINTEXT_CLIENT = ClientSecurity("PLAINTEXT", SecurityProtocol.PLAINTEXT)


def listener_security(config: BrokerConfig) -> tuple[ListenerSecurity, ...]:
    """Every listener's security, in the order of ``listeners``.

    Raises:
        ConfigError: a TLS setting cannot be honoured or a file does not load (one line).
    """
    result = []
    for listener in config.listener_setup.listeners:
        if not listener.protocol.uses_tls:
            result.append(ListenerSecurity(listener.name, listener.protocol))
            continue
        settings = config.ssl_for(listener.name)
        context = server_context(listener.name, settings)
        mapper = SslPrincipalMapper(settings["ssl.principal.mapping.rules"])
        result.append(ListenerSecurity(listener.name, listener.protocol, context, mapper))
    return tuple(result)


def client_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker's own clients (followers' fetchers) connect: the inter-broker listener's protocol.

    Raises:
        ConfigError: as :func:`listener_security`.
    """
    setup = config.listener_setup
    listener = setup.inter_broker_listener
    if not listener.protocol.uses_tls:
        return ClientSecurity(listener.name, listener.protocol)
    context = client_context(listener.name, config.ssl_for(listener.name))
    return ClientSecurity(listener.name, listener.protocol, context)
