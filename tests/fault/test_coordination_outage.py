"""The coordination service goes away for 10 s under load: brokers keep serving, nothing is lost.

While etcd is down, partitions whose leaders do not change keep taking acks=all produce and
serving fetches (the ISR is unchanged, so the high watermark moves); ISR changes and elections
wait. Afterwards the cluster converges, every acknowledged value is consumed exactly once, and
no two brokers ever acted as controller under the same epoch.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from barnabas.testing.workload import Workload
from tests.contract.servers.etcd import start_server
from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(600)

TOPIC = "outage"
OUTAGE_S = 10.0
_CONTROLLER_TERM = re.compile(r"broker (\d+) is the controller \(epoch (\d+)\)")


def controller_terms(cluster: BrokerCluster, controller: int, timeout_s: float = 30.0) -> list[tuple[int, int]]:
    """(epoch, broker) of every election the brokers logged, once ``controller`` has logged its own: the others
    name it from the election key as soon as it is written, a moment before the winner logs that it won."""
    deadline = time.monotonic() + timeout_s
    while True:
        terms = [(int(m[2]), int(m[1])) for b in cluster.brokers for m in _CONTROLLER_TERM.finditer(b.log_text())]
        if controller in {broker for _, broker in terms} or time.monotonic() > deadline:
            return terms
        time.sleep(0.1)


def agreed_controller(cluster: BrokerCluster, timeout_s: float = 30.0) -> int:
    """The controller every broker names, once they agree (views converge from watch hints)."""
    deadline = time.monotonic() + timeout_s
    while True:
        views = {
            b.broker_id: AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5).controller_id
            for b in cluster.alive()
        }
        if len(set(views.values())) == 1:
            return next(iter(views.values()))
        if time.monotonic() > deadline:
            raise AssertionError(f"brokers disagree on the controller: {views}")
        time.sleep(0.1)


def test_brokers_ride_out_an_etcd_outage(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    server = start_server(tmp_path_factory, "outage-etcd")
    try:
        cluster = BrokerCluster(tmp_path, 3, server.url_for(), {"min.insync.replicas": "2"}).start()
        try:
            cluster.create_topic(TOPIC, 3, 3)
            workload = Workload(cluster.bootstrap, TOPIC, 3).start()
            try:
                workload.wait_acked(200)
                server.stop()
                before = workload.acked_count()
                time.sleep(OUTAGE_S)  # the outage itself: how long the service stays away
                during = workload.acked_count() - before
                server.start()
                cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "converged after the outage")
                workload.wait_acked(workload.acked_count() + 200)
                # The group commits again too (before the outage it may not have got to).
                workload.wait_committed(workload.committed_count() + 1)
                result = workload.finish()
            finally:
                workload.finish(timeout_s=1)
            print(f"{result.acked_count} acked, {during} of them while etcd was down")
            assert not result.problems(), result.problems()
            assert during > 0, "produce stopped while coordination was down"
            controller = agreed_controller(cluster)
            terms = controller_terms(cluster, controller)
            epochs = [epoch for epoch, _ in terms]
            assert terms and len(epochs) == len(set(epochs)), f"two controllers shared an epoch: {sorted(terms)}"
            assert controller in {broker for _, broker in terms}, f"{controller} never logged its election"
        finally:
            cluster.stop()
    finally:
        server.stop()
