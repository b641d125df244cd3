"""A Kubernetes StatefulSet's life on one machine, with a real client producing and consuming throughout.

Four brokers started as pods are, with HOSTNAME=barnabas-0..3 and no broker.id (each takes its
ordinal), a dir each as its volume, all on one coordination store. Then what a StatefulSet does to
them, in order: a pod killed and restarted on its volume (same id, back in the ISR, no replica
moved); a pod back on a new, empty volume (refused, one line) and started again with --replace (it
re-replicates); the coordination store lost with the volumes kept (the cluster comes back by itself);
the highest ordinal decommissioned (no partition under-replicated), stopped and unregistered. The
queue workload's checker then finds every acknowledged record once, in order, at its offset, and
the group's committed offsets never going back.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from barnabas.testing import ServerStartError
from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster

pytestmark = pytest.mark.timeout(420)

TOPIC = "orders"
PARTITIONS = 4
PODS = 4


class Pod(BrokerProcess):
    """A broker started as a StatefulSet's pod: no broker.id, its hostname ``barnabas-<ordinal>``."""

    def __init__(self, data_dir: Path, ordinal: int, extra_args: list[str], properties: dict[str, str]) -> None:
        super().__init__(data_dir, ordinal, extra_args, properties, env={"HOSTNAME": f"barnabas-{ordinal}"})

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--id")
        return command[:at] + command[at + 2 :]


class StatefulSet(BrokerCluster):
    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        return Pod(data_dir, broker_id, ["--coordination", self.coordination_url], dict(properties))


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[StatefulSet]:
    started = StatefulSet(tmp_path, PODS, properties={"min.insync.replicas": "2"}).start()
    yield started
    started.stop()


def replicas(cluster: BrokerCluster) -> dict[int, list[int]]:
    return {p: list(found.replicas) for p, found in cluster.metadata().topics[TOPIC].partitions.items()}


def healed(cluster: BrokerCluster, what: str) -> None:
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), what)


def barnabas_cluster(cluster: BrokerCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", "cluster", *args, "-b", cluster.bootstrap]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_a_statefulsets_brokers_keep_their_identity_and_every_acknowledged_record(pods: StatefulSet) -> None:
    assert {b.id for b in pods.metadata().brokers.values()} == set(range(PODS)), "ids from the pod ordinals"
    pods.create_topic(TOPIC, PARTITIONS, 3)
    placed = replicas(pods)
    workload = Workload(pods.bootstrap, TOPIC, PARTITIONS).start()
    workload.wait_acked(500)

    # A pod killed and restarted on its own volume: the same broker, back in every ISR, nothing moved.
    pods.brokers[1].kill()
    pods.brokers[1].start()
    healed(pods, "barnabas-1 back in every ISR")
    assert replicas(pods) == placed
    workload.wait_acked(workload.acked_count() + 300)

    # A pod back on a new, empty volume refuses to start; with --replace it replicates its partitions again.
    lost = pods.brokers[2]
    lost.kill()
    shutil.rmtree(lost.data_dir)
    with pytest.raises(ServerStartError):
        lost.start()
    refusal = [line for line in lost.log_text().splitlines() if line.startswith("barnabas broker:")]
    assert len(refusal) == 1 and "log dirs are new, but its data is in directory" in refusal[0]
    lost.extra_args.append("--replace")
    lost.start()
    healed(pods, "the replaced barnabas-2 back in every ISR")
    lost.extra_args.remove("--replace")
    workload.wait_acked(workload.acked_count() + 300)

    # The coordination store is lost, the volumes are not: the same pods come back with everything.
    for pod in pods.brokers:
        pod.kill()
    for path in pods.base.glob("coordination.db*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    for pod in pods.brokers:
        pod.launch()
    for pod in pods.brokers:
        pod.wait_ready(60)
    healed(pods, "the recreated cluster led with full ISRs")
    assert replicas(pods) == placed
    workload.wait_acked(workload.acked_count() + 300, timeout_s=120)

    # Scale-down: the highest ordinal is emptied, then stopped and forgotten.
    decommissioned = barnabas_cluster(pods, "decommission", "--broker", str(PODS - 1))
    assert decommissioned.returncode == 0, decommissioned.stderr
    healed(pods, "no partition under-replicated after the decommission")
    assert all(PODS - 1 not in r for r in replicas(pods).values())
    assert pods.brokers[-1].stop() == 0
    unregistered = barnabas_cluster(pods, "unregister", "--broker", str(PODS - 1))
    assert unregistered.returncode == 0, unregistered.stderr
    workload.wait_acked(workload.acked_count() + 300)

    result = workload.finish()
    result.consumed = workload.read_back(pods.bootstrap)
    assert not result.problems(), result.problems()
