"""The admin endpoint (``admin.listeners``) of a real broker process and a real proxy node.

Each server binds its admin endpoint on port 0 and writes the port it got to its admin port file
(``--admin-port-file``), as it does its Kafka port; a real client (confluent-kafka) produces, and
the endpoint is read with urllib and parsed with prometheus-client's parser, as Prometheus and the
kubelet would.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from barnabas.coordination import GroupMembership, Session, Storage, open_storage
from barnabas.testing import ProxyNode, free_ports
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)

ADMIN = {"admin.listeners": "http://127.0.0.1:0"}
RECORDS = 50
#: The held registration's session TTL: longer than the test (its loop does not run between steps).
HOLD_TTL_S = 60.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> Samples:
    status, text = get(port, "/metrics")
    assert status == 200, text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(value for (sample, have), value in samples.items() if sample == name and wanted <= set(have))


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(count):
        producer.produce(topic, value=b"v" * 100, key=str(index).encode(), partition=0)
    assert producer.flush(30) == 0


def test_a_broker_reports_what_it_served(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(properties=ADMIN).start()
    port = broker.admin_port
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/readyz") == (200, "ready\n")
    topic = f"scraped-{uuid.uuid4().hex[:8]}"
    before = scrape(port)
    produce(broker.bootstrap, topic, RECORDS)
    after = scrape(port)

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert total(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == RECORDS
    bytes_in = total(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in > RECORDS * 100
    assert after[("kafka_log_log_size", (("partition", "0"), ("topic", topic)))] == bytes_in
    assert after[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", topic)))] == RECORDS
    for api in ("ApiVersions", "Metadata", "Produce"):
        assert grew("kafka_network_requestmetrics_requests_total", request=api) >= 1, api
    produced = total(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert total(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produced
    assert grew("kafka_server_replicamanager_leadercount") == 1
    assert grew("kafka_server_replicamanager_partitioncount") == 1
    assert after[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert after[("barnabas_coordination_session_up", ())] == 1


def test_a_broker_is_live_but_not_ready_until_it_has_registered(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """A crashed broker's registration lingers until its session expires, and its successor waits for that.

    The lingering registration here is a real session holding broker id 0 in the cluster's store,
    released when the test says: meanwhile the waiting broker is alive (an orchestrator must not kill
    it) and not ready (it must get no traffic yet); once it has registered, it is ready.
    """
    url = f"sqlite:///{tmp_path / 'coordination.db'}"
    loop = asyncio.new_event_loop()
    try:
        storage, session = loop.run_until_complete(hold_broker_id(url, "0"))
        broker = broker_factory(properties={**ADMIN, "coordination.url": url})
        broker.launch()
        port = broker.wait_admin_port()
        assert get(port, "/readyz") == (503, "not registered in the cluster yet\n")
        assert get(port, "/healthz") == (200, "ok\n")
        loop.run_until_complete(release(storage, session))
        broker.wait_ready()
        assert get(broker.admin_port, "/readyz") == (200, "ready\n")
    finally:
        loop.close()


async def hold_broker_id(url: str, broker_id: str) -> tuple[Storage, Session]:
    """Join the group ``brokers`` as ``broker_id``, as the previous incarnation of a broker did."""
    storage = await open_storage(url)
    session = await storage.metastore.open_session(HOLD_TTL_S)
    await GroupMembership(storage.metastore, "brokers").join(session, broker_id, b"{}")
    return storage, session


async def release(storage: Storage, session: Session) -> None:
    await session.close()  # its ephemeral registration goes with it
    await storage.close()


def test_a_proxy_node_reports_its_requests(broker: BrokerProcess, tmp_path: Path) -> None:
    proxy = ProxyNode(tmp_path / "proxy", broker.bootstrap, free_ports(1)[0], properties=ADMIN).start()
    try:
        port = proxy.admin_port
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ready\n")
        produce(proxy.bootstrap, f"proxied-{uuid.uuid4().hex[:8]}", RECORDS)
        samples = scrape(port)
    finally:
        proxy.stop()
    for api in ("Metadata", "Produce"):
        assert total(samples, "kafka_network_requestmetrics_requests_total", request=api) >= 1, api
    produced = total(samples, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert total(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produced
    assert samples[("barnabas_proxy_cluster_brokers", ())] == 1
    assert ("kafka_server_socket_server_metrics_connection_count", ()) in samples
