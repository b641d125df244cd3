"""Proxy settings under Kafka's names where Kafka has one: listeners, bootstrap servers, timeouts, TLS, SASL.

A proxy node reads them from ``--config proxy.properties`` and its flags (flags win); an unknown
key stops it with a one-line reason, as it does a broker.

Security has two sides. Towards clients the proxy is a broker: its one listener's protocol comes
from ``listener.security.protocol.map`` (by default each protocol's name is its own), an SSL or
SASL_SSL listener takes the broker's ``ssl.*`` settings (PEM keystore, ``ssl.client.auth`` for mTLS,
…), and a SASL listener the broker's ``sasl.enabled.mechanisms``, JAAS entries
(``listener.name.<l>.<mechanism>.sasl.jaas.config``), ``sasl.oauthbearer.*`` and session settings,
each also per listener as a broker takes them (but ``max.connections``), read by the broker's own
code. SCRAM's users are in the coordination store, so a SCRAM listener needs ``coordination.url``.
Towards the brokers it is a client: ``broker.security.protocol`` and the same ``ssl.*`` settings
under ``broker.`` (a truststore for the brokers' certificates; a keystore if they ask for one), and
for SASL ``broker.sasl.mechanism`` (PLAIN or SCRAM) with the proxy's own login in
``broker.sasl.jaas.config``, Kafka client style. Nothing is served or sent with less protection than
configured: what cannot be honoured stops the proxy in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .admin import ADMIN_CONFIG_LIST, AdminListener, parse_admin_listeners
from .broker import Listener, parse_listener
from .definitions import ConfigDef, ConfigError, ConfigType, at_least, one_of, parse_host_port, read_properties_file
from .listeners import (
    DEFAULT_PROTOCOL_MAP,
    JAAS_CONFIGS,
    REFUSED_MECHANISMS,
    SASL_CONFIG_LIST,
    SSL_CONFIG_LIST,
    SSL_CONFIGS,
    SecurityProtocol,
    check_ssl_settings,
    listener_override,
    listener_value,
    override_key,
    parse_protocol_map,
    sasl_mechanisms,
    ssl_settings,
)
from .oauthbearer import OAUTHBEARER_CONFIG_LIST, OAUTHBEARER_LISTENER_CONFIGS

__all__ = ["PROXY_CONFIGS", "ProxyConfig", "load_proxy_config"]

_S, _I, _P, _LIST = ConfigType.STRING, ConfigType.INT, ConfigType.PASSWORD, ConfigType.LIST

#: The proxy's client side towards the brokers takes the ssl.* settings under this prefix.
BROKER_PREFIX = "broker."
#: What only a server side has: the brokers never present the proxy with client certificates to map.
_SERVER_ONLY = frozenset({"ssl.client.auth", "ssl.principal.mapping.rules"})
_BROKER_SSL_LIST = tuple(
    dataclasses.replace(definition, name=BROKER_PREFIX + definition.name, doc=f"Towards the brokers: {definition.doc}")
    for definition in SSL_CONFIG_LIST
    if definition.name not in _SERVER_ONLY
)
#: What the proxy logs in to the brokers with (OAUTHBEARER would need a token from an identity provider).
BROKER_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Mechanisms whose users are in the coordination store.
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: What ``listener.name.<l>.`` may prefix on the proxy: what it does for a broker's listener, but max.connections.
PROXY_LISTENER_CONFIGS: dict[str, ConfigDef] = {
    **SSL_CONFIGS,
    "sasl.enabled.mechanisms": SASL_CONFIG_LIST[0],
    **JAAS_CONFIGS,
    **OAUTHBEARER_LISTENER_CONFIGS,
}

PROXY_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("listeners", _LIST, ["PLAINTEXT://127.0.0.1:9192"], "Where the proxy listens for clients."),
        ConfigDef("advertised.listeners", _LIST, [], "The address clients are told to use; defaults to listeners."),
        ConfigDef("bootstrap.servers", _LIST, [], "Brokers of the cluster to read its metadata from first."),
        ConfigDef("broker.rack", _S, None, "This proxy node's rack: it routes to brokers in it first."),
        ConfigDef("proxy.peers", _LIST, [], "Every proxy node's advertised HOST:PORT[@RACK], this one included."),
        ConfigDef("coordination.url", _S, None, "Find the other proxy nodes through this coordination store "
                  "(the group 'proxies') instead of proxy.peers."),
        ConfigDef("proxy.node.id", _I, -1, "This node's id in the group 'proxies'; -1: the hostname's ordinal "
                  "(name-N)."),
        ConfigDef("proxy.session.timeout.ms", _I, 6_000, "A dead proxy node leaves the group within this long.",
                  at_least(1_000)),
        ConfigDef("request.timeout.ms", _I, 30_000, "How long a broker may take to answer.", at_least(1)),
        ConfigDef("socket.connection.setup.timeout.ms", _I, 10_000, "How long connecting to a broker may take.",
                  at_least(1)),
        ConfigDef("socket.request.max.bytes", _I, 104_857_600, "The largest request a client may send.", at_least(1)),
        ConfigDef("socket.listen.backlog.size", _I, 1024, "Client connections the kernel queues until the proxy "
                  "accepts them (Kafka's broker default is 50; see the broker's setting).", at_least(1)),
        ConfigDef("metadata.max.age.ms", _I, 30_000, "How often the proxy reads the cluster's metadata anyway.",
                  at_least(100)),
        ConfigDef("proxy.peer.probe.interval.ms", _I, 2_000, "How often the other proxy nodes are probed.",
                  at_least(10)),
        ConfigDef("proxy.drain.timeout.ms", _I, 30_000, "How long a stopping proxy waits for answers in flight.",
                  at_least(0)),
        ConfigDef("proxy.hot.restart.socket", _S, None, "A Unix socket path (in a directory private to this user) "
                  "on which the proxy hands its listening sockets to a new process started with --takeover, then "
                  "drains and exits: a restart that refuses no client. Unset: no hot restarts."),
        ConfigDef("max.in.flight.requests.per.connection", _I, 100,
                  "Requests of one client connection the proxy handles at once before it stops reading.", at_least(1)),
        *ADMIN_CONFIG_LIST,
        ConfigDef("listener.security.protocol.map", _S, DEFAULT_PROTOCOL_MAP,
                  "The client listener's name to its security protocol."),
        *SSL_CONFIG_LIST,
        *(d for d in SASL_CONFIG_LIST if d.name != "sasl.mechanism.inter.broker.protocol"),
        *OAUTHBEARER_CONFIG_LIST,
        ConfigDef("broker.security.protocol", _S, "PLAINTEXT", "How the proxy connects to the brokers: PLAINTEXT, "
                  "SSL, SASL_PLAINTEXT or SASL_SSL (bootstrap.servers names the brokers' listener of that protocol).",
                  one_of(*(protocol.value for protocol in SecurityProtocol))),
        *_BROKER_SSL_LIST,
        ConfigDef("broker.sasl.mechanism", _S, "GSSAPI", "What the proxy logs in to the brokers with: PLAIN, "
                  "SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is refused)."),
        ConfigDef("broker.sasl.jaas.config", _P, None, "The proxy's own login to the brokers, as a Kafka client's "
                  "sasl.jaas.config: PlainLoginModule or ScramLoginModule with username and password. Once a client "
                  "has authenticated, its connections to the brokers name it as the authorization id."),
    ]
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def listener(self) -> Listener:
        return parse_listener(self["listeners"][0], "listeners")

    @property
    def protocol(self) -> SecurityProtocol:
        """The client listener's protocol (``listener.security.protocol.map``; by default its name).

        Raises:
            ConfigError: a listener name the map does not have, or a malformed map.
        """
        name = self.listener.name
        protocol = parse_protocol_map(self["listener.security.protocol.map"]).get(name)
        if protocol is None:
            raise ConfigError(f"listeners: listener name {name} is not in listener.security.protocol.map")
        return protocol

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        """The SASL mechanisms the client listener offers; () unless it is SASL.

        Raises:
            ConfigError: none, GSSAPI, or an unknown one (the broker's checks).
        """
        if not self.protocol.uses_sasl:
            return ()
        return sasl_mechanisms(self, self.listener.name, self.values.get)

    @property
    def ssl(self) -> dict[str, Any]:
        """The client listener's ssl.* settings (its ``listener.name.<l>.ssl.*`` first)."""
        return self.ssl_for(self.listener.name)

    def ssl_for(self, listener: str) -> dict[str, Any]:
        return ssl_settings(self, listener, self.values.get)

    def listener_value(self, listener: str, key: str) -> Any:
        """A per-listener setting (a JAAS entry, an OAUTHBEARER setting) as the listener sees it."""
        return listener_value(self, listener, key, self.values.get)

    @property
    def broker_ssl(self) -> dict[str, Any]:
        """The ssl.* settings the proxy connects to the brokers with (``broker.ssl.*``, unprefixed)."""
        return {
            key: self[BROKER_PREFIX + key] if key not in _SERVER_ONLY else definition.default
            for key, definition in SSL_CONFIGS.items()
        }

    @property
    def broker_protocol(self) -> SecurityProtocol:
        return SecurityProtocol(self["broker.security.protocol"])

    @property
    def broker_uses_tls(self) -> bool:
        return self.broker_protocol.uses_tls

    @property
    def broker_sasl_mechanism(self) -> str | None:
        """What the proxy logs in to the brokers with; None unless ``broker.security.protocol`` is SASL.

        Raises:
            ConfigError: GSSAPI, OAUTHBEARER or an unknown mechanism, or no ``broker.sasl.jaas.config``.
        """
        if not self.broker_protocol.uses_sasl:
            return None
        key, mechanism = "broker.sasl.mechanism", str(self["broker.sasl.mechanism"]).upper()
        hint = f"use {', '.join(BROKER_SASL_MECHANISMS)}"
        if mechanism in REFUSED_MECHANISMS:
            raise ConfigError(f"{key}: {REFUSED_MECHANISMS[mechanism]}; {hint}")
        if mechanism == "OAUTHBEARER":
            raise ConfigError(f"{key}: the proxy has no token to log in to the brokers with OAUTHBEARER; {hint}")
        if mechanism not in BROKER_SASL_MECHANISMS:
            raise ConfigError(f"{key}: unknown SASL mechanism {mechanism}; {hint}")
        if not self["broker.sasl.jaas.config"]:
            raise ConfigError(
                f"broker.sasl.jaas.config: broker.security.protocol={self.broker_protocol.value} needs the proxy's "
                'own login (... required username="..." password="...";)'
            )
        return mechanism

    @property
    def advertised(self) -> Listener | None:
        uris = self["advertised.listeners"]
        return parse_listener(uris[0], "advertised.listeners") if uris else None

    @property
    def admin_listener(self) -> AdminListener | None:
        """Where the admin HTTP endpoint binds; None when it is off."""
        return parse_admin_listeners(self["admin.listeners"])

    @property
    def hot_restart_socket(self) -> Path | None:
        """Where this proxy serves hot restarts (and a ``--takeover`` finds the running one); None: nowhere."""
        value = self["proxy.hot.restart.socket"]
        return Path(value) if value else None

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [_host_port(text, "bootstrap.servers") for text in self["bootstrap.servers"]]


def _host_port(text: str, key: str) -> tuple[str, int]:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def load_proxy_config(file: Path | None = None, overrides: Mapping[str, str] | None = None) -> ProxyConfig:
    """Defaults, then the properties file, then the flags.

    Raises:
        ConfigError: an unknown key, an unreadable file, an invalid value, or no bootstrap servers.
    """
    raw = read_properties_file(file) if file is not None else {}
    raw.update({key: (value, "command line") for key, value in (overrides or {}).items()})
    values = {key: definition.default for key, definition in PROXY_CONFIGS.items()}
    for key, (value, origin) in raw.items():
        stored, definition = _definition(key, origin)
        try:
            values[stored] = definition.parse(value)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (from {origin})") from None
    config = ProxyConfig(values)
    if len(config["listeners"]) != 1:
        raise ConfigError("listeners: exactly one listener is supported")
    listener = config.listener
    if config.protocol.uses_tls:
        check_ssl_settings(listener.name, config.ssl)
    scram = [mechanism for mechanism in config.sasl_mechanisms if mechanism in _SCRAM]
    if scram and not config["coordination.url"]:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {scram[0]} on the proxy needs coordination.url (its users' credentials are "
            "in the coordination store), not proxy.peers alone"
        )
    if config.broker_uses_tls:
        _check_broker_ssl(config.broker_ssl)
    config.broker_sasl_mechanism  # noqa: B018 - checked now so that a bad value stops the proxy at once
    config.admin_listener  # noqa: B018 - likewise
    advertised = config.advertised
    if advertised is not None and advertised.port == 0:
        raise ConfigError("advertised.listeners: port 0 cannot be advertised")
    if not config.bootstrap:
        raise ConfigError("bootstrap.servers: at least one broker is required")
    if config["coordination.url"] and config["proxy.peers"]:
        raise ConfigError("proxy.peers and coordination.url: set one way of finding the other proxy nodes, not both")
    return config


def _definition(key: str, origin: str) -> tuple[str, ConfigDef]:
    """Where ``key``'s value is kept and what parses it: a setting, or one for the listener alone.

    Raises:
        ConfigError: the proxy takes no such setting.
    """
    definition = PROXY_CONFIGS.get(key)
    if definition is not None:
        return key, definition
    try:
        override = listener_override(key)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (from {origin})") from None
    if override is None or override[1] not in PROXY_LISTENER_CONFIGS:
        raise ConfigError(f"unknown setting {key!r} (from {origin})")
    return override_key(*override), PROXY_LISTENER_CONFIGS[override[1]]


def _check_broker_ssl(settings: Mapping[str, Any]) -> None:
    """The client side needs no keystore (only brokers that ask for a certificate do), but PEM stores only."""
    for store in ("keystore", "truststore"):
        kind = settings[f"ssl.{store}.type"]
        given = settings[f"ssl.{store}.location"] is not None or any(
            settings[key] is not None
            for key in (f"ssl.{store}.certificates", f"ssl.{store}.key", f"ssl.{store}.certificate.chain")
            if key in settings
        )
        if given and kind.upper() != "PEM":
            raise ConfigError(f"broker.ssl.{store}.type: barnabas reads PEM stores only, not {kind}")
