"""The coordination service fails over under load: nothing acknowledged is lost, the brokers go on.

Three brokers on a 3-member coordination quorum (etcd, ZooKeeper), a topic with 3 partitions,
replication factor 3 and min.insync.replicas=2 under an idempotent acks=all producer. Each cycle
fails the quorum's leader — killed (-9), then paused (SIGSTOP) — waits until the other two have
elected a new one and the producer has gone on through it, and brings the member back; the
cluster must then be whole (every partition led, every ISR full) and able to elect: a broker is
bounced and its leaderships move. At the end a fresh consumer must read every acknowledged value
exactly once, in per-partition produce order.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from barnabas.testing.servers.etcd import EtcdCluster
from barnabas.testing.servers.zookeeper import ZooKeeperEnsemble
from barnabas.testing.workload import Workload
from tests.contract.servers.etcd import etcd_cluster  # noqa: F401 - the quorums this test fails
from tests.contract.servers.zookeeper import zookeeper_ensemble  # noqa: F401
from tests.support.admin_metrics import ADMIN, scrape, total
from tests.support.cluster import BrokerCluster

TOPIC = "failover"
#: The brokers' session timeout (``barnabas.testing``'s clusters: 3 s).
SESSION_S = 3.0
CYCLES = int(os.environ.get("BARNABAS_TEST_REPLICATION_CYCLES", "1"))
pytestmark = pytest.mark.timeout(240 + 120 * CYCLES)


class Member(Protocol):
    @property
    def running(self) -> bool: ...
    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def start(self, timeout_s: float | None = None) -> object: ...


def run_failovers(
    tmp_path: Path,
    url: str,
    members: list[Member],
    leader_among: Callable[[list[Member]], Member],
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    cluster = cluster_factory(tmp_path, 3, url, {"min.insync.replicas": "2", **ADMIN}).start()
    cluster.create_topic(TOPIC, 3, 3)
    workload = Workload(cluster.bootstrap, TOPIC, 3).start()
    done: list[str] = []
    try:
        workload.wait_acked(200)
        for _ in range(CYCLES):
            for fault in ("kill -9", "pause"):
                leader = leader_among(members)
                others = [m for m in members if m is not leader]
                if fault == "kill -9":
                    leader.kill()
                else:
                    leader.pause()
                leader_among(others)
                workload.wait_acked(workload.acked_count() + 100)  # through the new quorum leader
                if fault == "kill -9":
                    leader.start()
                else:
                    leader.resume()
                cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"whole after a {fault} failover")
                done.append(fault)
            # The quorum still elects: a bounced broker's leaderships move and come back. A broker
            # whose session the failover cost (its server was paused past the session timeout) may
            # learn so only once it reconnects, and then loses its ISR places; two such brokers at
            # once, and the bounced leader would leave nobody to elect (Kafka's rule without unclean
            # election). So the sessions must stay connected for twice the session timeout first.
            wait_sessions_steady(cluster, 2 * SESSION_S)
            cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "whole before the bounce")
            victim = cluster.leader_of(TOPIC, 0)
            cluster.brokers[victim].kill()
            moved = lambda md, gone=victim: md.topics[TOPIC].partitions[0].leader not in (-1, gone)  # noqa: E731
            cluster.wait_for(moved, "a new leader")
            cluster.brokers[victim].start()
            cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "healed after the bounce")
            workload.wait_acked(workload.acked_count() + 100)
        result = workload.finish()
        result.consumed = workload.read_back(cluster.bootstrap)
    finally:
        workload.finish(timeout_s=1)
        for member in members:
            member.resume()
    print(f"{result.acked_count} acked over {len(done)} quorum failovers: {done}")
    assert workload.fatal is None, workload.fatal
    assert not result.problems(), result.problems()


def wait_sessions_steady(cluster: BrokerCluster, steady_s: float, timeout_s: float = 120.0) -> None:
    """Until every live broker's coordination session (its admin endpoint's gauge) has stayed connected for
    ``steady_s`` on end."""
    deadline = time.monotonic() + timeout_s
    since: float | None = None
    while True:
        up = {b.broker_id: total(scrape(b.admin_port), "barnabas_coordination_session_up") for b in cluster.alive()}
        now = time.monotonic()
        if all(value == 1 for value in up.values()):
            since = now if since is None else since
            if now - since >= steady_s:
                return
        else:
            since = None
        assert now < deadline, f"coordination sessions not steadily connected: {up}"
        time.sleep(0.1)


def test_etcd_leader_failover_loses_nothing(
    tmp_path: Path,
    etcd_cluster: EtcdCluster,  # noqa: F811 - the fixture imported above
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    members: list[Member] = list(etcd_cluster.members)
    run_failovers(
        tmp_path,
        etcd_cluster.url_for(),
        members,
        lambda among: etcd_cluster.leader(20.0, [m for m in etcd_cluster.members if m in among]),
        cluster_factory,
    )


def test_zookeeper_leader_failover_loses_nothing(
    tmp_path: Path,
    zookeeper_ensemble: ZooKeeperEnsemble,  # noqa: F811
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    members: list[Member] = list(zookeeper_ensemble.members)
    run_failovers(
        tmp_path,
        zookeeper_ensemble.url_for(),
        members,
        lambda among: zookeeper_ensemble.leader(30.0, [m for m in zookeeper_ensemble.members if m in among]),
        cluster_factory,
    )
