"""A proxy node's security on both sides, built once from its settings by the broker's own code.

Rules this module keeps:

- Towards clients the proxy's listener is built as a broker's is (``serving_security``): its TLS
  context and certificate-to-principal mapping, and on SASL its ``SaslListener`` (mechanisms,
  PLAIN's JAAS users, the OAUTHBEARER validator, session and failure settings). Every file is read
  now, so a setting that cannot be honoured stops the proxy before it listens.
- Towards the brokers the proxy logs in with its own user (``broker.sasl.jaas.config``: Kafka's
  PlainLoginModule or ScramLoginModule with ``username`` and ``password``). A connection made for a
  client names the client's principal as the SASL authorization id, so the brokers authorize the
  client (they must list the proxy's user in ``sasl.proxy.principals``); the proxy's own requests
  name no one and are its own.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from barnabas.client import SaslClientMechanism
from barnabas.config import ConfigError, ProxyConfig
from barnabas.security import ListenerSecurity, client_context
from barnabas.security.jaas import parse_jaas_config
from barnabas.security.listeners import SCRAM_LOGIN_MODULE, serving_security
from barnabas.security.plain import PLAIN, PLAIN_LOGIN_MODULE
from barnabas.security.sasl import sasl_client_factory

__all__ = ["BrokerLogin", "ProxySecurity", "proxy_security"]

#: A fresh client side of the proxy's login to a broker, acting for the principal named ("" for itself).
BrokerLogin = Callable[[str], SaslClientMechanism]


@dataclass(frozen=True, slots=True)
class ProxySecurity:
    """How the proxy serves its clients and how it reaches the brokers."""

    #: The client listener, as a broker's listener would serve it.
    listener: ListenerSecurity
    #: TLS towards the brokers (``broker.security.protocol`` SSL or SASL_SSL), else None.
    broker_tls: ssl.SSLContext | None
    #: The proxy's login to the brokers (``broker.security.protocol`` SASL_*), else None.
    broker_login: BrokerLogin | None = None
    #: The user it logs in as, else None.
    broker_user: str | None = None


def proxy_security(config: ProxyConfig) -> ProxySecurity:
    """Both sides' security, every key and certificate file read now.

    Raises:
        ConfigError: a file that does not load, a JAAS entry that does not parse or lacks what is needed (one line).
    """
    listener = config.listener
    serving = serving_security(config, listener.name, config.protocol, config.sasl_mechanisms)
    broker_tls = client_context("brokers", config.broker_ssl) if config.broker_uses_tls else None
    mechanism = config.broker_sasl_mechanism
    if mechanism is None:
        return ProxySecurity(serving, broker_tls)
    username, password = _broker_user(mechanism, str(config["broker.sasl.jaas.config"]))
    login: BrokerLogin = lambda authzid: sasl_client_factory(mechanism, username, password, authzid)()  # noqa: E731
    return ProxySecurity(serving, broker_tls, login, username)


def _broker_user(mechanism: str, jaas: str) -> tuple[str, str]:
    """The proxy's own user and password, from its Kafka-client-style JAAS entry.

    Raises:
        ConfigError: not one login module, not the mechanism's, or no username or password.
    """
    key = "broker.sasl.jaas.config"
    try:
        modules = parse_jaas_config(jaas)
    except ConfigError as exc:
        raise ConfigError(f"{key}: {str(exc).removeprefix('sasl.jaas.config: ')}") from None
    expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if len(modules) != 1 or modules[0].name != expected:
        raise ConfigError(f"{key}: broker.sasl.mechanism={mechanism} takes one {expected} entry")
    options = modules[0].options
    if not options.get("username") or not options.get("password"):
        raise ConfigError(f'{key}: the proxy\'s login needs username="..." password="..."')
    return options["username"], options["password"]
