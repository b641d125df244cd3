"""Connection limits, read-ahead bounds and client quota windows: Kafka's SocketServerConfigs and QuotaConfig.

Rules this module keeps:

- Names, types and defaults are Kafka's: ``max.connections`` and ``max.connections.per.ip``
  default to Int.MaxValue (no limit); ``max.connections.per.ip.overrides`` is
  ``host:count,host:count``; ``queued.max.requests`` is 500; quotas are measured over
  ``quota.window.num`` (11) windows of ``quota.window.size.seconds`` (1), the controller mutation
  quota's burst over ``controller.quota.window.num`` (11) of ``controller.quota.window.size.seconds`` (1).
- ``max.connections.per.ip`` may be 0 only with overrides (KafkaConfig's check): only the hosts named
  there may connect at all.
- ``listener.name.<name>.max.connections`` limits one listener (Kafka's ListenerConnectionQuota);
  it is taken through the listener override table in ``listeners``.
"""

from __future__ import annotations

import ipaddress

from .definitions import INT32_MAX, ConfigDef, ConfigError, ConfigType, at_least

__all__ = ["LIMIT_CONFIG_LIST", "LISTENER_LIMIT_CONFIGS", "parse_ip_overrides"]

_I = ConfigType.INT
_S = ConfigType.STRING


def _overrides_problem(value: str) -> str | None:
    try:
        parse_ip_overrides(value)
    except ConfigError as exc:
        return str(exc)
    return None


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` as {host: count} (Kafka's KafkaConfig.getMap, counts as ints).

    Raises:
        ConfigError: an entry that is not ``host:count`` with a count of at least 0.
    """
    overrides: dict[str, int] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: {entry!r} is not host:count")
        if not _valid_host(host):
            raise ConfigError(f"max.connections.per.ip.overrides: {host!r} is not a valid host or address")
        overrides[host] = int(count)
    return overrides


def _valid_host(host: str) -> bool:
    """An IP address, or a host name of letters, digits, dots and dashes (Kafka's Utils.validHostPattern)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return all(part and all(c.isalnum() or c == "-" for c in part) for part in host.split("."))
    return True


#: Kafka's connection and request-queue settings and the quota windows, with Kafka's defaults.
LIMIT_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("max.connections", _I, INT32_MAX,
              "Connections the broker accepts at once (the inter-broker listener is exempt); more are closed at "
              "once.", at_least(0)),
    ConfigDef("max.connections.per.ip", _I, INT32_MAX,
              "Connections accepted from one address at once; more are closed at once. 0 only with overrides.",
              at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", _S, "",
              "Per-host limits overriding max.connections.per.ip: host:count,host:count.", _overrides_problem),
    ConfigDef("queued.max.requests", _I, 500,
              "Requests read but not yet taken up, over all connections, before connections stop reading.",
              at_least(1)),
    ConfigDef("max.request.partition.size.limit", _I, 2000,
              "Partitions one DescribeTopicPartitions answer gives at most (a client pages through more).",
              at_least(1)),
    ConfigDef("quota.window.num", _I, 11, "Samples a client quota's rate is measured over.", at_least(1)),
    ConfigDef("quota.window.size.seconds", _I, 1, "Length of one client quota sample.", at_least(1)),
    ConfigDef("controller.quota.window.num", _I, 11,
              "Samples of the controller mutation quota: its burst is samples x window x rate.", at_least(1)),
    ConfigDef("controller.quota.window.size.seconds", _I, 1, "Length of one controller mutation quota sample.",
              at_least(1)),
)  # fmt: skip

#: What ``listener.name.<name>.`` may override among these.
LISTENER_LIMIT_CONFIGS: dict[str, ConfigDef] = {
    "max.connections": ConfigDef(
        "max.connections", _I, None, "Connections this listener accepts at once; more are closed at once.",
        at_least(0),
    ),
}  # fmt: skip
