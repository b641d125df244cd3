"""The admin endpoint (``admin.listeners``) of a real broker process and a real proxy node.

Each server binds its admin endpoint on port 0 and writes the port it got to its admin port file
(``--admin-port-file``), as it does its Kafka port; a real client (confluent-kafka) produces, and
the endpoint is read with urllib and parsed with prometheus-client's parser, as Prometheus and the
kubelet would.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from barnabas.coordination import GroupMembership, Session, Storage, open_storage
from barnabas.testing import ProxyNode, free_ports
from tests.support.admin_metrics import ADMIN, get, scrape, total
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(120)

RECORDS = 50
REBUILT_PARTITIONS, REBUILT_RECORDS = 3, 900
#: The held registration's session TTL: longer than the test (its loop does not run between steps).
HOLD_TTL_S = 60.0


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


def test_a_broker_re_replicating_is_not_ready_until_it_is_back_in_every_isr(tmp_path: Path) -> None:
    """A broker replaced on an empty disk (``--replace``) is live but not ready while it copies its partitions back.

    The copy is held open without a sleep: the partitions' other replica, which leads them all, is
    paused (SIGSTOP) while the replaced broker starts, so the replaced broker can fetch nothing until
    the leader resumes (a paused broker keeps its session for ``broker.session.timeout.ms``, longer
    than the pause). Once /readyz says ready, the broker's own metadata has it in every ISR and its
    logs hold every record.
    """
    topic = f"rebuilt-{uuid.uuid4().hex[:8]}"
    properties = {**ADMIN, "broker.session.timeout.ms": "30000", "min.insync.replicas": "1"}
    cluster = BrokerCluster(tmp_path, 2, properties=properties).start()
    try:
        cluster.create_topic(topic, REBUILT_PARTITIONS, 2)
        produce_spread(cluster.bootstrap, topic, REBUILT_RECORDS)
        leader, victim = cluster.brokers
        assert victim.stop() == 0  # a controlled shutdown: broker 0 leads every partition now
        cluster.wait_for(lambda md: {p.leader for p in md.topics[topic].partitions.values()} == {0}, "0 leads all")
        shutil.rmtree(victim.data_dir)
        victim.extra_args.append("--replace")
        leader.pause()
        try:
            victim.launch()
            port = victim.wait_admin_port()
            status, body = poll_readyz(port, lambda status, body: "ISR" in body)
        finally:
            leader.resume()
        names = ", ".join(f"{topic}-{p}" for p in range(REBUILT_PARTITIONS))
        assert (status, body) == (503, f"not in the ISR of {REBUILT_PARTITIONS} partitions it follows: {names}\n")
        assert poll_readyz(port, lambda status, body: status == 200) == (200, "ready\n")
        own_view = AdminClient({"bootstrap.servers": victim.bootstrap}).list_topics(timeout=10)
        assert BrokerCluster.fully_replicated(own_view, topic), "ready, so in every ISR"
        samples = scrape(port)
        per_partition = REBUILT_RECORDS // REBUILT_PARTITIONS
        for partition in range(REBUILT_PARTITIONS):
            labels = (("partition", str(partition)), ("topic", topic))
            assert samples[("kafka_log_log_logendoffset", labels)] == per_partition
    finally:
        cluster.stop()


def produce_spread(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records round-robin over the partitions, acknowledged by every in-sync replica."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(count):
        producer.produce(topic, value=b"v" * 1000, partition=index % REBUILT_PARTITIONS)
    assert producer.flush(30) == 0


def poll_readyz(port: int, done: Callable[[int, str], bool], timeout_s: float = 60.0) -> tuple[int, str]:
    """Read /readyz until ``done(status, body)`` holds; the answer that did."""
    deadline = time.monotonic() + timeout_s
    status, body = get(port, "/readyz")
    while not done(status, body):
        assert time.monotonic() < deadline, f"/readyz still answers {status}: {body!r}"
        status, body = get(port, "/readyz")
    return status, body


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
