"""The compare's connection probe against real processes: a client connection to the proxy holds a broker link."""

from __future__ import annotations

from pathlib import Path

from barnabas.benchmark._connection_probe import measure_connection_memory
from barnabas.testing import ProxyNode, free_ports
from tests.support.broker_process import BrokerProcess

CONNECTIONS = 40


def test_each_probe_connection_to_a_broker_is_one_socket(broker: BrokerProcess) -> None:
    probe = measure_connection_memory(broker.pid or 0, broker.bootstrap, CONNECTIONS)
    assert probe["connections"] == CONNECTIONS
    assert probe["sockets_per_connection"] == 1.0  # the client's, nothing behind it
    assert probe["sockets"]["closed"] == probe["sockets"]["before"]
    assert probe["rss_kib"]["open"] >= probe["rss_kib"]["before"] > 0


def test_each_probe_connection_to_the_proxy_has_its_own_broker_link(broker: BrokerProcess, tmp_path: Path) -> None:
    proxy = ProxyNode(tmp_path / "proxy", broker.bootstrap, free_ports(1)[0]).start()
    try:
        probe = measure_connection_memory(proxy.pid or 0, proxy.bootstrap, CONNECTIONS)
    finally:
        proxy.stop()
    # The client's socket and the broker link its Metadata was relayed over.
    assert probe["sockets_per_connection"] == 2.0, probe
    assert probe["sockets"]["closed"] == probe["sockets"]["before"], probe
    assert probe["kib_per_connection"] > 0, probe
