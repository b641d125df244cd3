"""Listeners as Kafka configures them: names, security protocols, advertised endpoints, the inter-broker listener.

Rules this module keeps (Kafka's KafkaConfig listener checks and ListenerName):

- ``listeners`` is a list of ``NAME://host:port``. The name says nothing by itself:
  ``listener.security.protocol.map`` gives each name its protocol (by default the four protocols,
  each named after itself). A name appears once; a port appears once unless it is 0 or the hosts
  are of different address families (IPv4 and IPv6).
- A protocol barnabas cannot serve stops the broker with a one-line reason; nothing is ever served
  with less protection than configured. SASL_PLAINTEXT and SASL_SSL are refused until SASL exists.
- ``advertised.listeners`` names a subset of ``listeners``, each once, never at port 0. A listener it
  does not name is advertised as it is bound (its host, else this machine's name; its bound port).
- The inter-broker listener (what followers and other broker-to-broker clients connect on) is
  ``inter.broker.listener.name``, or the listener named after ``security.inter.broker.protocol``; the
  two are never set together (Kafka refuses that too). With neither set, the listener named
  PLAINTEXT, else the only listener there is.
- A listener's ``ssl.*`` setting may be overridden for it alone by ``listener.name.<name>.ssl.*``
  (the name lower-cased, Kafka's ListenerName.configPrefix). An SSL listener needs a keystore: a PEM
  file (``ssl.keystore.location``) or inline PEM (``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key``). JKS and PKCS12 stores are refused with a one-line reason.

Reading the key and certificate files happens later, when the broker builds its TLS contexts
(``barnabas.security``); this module checks only what the settings say.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .definitions import ConfigDef, ConfigError, ConfigType, one_of

__all__ = [
    "LISTENER_OVERRIDE_PREFIX",
    "SSL_CONFIG_LIST",
    "Listener",
    "ListenerConfig",
    "ListenerSetup",
    "SecurityProtocol",
    "listener_override",
    "parse_listener",
    "resolve_listeners",
    "ssl_settings",
]

LISTENER_OVERRIDE_PREFIX = "listener.name."
#: Kafka's default listener.security.protocol.map (without KRaft's CONTROLLER).
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")

_S = ConfigType.STRING
_P = ConfigType.PASSWORD
_LIST = ConfigType.LIST

#: Kafka's ssl.* broker settings that barnabas applies, with Kafka's defaults; each may be overridden per listener.
SSL_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("ssl.keystore.type", _S, "JKS", "Keystore format; barnabas reads PEM only (Kafka's default is JKS)."),
    ConfigDef("ssl.keystore.location", _S, None, "A PEM file holding the private key and its certificate chain."),
    ConfigDef("ssl.keystore.password", _P, None, "Password of a JKS or PKCS12 keystore; not used with PEM."),
    ConfigDef("ssl.keystore.certificate.chain", _P, None, "Inline PEM certificate chain (with ssl.keystore.key)."),
    ConfigDef("ssl.keystore.key", _P, None, "Inline PEM private key (with ssl.keystore.certificate.chain)."),
    ConfigDef("ssl.key.password", _P, None, "Password of an encrypted private key."),
    ConfigDef("ssl.truststore.type", _S, "JKS", "Truststore format; barnabas reads PEM only."),
    ConfigDef("ssl.truststore.location", _S, None, "A PEM file of trusted CA certificates."),
    ConfigDef("ssl.truststore.password", _P, None, "Password of a JKS or PKCS12 truststore; not used with PEM."),
    ConfigDef("ssl.truststore.certificates", _P, None, "Inline PEM trusted CA certificates."),
    ConfigDef("ssl.protocol", _S, "TLSv1.3", "The newest TLS version to negotiate.",
              one_of("TLSv1.2", "TLSv1.3", "TLS")),
    ConfigDef("ssl.enabled.protocols", _LIST, list(TLS_VERSIONS), "TLS versions accepted.", one_of(*TLS_VERSIONS)),
    ConfigDef("ssl.cipher.suites", _LIST, [], "Cipher suites (IANA or OpenSSL names); empty means OpenSSL's."),
    ConfigDef("ssl.endpoint.identification.algorithm", _S, "https",
              "https checks the host name in a broker's certificate when this broker connects to it; empty does not.",
              lambda value: None if value.lower() in ("https", "") else f"{value!r} is not one of https, (empty)"),
    ConfigDef("ssl.client.auth", _S, "none", "Client certificates: none, requested or required (mTLS).",
              one_of("none", "requested", "required")),
    ConfigDef("ssl.principal.mapping.rules", _S, "DEFAULT",
              "Rules mapping a client certificate's distinguished name to a principal (RULE:…/…/[LU], DEFAULT)."),
)  # fmt: skip

SSL_CONFIGS: dict[str, ConfigDef] = {definition.name: definition for definition in SSL_CONFIG_LIST}


class SecurityProtocol(enum.Enum):
    """Kafka's security protocols (org.apache.kafka.common.security.auth.SecurityProtocol)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` entry of listeners or advertised.listeners."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """A listener to bind: its name, address and protocol, and what advertised.listeners says of it."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    #: Its advertised.listeners entry, or None to advertise it as bound.
    advertised: Listener | None = None


@dataclass(frozen=True, slots=True)
class ListenerSetup:
    """Every listener in the order of ``listeners``, and the name of the inter-broker one."""

    listeners: tuple[ListenerConfig, ...]
    inter_broker: str

    def get(self, name: str) -> ListenerConfig:
        return next(listener for listener in self.listeners if listener.name == name)

    @property
    def inter_broker_listener(self) -> ListenerConfig:
        return self.get(self.inter_broker)


class Settings(Protocol):
    """What resolving listeners reads: settings by Kafka's names (a BrokerConfig)."""

    def __getitem__(self, key: str) -> Any: ...


_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


def parse_listener(uri: str, key: str) -> Listener:
    """Parse ``NAME://host:port`` (empty host means every interface, as in Kafka).

    Raises:
        ConfigError: malformed URI or port.
    """
    match = _LISTENER.match(uri.strip())
    if not match:
        raise ConfigError(f"{key}: {uri!r} is not of the form NAME://host:port")
    port = int(match["port"])
    if port > 65535:
        raise ConfigError(f"{key}: port {port} is out of range")
    return Listener(match["name"].upper(), match["host"].strip("[]"), port)


def listener_override(key: str) -> tuple[str, str] | None:
    """``(listener name, ssl key)`` of a ``listener.name.<name>.ssl.*`` key, None for any other key.

    Raises:
        ConfigError: the key has the prefix but names no ssl setting barnabas knows.
    """
    if not key.startswith(LISTENER_OVERRIDE_PREFIX):
        return None
    name, _, base = key[len(LISTENER_OVERRIDE_PREFIX) :].partition(".")
    if not name or base not in SSL_CONFIGS:
        raise ConfigError(f"unknown setting {key!r}: listener.name.<listener>. takes the ssl.* settings only")
    return name.upper(), base


def override_key(listener: str, base: str) -> str:
    """The key that overrides ``base`` for ``listener`` alone."""
    return f"{LISTENER_OVERRIDE_PREFIX}{listener.lower()}.{base}"


def ssl_settings(settings: Settings, listener: str, overrides: Callable[[str], Any | None]) -> dict[str, Any]:
    """Every ssl.* value as ``listener`` sees it: its own override, else the broker-wide value.

    Args:
        settings: the broker's settings.
        listener: the listener's name.
        overrides: looks up a full ``listener.name.…`` key; None when it is not set.
    """
    resolved = {}
    for key in SSL_CONFIGS:
        own = overrides(override_key(listener, key))
        resolved[key] = own if own is not None else settings[key]
    return resolved


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, comma-separated.

    Raises:
        ConfigError: a malformed pair, a name given twice or an unknown protocol.
    """
    key = "listener.security.protocol.map"
    mapping: dict[str, SecurityProtocol] = {}
    for pair in (item.strip() for item in text.split(",")):
        if not pair:
            continue
        name, sep, protocol = (part.strip() for part in pair.partition(":"))
        if not sep or not name or not protocol:
            raise ConfigError(f"{key}: {pair!r} is not of the form NAME:PROTOCOL")
        if name.upper() in mapping:
            raise ConfigError(f"{key}: listener name {name} appears twice")
        mapping[name.upper()] = _protocol(protocol, key)
    return mapping


def _protocol(text: str, key: str) -> SecurityProtocol:
    try:
        return SecurityProtocol(text.upper())
    except ValueError:
        known = ", ".join(p.value for p in SecurityProtocol)
        raise ConfigError(f"{key}: unknown security protocol {text!r} (one of {known})") from None


def resolve_listeners(settings: Settings, overrides: Callable[[str], Any | None]) -> ListenerSetup:
    """Check listeners, advertised.listeners, the protocol map and the inter-broker listener together.

    Raises:
        ConfigError: any inconsistency, or a protocol or store barnabas cannot serve (one line).
    """
    protocols = parse_protocol_map(settings["listener.security.protocol.map"])
    bound = [parse_listener(uri, "listeners") for uri in settings["listeners"]]
    if not bound:
        raise ConfigError("listeners: at least one listener is required")
    _check_distinct(bound)
    advertised = _advertised(settings, {listener.name for listener in bound})
    listeners = []
    for listener in bound:
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(f"listeners: listener name {listener.name} is not in listener.security.protocol.map")
        if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            raise ConfigError(f"listeners: {listener.name} uses {protocol.value}, but SASL is not supported yet")
        listeners.append(
            ListenerConfig(listener.name, listener.host, listener.port, protocol, advertised.get(listener.name))
        )
    for configured in listeners:  # the inter-broker listener among them: its client side uses the same settings
        if configured.protocol.uses_tls:
            check_ssl_settings(configured.name, ssl_settings(settings, configured.name, overrides))
    return ListenerSetup(tuple(listeners), _inter_broker(settings, listeners))


def _check_distinct(listeners: list[Listener]) -> None:
    seen_names: set[str] = set()
    seen_ports: dict[int, Listener] = {}
    for listener in listeners:
        if listener.name in seen_names:
            raise ConfigError(f"listeners: listener name {listener.name} appears twice")
        seen_names.add(listener.name)
        other = seen_ports.get(listener.port)
        families = {_family(other.host), _family(listener.host)} if other is not None else set()
        if other is not None and listener.port != 0 and families != {4, 6}:
            raise ConfigError(f"listeners: {other.name} and {listener.name} both use port {listener.port}")
        seen_ports[listener.port] = listener


def _family(host: str) -> int | None:
    """4 or 6 for an IP address, None for a host name or every interface (which overlaps both)."""
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _advertised(settings: Settings, bound_names: set[str]) -> dict[str, Listener]:
    advertised: dict[str, Listener] = {}
    for uri in settings["advertised.listeners"] or ():
        listener = parse_listener(uri, "advertised.listeners")
        if listener.name not in bound_names:
            raise ConfigError(f"advertised.listeners: {listener.name} is not one of the listeners")
        if listener.name in advertised:
            raise ConfigError(f"advertised.listeners: listener name {listener.name} appears twice")
        if listener.port == 0:
            raise ConfigError("advertised.listeners: port 0 cannot be advertised")
        advertised[listener.name] = listener
    return advertised


def _inter_broker(settings: Settings, listeners: list[ListenerConfig]) -> str:
    name = settings["inter.broker.listener.name"]
    protocol = settings["security.inter.broker.protocol"]
    names = [listener.name for listener in listeners]
    if name is not None and protocol is not None:
        raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol cannot both be set")
    if name is not None:
        if name.upper() not in names:
            raise ConfigError(f"inter.broker.listener.name: {name} is not one of the listeners ({', '.join(names)})")
        return str(name).upper()
    if protocol is not None:
        wanted = _protocol(protocol, "security.inter.broker.protocol").value
        if wanted not in names:
            raise ConfigError(f"security.inter.broker.protocol: no listener is named {wanted}")
        return wanted
    if SecurityProtocol.PLAINTEXT.value in names:
        return SecurityProtocol.PLAINTEXT.value
    if len(names) == 1:
        return names[0]
    raise ConfigError(
        f"inter.broker.listener.name: set it to one of the listeners ({', '.join(names)}); none is named PLAINTEXT"
    )


def check_ssl_settings(listener: str, ssl: dict[str, Any]) -> None:
    """Refuse ssl.* values barnabas cannot honour for the TLS listener ``listener``, before any file is read.

    Args:
        listener: the listener's name, for the message.
        ssl: its settings (:func:`ssl_settings`).

    Raises:
        ConfigError: a missing keystore, an unsupported store type or TLS version.
    """
    where = f"listener {listener}"
    has_file = ssl["ssl.keystore.location"] is not None
    has_inline = ssl["ssl.keystore.certificate.chain"] is not None or ssl["ssl.keystore.key"] is not None
    if not (has_file or has_inline):
        raise ConfigError(
            f"{where}: SSL needs a keystore: set ssl.keystore.location, or ssl.keystore.certificate.chain and "
            "ssl.keystore.key"
        )
    _check_store_type(where, "ssl.keystore.type", ssl["ssl.keystore.type"])
    if has_file and has_inline:
        raise ConfigError(f"{where}: set ssl.keystore.location or the inline ssl.keystore.* PEM, not both")
    if has_inline and (ssl["ssl.keystore.certificate.chain"] is None or ssl["ssl.keystore.key"] is None):
        raise ConfigError(f"{where}: ssl.keystore.certificate.chain and ssl.keystore.key go together")
    if ssl["ssl.keystore.password"] is not None and (has_file or has_inline):
        # Kafka's DefaultSslEngineFactory refuses it too: a PEM keystore has only a key password.
        raise ConfigError(f"{where}: ssl.keystore.password does not apply to PEM; use ssl.key.password")
    has_trust = ssl["ssl.truststore.location"] is not None or ssl["ssl.truststore.certificates"] is not None
    if has_trust:
        _check_store_type(where, "ssl.truststore.type", ssl["ssl.truststore.type"])
    if ssl["ssl.truststore.location"] is not None and ssl["ssl.truststore.certificates"] is not None:
        raise ConfigError(f"{where}: set ssl.truststore.location or ssl.truststore.certificates, not both")
    if not ssl["ssl.enabled.protocols"]:
        raise ConfigError(f"{where}: ssl.enabled.protocols is empty")


def _check_store_type(where: str, key: str, value: str) -> None:
    kind = value.upper()
    if kind == "PEM":
        return
    if kind in ("JKS", "PKCS12"):
        raise ConfigError(f"{where}: {key}={value} is not supported; convert the store to PEM and set {key}=PEM")
    raise ConfigError(f"{where}: {key}={value} is unknown (barnabas reads PEM)")
