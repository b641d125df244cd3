"""Listeners as Kafka configures them: names, security protocols, advertised endpoints, the inter-broker listener.

Rules this module keeps (Kafka's KafkaConfig listener checks and ListenerName):

- ``listeners`` is a list of ``NAME://host:port``. The name says nothing by itself:
  ``listener.security.protocol.map`` gives each name its protocol (by default the four protocols,
  each named after itself). A name appears once; a port appears once unless it is 0 or the hosts
  are of different address families (IPv4 and IPv6).
- A protocol barnabas cannot serve stops the broker with a one-line reason; nothing is ever served
  with less protection than configured.
- A SASL_PLAINTEXT or SASL_SSL listener offers ``sasl.enabled.mechanisms``, or its own
  ``listener.name.<name>.sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
  OAUTHBEARER. Kafka's default, GSSAPI (Kerberos), is refused with a one-line reason, so a SASL
  listener needs the setting. A mechanism's JAAS entry is ``listener.name.<name>.<mechanism>.sasl.jaas.config``
  (the mechanism lower-cased); it is read and checked with the listener's security
  (``barnabas.security``), as are OAUTHBEARER's ``sasl.oauthbearer.*`` settings (``oauthbearer.py``).
  With a SASL inter-broker listener, ``sasl.mechanism.inter.broker.protocol`` (Kafka's default GSSAPI
  refused too) must be one of that listener's mechanisms, and not OAUTHBEARER: this broker has no
  token to log in with.
- ``advertised.listeners`` names a subset of ``listeners``, each once, never at port 0. A listener it
  does not name is advertised as it is bound (its host, else this machine's name; its bound port).
- The inter-broker listener (what followers and other broker-to-broker clients connect on) is
  ``inter.broker.listener.name``, or the listener named after ``security.inter.broker.protocol``; the
  two are never set together (Kafka refuses that too). With neither set, the listener named
  PLAINTEXT, else the only listener there is.
- A listener's ``ssl.*`` and ``sasl.enabled.mechanisms`` settings may be overridden for it alone by
  ``listener.name.<name>.<setting>`` (the name lower-cased, Kafka's ListenerName.configPrefix).
  An SSL listener needs a keystore: a PEM
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

from .definitions import ConfigDef, ConfigError, ConfigType, at_least, one_of
from .limits import LISTENER_LIMIT_CONFIGS
from .oauthbearer import MECHANISM_PREFIX, OAUTHBEARER_LISTENER_CONFIGS

__all__ = [
    "LISTENER_CONFIGS",
    "LISTENER_OVERRIDE_PREFIX",
    "SASL_CONFIG_LIST",
    "SSL_CONFIG_LIST",
    "Listener",
    "ListenerConfig",
    "ListenerSettings",
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
_I = ConfigType.INT
_L = ConfigType.LONG
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

#: The SASL mechanisms barnabas serves, and those Kafka has that it refuses (with why).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
REFUSED_MECHANISMS = {
    "GSSAPI": "GSSAPI (Kerberos, Kafka's default) is not supported",
}
#: What a broker cannot log in to another with (it would need a token from an identity provider).
NO_INTER_BROKER_LOGIN = {"OAUTHBEARER": "OAUTHBEARER cannot be the inter-broker mechanism (use PLAIN or SCRAM)"}
_MECHANISM_HINT = f"use {', '.join(SASL_MECHANISMS)}"

#: Kafka's SASL broker settings that barnabas applies, with Kafka's defaults.
SASL_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("sasl.enabled.mechanisms", _LIST, ["GSSAPI"],
              "Mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's default "
              "GSSAPI is refused, so a SASL listener needs this)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI",
              "The mechanism this broker authenticates with on a SASL inter-broker listener."),
    ConfigDef("connections.max.reauth.ms", _L, 0,
              "A SASL session lasts this long; the client must re-authenticate before (KIP-368). 0: forever.",
              at_least(0)),
    ConfigDef("connection.failed.authentication.delay.ms", _I, 100,
              "A failed authentication is answered and the connection closed after this delay (KIP-306).",
              at_least(0)),
    ConfigDef("sasl.server.max.receive.size", _I, 524288,
              "Largest frame a SASL connection may send before it has authenticated.", at_least(1)),
)  # fmt: skip

#: ``listener.name.<name>.<mechanism>.sasl.jaas.config``: per listener only, as in Kafka.
JAAS_CONFIGS: dict[str, ConfigDef] = {
    f"{mechanism.lower()}.sasl.jaas.config": ConfigDef(
        f"{mechanism.lower()}.sasl.jaas.config", _P, None, f"The listener's JAAS entry for {mechanism}."
    )
    for mechanism in SASL_MECHANISMS
}

#: Every setting a listener may override for itself (``listener.name.<name>.<setting>``).
LISTENER_CONFIGS: dict[str, ConfigDef] = {
    **SSL_CONFIGS,
    "sasl.enabled.mechanisms": SASL_CONFIG_LIST[0],
    **JAAS_CONFIGS,
    **LISTENER_LIMIT_CONFIGS,
    **OAUTHBEARER_LISTENER_CONFIGS,
}


class SecurityProtocol(enum.Enum):
    """Kafka's security protocols (org.apache.kafka.common.security.auth.SecurityProtocol)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


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
    #: The SASL mechanisms it offers (SASL_PLAINTEXT and SASL_SSL only).
    sasl_mechanisms: tuple[str, ...] = ()


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


class ListenerSettings(Settings, Protocol):
    """What building a SASL listener reads: settings, and each as one listener sees it (a BrokerConfig, a
    ProxyConfig: the proxy's client listener is built by the broker's code)."""

    def listener_value(self, listener: str, key: str) -> Any: ...

    def ssl_for(self, listener: str) -> dict[str, Any]: ...


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
    """``(listener name, setting)`` of a ``listener.name.<name>.<setting>`` key, None for any other key.

    The setting is one of :data:`LISTENER_CONFIGS`: an ssl.* one, sasl.enabled.mechanisms, a
    mechanism's sasl.jaas.config, max.connections or an OAUTHBEARER setting (``oauthbearer.py``).

    Raises:
        ConfigError: the key has the prefix but names no setting barnabas takes per listener.
    """
    if not key.startswith(LISTENER_OVERRIDE_PREFIX):
        return None
    name, _, base = key[len(LISTENER_OVERRIDE_PREFIX) :].partition(".")
    mechanism = base.partition(".")[0].upper()
    if base.endswith(".sasl.jaas.config") and mechanism in REFUSED_MECHANISMS:
        raise ConfigError(f"{key}: {REFUSED_MECHANISMS[mechanism]}; {_MECHANISM_HINT}")
    if not name or base not in LISTENER_CONFIGS:
        raise ConfigError(
            f"unknown setting {key!r}: listener.name.<listener>. takes the ssl.* settings, sasl.enabled.mechanisms, "
            "<mechanism>.sasl.jaas.config, max.connections and the [oauthbearer.]sasl.oauthbearer.* settings"
        )
    return name.upper(), base


def override_key(listener: str, base: str) -> str:
    """The key that overrides ``base`` for ``listener`` alone."""
    return f"{LISTENER_OVERRIDE_PREFIX}{listener.lower()}.{base}"


def listener_value(settings: Settings, listener: str, key: str, overrides: Callable[[str], Any | None]) -> Any:
    """``key`` as ``listener`` sees it: its own override, else the broker-wide value (None for per-listener keys)."""
    own = overrides(override_key(listener, key))
    if own is not None:
        return own
    per_listener = key in JAAS_CONFIGS or key.startswith(MECHANISM_PREFIX)
    return None if per_listener else settings[key]


def sasl_mechanisms(settings: Settings, listener: str, overrides: Callable[[str], Any | None]) -> tuple[str, ...]:
    """The SASL mechanisms ``listener`` offers, checked.

    Raises:
        ConfigError: none, GSSAPI (one line, with what to use), or an unknown one.
    """
    own = overrides(override_key(listener, "sasl.enabled.mechanisms"))
    key = override_key(listener, "sasl.enabled.mechanisms") if own is not None else "sasl.enabled.mechanisms"
    mechanisms = tuple(str(m).upper() for m in (own if own is not None else settings["sasl.enabled.mechanisms"]))
    if not mechanisms:
        raise ConfigError(f"{key}: listener {listener} uses SASL but enables no mechanism; {_MECHANISM_HINT}")
    for mechanism in mechanisms:
        if mechanism in REFUSED_MECHANISMS:
            raise ConfigError(f"{key}: {REFUSED_MECHANISMS[mechanism]}; {_MECHANISM_HINT}")
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"{key}: unknown SASL mechanism {mechanism}; {_MECHANISM_HINT}")
    if len(set(mechanisms)) != len(mechanisms):
        raise ConfigError(f"{key}: a mechanism appears twice")
    return mechanisms


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
        mechanisms = sasl_mechanisms(settings, listener.name, overrides) if protocol.uses_sasl else ()
        listeners.append(
            ListenerConfig(
                listener.name, listener.host, listener.port, protocol, advertised.get(listener.name), mechanisms
            )
        )
    for configured in listeners:  # the inter-broker listener among them: its client side uses the same settings
        if configured.protocol.uses_tls:
            check_ssl_settings(configured.name, ssl_settings(settings, configured.name, overrides))
    setup = ListenerSetup(tuple(listeners), _inter_broker(settings, listeners))
    _check_inter_broker_sasl(settings, setup.inter_broker_listener)
    return setup


def _check_inter_broker_sasl(settings: Settings, listener: ListenerConfig) -> None:
    """A SASL inter-broker listener: this broker must log in with a mechanism that listener offers."""
    if not listener.protocol.uses_sasl:
        return
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = str(settings[key]).upper()
    if mechanism in REFUSED_MECHANISMS:
        raise ConfigError(f"{key}: {REFUSED_MECHANISMS[mechanism]}; {_MECHANISM_HINT}")
    if mechanism in NO_INTER_BROKER_LOGIN:
        raise ConfigError(f"{key}: {NO_INTER_BROKER_LOGIN[mechanism]}")
    if mechanism not in listener.sasl_mechanisms:
        raise ConfigError(
            f"{key}: {mechanism} is not enabled on the inter-broker listener {listener.name} "
            f"({', '.join(listener.sasl_mechanisms)})"
        )


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
