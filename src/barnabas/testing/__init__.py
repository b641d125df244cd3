"""Real barnabas servers for tests: a process harness, a broker, a broker cluster, proxy nodes, a pytest plugin.

Shipped with barnabas (as kazoo ships ``kazoo.testing``) so that any project can test against a real
Kafka-compatible broker or replicated cluster, faults included, with no Docker and no JVM; the
benchmarks and ``barnabas cluster up`` run their brokers with it too. The pytest fixtures
(``barnabas_broker``, ``barnabas_bootstrap``, ``barnabas_topic``, ``barnabas_cluster``) are in
``barnabas.testing.pytest_plugin``, which pytest loads on its own. The queue workload that checks a
cluster through faults is ``barnabas.testing.workload`` (its checker, pure, ``barnabas.testing.checker``),
imported on its own so that loading the plugin does not load the Kafka client.
"""

from .broker import Broker
from .cluster import FAST_FAILOVER, BrokerCluster
from .process import (
    AdoptedProcess,
    ManagedServer,
    ServerGroup,
    ServerProcess,
    ServerStartError,
    free_ports,
    line_logged,
    port_file_written,
    port_open,
    process_table,
)
from .proxy import ProxyNode, ProxySet

__all__ = [
    "FAST_FAILOVER",
    "AdoptedProcess",
    "Broker",
    "BrokerCluster",
    "ManagedServer",
    "ProxyNode",
    "ProxySet",
    "ServerGroup",
    "ServerProcess",
    "ServerStartError",
    "free_ports",
    "line_logged",
    "port_file_written",
    "port_open",
    "process_table",
]
