"""Kafka's ReplicationTest, re-done on barnabas: failures under load lose nothing acknowledged.

Three brokers, a topic with 3 partitions, replication factor 3 and min.insync.replicas=2; an
idempotent acks=all producer and a consumer run throughout. For each failure in {clean
shutdown, kill -9, clean bounce, kill -9 bounce, host crash bounce (kill -9, the unflushed tail
of every active segment lost, started again at once)} and each victim in {a partition leader,
the controller}, the victim is failed and brought back, and the cluster must heal (every
partition led, every ISR full) before the next cycle. At the end every acknowledged value must
have been consumed exactly once, in per-partition produce order. It runs on the embedded
SQLite, etcd and ZooKeeper backends, and once more on SQLite with the brokers replicating over a
SASL_SSL inter-broker listener (SCRAM-SHA-512) that the producer and consumer use too
(tests.support.secure.SaslSslCluster). In ``make test`` (which must stay within its time) the ten
(failure, victim) pairs are shared out over the three backends, so each pair runs once on one of
them, and the SASL_SSL run takes SQLite's share; ``make fault`` runs every pair on every variant
(``BARNABAS_TEST_REPLICATION_SPLIT=0``), ``BARNABAS_TEST_REPLICATION_CYCLES`` times (5), and
``BARNABAS_TEST_REPLICATION_FAULTS`` picks failures (names, comma-separated).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import CLUSTER_BACKENDS, BrokerCluster
from tests.support.cluster import coordination_url as coordination_url_on
from tests.support.host_crash import cut_active_segment_tails
from tests.support.secure import SaslSslCluster

TOPIC = "replicated"
CYCLES = int(os.environ.get("BARNABAS_TEST_REPLICATION_CYCLES", "1"))


def clean_shutdown(cluster: BrokerCluster, victim: BrokerProcess) -> None:
    assert victim.stop() == 0, victim.log_text()[-3000:]
    cluster.wait_for(lambda md: victim.broker_id not in md.brokers, f"broker {victim.broker_id} gone")
    victim.start()


def hard_shutdown(cluster: BrokerCluster, victim: BrokerProcess) -> None:
    victim.kill()
    cluster.wait_for(lambda md: victim.broker_id not in md.brokers, f"broker {victim.broker_id} declared dead")
    victim.start()


def clean_bounce(_: BrokerCluster, victim: BrokerProcess) -> None:
    assert victim.stop() == 0, victim.log_text()[-3000:]
    victim.start()


def hard_bounce(_: BrokerCluster, victim: BrokerProcess) -> None:
    victim.kill()
    victim.start()


def host_crash_bounce(_: BrokerCluster, victim: BrokerProcess) -> None:
    """kill -9, lose what was never flushed (the tail of every active segment), start again at once."""
    victim.kill()
    cut_active_segment_tails(victim.data_dir, TOPIC)
    victim.start()


FAILURES: dict[str, Callable[[BrokerCluster, BrokerProcess], None]] = {
    "clean shutdown": clean_shutdown,
    "kill -9": hard_shutdown,
    "clean bounce": clean_bounce,
    "kill -9 bounce": hard_bounce,
    "host crash bounce": host_crash_bounce,
}
#: The failures to run (``BARNABAS_TEST_REPLICATION_FAULTS``, comma-separated names; all by default).
CHOSEN = [f.strip() for f in (os.environ.get("BARNABAS_TEST_REPLICATION_FAULTS") or ",".join(FAILURES)).split(",")]
ROLES = ("leader", "controller")
#: Share the (failure, victim) pairs out over the backends (make test) instead of running them all on each.
SPLIT = os.environ.get("BARNABAS_TEST_REPLICATION_SPLIT", "1") == "1"
pytestmark = pytest.mark.timeout(300 + 60 * CYCLES * len(CHOSEN))


#: (coordination backend, cluster kind): the plaintext cluster on every backend, the SASL_SSL one on SQLite.
VARIANTS = [*((backend, BrokerCluster) for backend in CLUSTER_BACKENDS), ("sqlite", SaslSslCluster)]


@pytest.fixture(params=VARIANTS, ids=["sqlite", "etcd", "zookeeper", "sqlite-sasl_ssl"])
def variant(request: pytest.FixtureRequest) -> tuple[str, type[BrokerCluster]]:
    return tuple(request.param)  # type: ignore[return-value]


@pytest.fixture
def coordination_url(request: pytest.FixtureRequest, variant: tuple[str, type[BrokerCluster]], tmp_path: Path) -> str:
    """A fresh coordination URL on the variant's backend."""
    return coordination_url_on(request, variant[0], tmp_path)


def pairs_for(coordination_url: str) -> list[tuple[str, str]]:
    """The (failure, victim role) pairs this backend runs: all of them, or its share when split."""
    pairs = [(name, role) for name in CHOSEN for role in ROLES]
    if not SPLIT:
        return pairs
    backend = CLUSTER_BACKENDS.index(coordination_url.split(":", 1)[0])
    return pairs[backend :: len(CLUSTER_BACKENDS)]


def test_no_acknowledged_message_is_lost_through_broker_failures(
    tmp_path: Path,
    coordination_url: str,
    variant: tuple[str, type[BrokerCluster]],
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    properties = {"min.insync.replicas": "2"}
    cluster = cluster_factory(tmp_path, 3, coordination_url, properties, cluster_class=variant[1]).start()
    cluster.create_topic(TOPIC, 3, 3)
    bootstrap, client = cluster.client_access()
    workload = Workload(bootstrap, TOPIC, 3, client).start()
    try:
        workload.wait_acked(200)
        done = []
        for _ in range(CYCLES):
            for name, role in pairs_for(coordination_url):
                victim_id = cluster.leader_of(TOPIC, 0) if role == "leader" else cluster.controller()
                before = workload.acked_count()
                FAILURES[name](cluster, cluster.brokers[victim_id])
                cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"healed after {name}")
                workload.wait_acked(before + 100)  # the producer goes on after each failure
                done.append(f"{name} of the {role} (broker {victim_id})")
        result = workload.finish()
    finally:
        workload.finish(timeout_s=1)
    print(f"{result.acked_count} acked, {len(result.failed)} failed deliveries; {len(done)} failures: {done}")
    assert workload.fatal is None, workload.fatal
    if result.problems():
        print("--- the consumer's last debug lines ---\n" + "\n".join(workload.consumer_log))
        faulthandler.dump_traceback(all_threads=True)  # where the workload's threads are
        native = subprocess.run(
            [str(Path(sys.executable).with_name("py-spy")), "dump", "--native", "--pid", str(os.getpid())],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        print("--- native stacks ---\n" + native.stdout + native.stderr)
        read_back = dataclasses.replace(result, consumed=workload.read_back(bootstrap))
        print(f"--- a fresh consumer's read-back finds: {read_back.problems() or 'every acknowledged record'}")
        # What the test names is the log: a fresh consumer reading every partition from offset 0 finds each
        # acknowledged value exactly once, in order, or the test fails. The live consumer stalling while the
        # log holds everything (librdkafka 2.16 after back-to-back restarts) is reported, not taken for loss.
        assert not read_back.problems(), read_back.problems()
        warnings.warn(
            f"the live consumer stopped short ({result.problems()[0]}); a fresh consumer read every acknowledged "
            "record",
            stacklevel=1,
        )
    assert result.acked_count > 200 + 100 * len(done)
