"""How many connections the broker holds, per listener and per client address: Kafka's ConnectionQuotas.

Rules this module keeps (Kafka's SocketServer.ConnectionQuotas):

- A connection counts from its accept until it closes, against three limits checked in this order:
  its listener's (``listener.name.<name>.max.connections``, else ``max.connections``), the broker's
  (``max.connections``; the inter-broker listener is exempt, so replication never starves), and its
  address's (``max.connections.per.ip``, or its entry in ``max.connections.per.ip.overrides``).
- Over a limit the connection is refused: closed right after accept, never counted, with a reason
  for the log line and a count per listener and limit for the metrics. Kafka's acceptor stops
  accepting while the broker or a listener is full instead (the client waits in the listen
  backlog); an asyncio server cannot pause accepting, so barnabas refuses those as Kafka refuses a
  per-address excess.
- Override hosts are resolved to addresses once, when the broker starts (Kafka: InetAddress.getByName).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from barnabas.config import BrokerConfig, ConfigError
from barnabas.config.limits import parse_ip_overrides

__all__ = ["ConnectionLimits", "QueuedRequests", "client_address", "limits_from_config", "resolve_overrides"]

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Per-host limits by address: each host name resolved to every address it has.

    Raises:
        OSError: a host name does not resolve.
    """
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            resolved[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
            resolved[str(info[4][0])] = count
    return resolved


def client_address(host: str) -> str:
    """A peer's address as the limits key it: an IPv4 client of a dual-stack socket by its IPv4 address."""
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def limits_from_config(config: BrokerConfig) -> ConnectionLimits:
    """The limits ``config`` sets, every listener's own included.

    Raises:
        ConfigError: a host in ``max.connections.per.ip.overrides`` does not resolve.
    """
    setup = config.listener_setup
    try:
        overrides = resolve_overrides(parse_ip_overrides(config["max.connections.per.ip.overrides"]))
    except OSError as exc:
        raise ConfigError(f"max.connections.per.ip.overrides: a host does not resolve: {exc}") from None
    return ConnectionLimits(
        max_connections=int(config["max.connections"]),
        per_ip=int(config["max.connections.per.ip"]),
        per_ip_overrides=overrides,
        per_listener={
            listener.name: int(config.listener_value(listener.name, "max.connections")) for listener in setup.listeners
        },
        inter_broker_listener=setup.inter_broker_listener.name,
    )


@dataclass
class ConnectionLimits:
    """Open connection counts and the limits they are held to."""

    max_connections: int = UNLIMITED
    per_ip: int = UNLIMITED
    #: address -> its own limit (``max.connections.per.ip.overrides``, resolved).
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    #: listener name -> its limit (every listener's ``max.connections`` as it sees it).
    per_listener: dict[str, int] = field(default_factory=dict)
    #: The listener exempt from the broker-wide limit (Kafka's protected inter-broker listener).
    inter_broker_listener: str = ""
    total: int = 0
    by_ip: dict[str, int] = field(default_factory=dict)
    by_listener: dict[str, int] = field(default_factory=dict)
    #: (listener, limit name) -> connections refused.
    refused: dict[tuple[str, str], int] = field(default_factory=dict)

    def admit(self, listener: str, address: str) -> str | None:
        """Count a new connection, or return why it is refused (then nothing is counted)."""
        refusal = self._refusal(listener, address)
        if refusal is not None:
            limit, reason = refusal
            key = (listener, limit)
            self.refused[key] = self.refused.get(key, 0) + 1
            return reason
        self.total += 1
        self.by_ip[address] = self.by_ip.get(address, 0) + 1
        self.by_listener[listener] = self.by_listener.get(listener, 0) + 1
        return None

    def release(self, listener: str, address: str) -> None:
        """A counted connection closed."""
        self.total -= 1
        _decrement(self.by_ip, address)
        _decrement(self.by_listener, listener)

    def _refusal(self, listener: str, address: str) -> tuple[str, str] | None:
        listener_max = self.per_listener.get(listener, self.max_connections)
        if self.by_listener.get(listener, 0) >= listener_max:
            return "max.connections", f"listener {listener} already has its maximum of {listener_max} connections"
        if listener != self.inter_broker_listener and self.total >= self.max_connections:
            return "max.connections", f"the broker already has its maximum of {self.max_connections} connections"
        ip_max = self.per_ip_overrides.get(address, self.per_ip)
        if self.by_ip.get(address, 0) >= ip_max:
            return "max.connections.per.ip", f"address already has the configured maximum of {ip_max} connections"
        return None


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


@dataclass
class QueuedRequests:
    """Whole requests read from every connection but not yet taken up: ``queued.max.requests`` bounds them.

    Kafka's network threads stop reading while its request queue is full; here a connection that
    has whole requests waiting stops reading while the count is at the bound, and reads again once
    it has taken up its own (so every connection keeps being served, none reads ahead).
    """

    capacity: int = 500
    count: int = 0

    @property
    def full(self) -> bool:
        return self.count >= self.capacity
