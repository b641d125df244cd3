"""Proxy settings under Kafka's names where Kafka has one: listeners, bootstrap servers, timeouts, TLS.

A proxy node reads them from ``--config proxy.properties`` and its flags (flags win); an unknown
key stops it with a one-line reason, as it does a broker.

TLS has two sides. Towards clients the proxy is a broker: its listener is named for its protocol
(``PLAINTEXT://`` or ``SSL://``) and an SSL listener takes the broker's ``ssl.*`` settings (PEM
keystore, ``ssl.client.auth`` for mTLS, …). Towards the brokers it is a client:
``broker.security.protocol`` and the same ``ssl.*`` settings under ``broker.`` (a truststore for
the brokers' certificates; a keystore if they ask for one). A SASL protocol is refused in one line:
nothing is served or sent with less protection than configured.
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
from .listeners import SSL_CONFIG_LIST, SSL_CONFIGS, SecurityProtocol, check_ssl_settings

__all__ = ["PROXY_CONFIGS", "ProxyConfig", "load_proxy_config"]

_S, _I, _LIST = ConfigType.STRING, ConfigType.INT, ConfigType.LIST

#: The proxy's client side towards the brokers takes the ssl.* settings under this prefix.
BROKER_PREFIX = "broker."
#: What only a server side has: the brokers never present the proxy with client certificates to map.
_SERVER_ONLY = frozenset({"ssl.client.auth", "ssl.principal.mapping.rules"})
_BROKER_SSL_LIST = tuple(
    dataclasses.replace(definition, name=BROKER_PREFIX + definition.name, doc=f"Towards the brokers: {definition.doc}")
    for definition in SSL_CONFIG_LIST
    if definition.name not in _SERVER_ONLY
)

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
        ConfigDef("metadata.max.age.ms", _I, 30_000, "How often the proxy reads the cluster's metadata anyway.",
                  at_least(100)),
        ConfigDef("proxy.peer.probe.interval.ms", _I, 2_000, "How often the other proxy nodes are probed.",
                  at_least(10)),
        ConfigDef("proxy.drain.timeout.ms", _I, 30_000, "How long a stopping proxy waits for answers in flight.",
                  at_least(0)),
        ConfigDef("max.in.flight.requests.per.connection", _I, 100,
                  "Requests of one client connection the proxy handles at once before it stops reading.", at_least(1)),
        *ADMIN_CONFIG_LIST,
        *SSL_CONFIG_LIST,
        ConfigDef("broker.security.protocol", _S, "PLAINTEXT", "How the proxy connects to the brokers: PLAINTEXT "
                  "or SSL (then bootstrap.servers names the brokers' SSL listener).", one_of("PLAINTEXT", "SSL")),
        *_BROKER_SSL_LIST,
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
        """The client listener's protocol, from its name (``PLAINTEXT://`` or ``SSL://``).

        Raises:
            ConfigError: another name, or SASL (not supported yet).
        """
        name = self.listener.name
        try:
            protocol = SecurityProtocol(name)
        except ValueError:
            raise ConfigError(
                f"listeners: the proxy's listener is named for its protocol, PLAINTEXT:// or SSL://, not {name}://"
            ) from None
        if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            raise ConfigError(f"listeners: {name} needs SASL, which the proxy does not support yet")
        return protocol

    @property
    def ssl(self) -> dict[str, Any]:
        """The client listener's ssl.* settings."""
        return {key: self[key] for key in SSL_CONFIGS}

    @property
    def broker_ssl(self) -> dict[str, Any]:
        """The ssl.* settings the proxy connects to the brokers with (``broker.ssl.*``, unprefixed)."""
        return {
            key: self[BROKER_PREFIX + key] if key not in _SERVER_ONLY else definition.default
            for key, definition in SSL_CONFIGS.items()
        }

    @property
    def broker_uses_tls(self) -> bool:
        return bool(self["broker.security.protocol"] == "SSL")

    @property
    def advertised(self) -> Listener | None:
        uris = self["advertised.listeners"]
        return parse_listener(uris[0], "advertised.listeners") if uris else None

    @property
    def admin_listener(self) -> AdminListener | None:
        """Where the admin HTTP endpoint binds; None when it is off."""
        return parse_admin_listeners(self["admin.listeners"])

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
        definition = PROXY_CONFIGS.get(key)
        if definition is None:
            raise ConfigError(f"unknown setting {key!r} (from {origin})")
        try:
            values[key] = definition.parse(value)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (from {origin})") from None
    config = ProxyConfig(values)
    if len(config["listeners"]) != 1:
        raise ConfigError("listeners: exactly one listener is supported")
    config.listener  # noqa: B018 - parsed now so that a bad value stops the proxy at once
    if config.protocol is SecurityProtocol.SSL:
        check_ssl_settings("SSL", config.ssl)
    if config.broker_uses_tls:
        _check_broker_ssl(config.broker_ssl)
    config.admin_listener  # noqa: B018 - likewise
    advertised = config.advertised
    if advertised is not None and advertised.port == 0:
        raise ConfigError("advertised.listeners: port 0 cannot be advertised")
    if not config.bootstrap:
        raise ConfigError("bootstrap.servers: at least one broker is required")
    if config["coordination.url"] and config["proxy.peers"]:
        raise ConfigError("proxy.peers and coordination.url: set one way of finding the other proxy nodes, not both")
    return config


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
