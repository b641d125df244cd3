"""The admin HTTP endpoint's settings, shared by the broker and the proxy.

Rules this module keeps:

- ``admin.listeners`` is a list of ``http://host:port`` URIs, empty by default: no endpoint is
  served unless asked for (``make run`` has none; the Kubernetes manifests set one). At most one is
  served. An empty host binds every interface, port 0 picks a free port (the broker and the proxy
  report the port they got, as they do their Kafka port).
- Only ``http`` is served: the endpoint exposes no data and takes no writes (health, readiness,
  metrics), and it is meant for the pod network's kubelet and Prometheus.
- ``admin.probe.timeout.ms`` bounds how long /healthz and /readyz wait for the event loop; a loop
  that does not answer in that time is reported unresponsive (503). Keep it below the probes'
  ``timeoutSeconds`` so the kubelet gets that answer rather than a timeout of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .definitions import ConfigDef, ConfigError, ConfigType, at_least

__all__ = ["ADMIN_CONFIG_LIST", "AdminListener", "parse_admin_listeners"]

ADMIN_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("admin.listeners", ConfigType.LIST, [],
              "http://host:port of the admin endpoint (/healthz, /readyz, /metrics); empty serves none."),
    ConfigDef("admin.probe.timeout.ms", ConfigType.INT, 800,
              "How long /healthz and /readyz wait for the event loop before answering 503.", at_least(1)),
)  # fmt: skip

_ADMIN_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>\d+)/?$")


@dataclass(frozen=True, slots=True)
class AdminListener:
    """Where the admin endpoint binds: an empty host is every interface, port 0 a free port."""

    host: str
    port: int


def parse_admin_listeners(uris: Sequence[str], key: str = "admin.listeners") -> AdminListener | None:
    """The admin listener ``uris`` name, or None when they are empty.

    Raises:
        ConfigError: more than one URI, a scheme other than http, or a malformed URI or port.
    """
    if not uris:
        return None
    if len(uris) > 1:
        raise ConfigError(f"{key}: at most one admin listener is supported, got {len(uris)}")
    match = _ADMIN_URI.match(uris[0].strip())
    if not match:
        raise ConfigError(f"{key}: {uris[0]!r} is not of the form http://host:port")
    if match["scheme"].lower() != "http":
        raise ConfigError(f"{key}: {match['scheme']}:// is not served, only http://")
    port = int(match["port"])
    if port > 65535:
        raise ConfigError(f"{key}: port {port} is out of range")
    return AdminListener(match["host"].strip("[]"), port)
