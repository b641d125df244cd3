"""Network partitions lose nothing acknowledged (Jepsen's partition nemeses, Kafka's network-partition tests).

Three brokers, each in a network namespace of its own on a private bridge; on etcd, ZooKeeper and
PostgreSQL the coordination server runs in a fourth. The test process (the workload's idempotent acks=all
producer and its consumer, the checks) sits on the bridge and always reaches every broker, as
Jepsen's clients do: a partitioned leader still gets writes and must not acknowledge what it
cannot replicate. Topic: 3 partitions, replication factor 3, min.insync.replicas=2. Each
partition below is made, held until it has had its effect (a new leader elected, an ISR shrunk,
records acknowledged through it), healed, and the cluster must heal (every partition led, every
ISR full) and the producer go on before the next. At the end a fresh consumer must read every
acknowledged value exactly once, in per-partition produce order.

- leader isolated: the leader of partition 0 cut from the other brokers and the coordination
  service (on SQLite, whose store is a file, from the other brokers only).
- leader cut from coordination: it still reaches the other brokers (not on SQLite). A second, fresh producer
  writes to a topic the victim leads entirely, so the victim is its one connection: the victim must send
  it on (it is deposed once its followers have gone) and nothing it acknowledged may be lost.
- split 2/1: the leader alone on one side, both followers on the other; all reach coordination.
- bridge: the leader and one follower cut apart, the other follower reaching both.
- lossy network: every broker drops 20% of its packets, in and out.

``BARNABAS_TEST_PARTITIONS`` picks partitions by name (comma-separated). In ``make test`` etcd runs
them all, SQLite only the first (on an embedded store the others behave as on etcd), ZooKeeper and
PostgreSQL the two that cut a broker from coordination; ``make fault`` runs every one on each
(``BARNABAS_TEST_REPLICATION_SPLIT=0``), ``BARNABAS_TEST_REPLICATION_CYCLES`` times.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from barnabas.testing.network import HOST, NetNode, NetworkUnavailableError, PrivateNetwork
from barnabas.testing.servers.etcd import EtcdServer
from barnabas.testing.servers.postgres import PostgresInstall
from barnabas.testing.servers.zookeeper import ZooKeeperServer
from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import FAST_FAILOVER, BrokerCluster

TOPIC = "partitioned"
COORDINATION = "coordination"
#: A topic whose every partition one broker leads (named per use: each is a fresh producer's only topic).
ALL_LED_BY = "led-by-{leader}-{n}"
CYCLES = int(os.environ.get("BARNABAS_TEST_REPLICATION_CYCLES", "1"))
LAG_TIME_MAX_MS = int(FAST_FAILOVER["replica.lag.time.max.ms"])


class NetworkedCluster(BrokerCluster):
    """The tests' cluster with each broker in its own node of ``network`` (node names broker-0, broker-1, ...)."""

    def __init__(self, network: PrivateNetwork, base: Path, coordination_url: str) -> None:
        self.network = network
        self.nodes = [network.add(f"broker-{i}") for i in range(3)]
        # Leadership stays where the faults put it: a rebalance moving it between choosing a victim and
        # partitioning the network would make the wrong broker the victim. A follower gives up on a fetch
        # after 5 s, not Kafka's 30: on the lossy network TCP's retransmission backoff held a fetch or its
        # answer for the full 30 s, its partitions below min.insync.replicas all that time, and 120 s
        # under loss once acknowledged only 50 records (held for 150 s: the longest pause in acknowledgements
        # 20-69 s with 30 s over five runs, 20-27 s with 5 s over two).
        super().__init__(
            base,
            3,
            coordination_url,
            {"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false", "replica.socket.timeout.ms": "5000"},
        )

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        extra = ["--coordination", self.coordination_url]
        return BrokerProcess(data_dir, broker_id, extra, dict(properties), node=self.nodes[broker_id])


def agreed_leader(cluster: NetworkedCluster, timeout_s: float = 60.0) -> int:
    """Partition 0's leader once every broker reports the same one (a view may lag a moment after a heal)."""
    deadline = time.monotonic() + timeout_s
    while True:
        leaders = set()
        for broker in cluster.brokers:
            try:
                md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(TOPIC, timeout=5)
                leaders.add(int(md.topics[TOPIC].partitions[0].leader))
            except Exception:  # a broker that does not answer yet: no agreement this round
                leaders.add(-1)
        if len(leaders) == 1 and -1 not in leaders:
            return leaders.pop()
        assert time.monotonic() < deadline, f"the brokers do not agree on partition 0's leader: {leaders}"
        time.sleep(0.05)


def node_of(broker_id: int) -> str:
    return f"broker-{broker_id}"


def isr_of(md: object, partition: int) -> list[int]:
    return sorted(md.topics[TOPIC].partitions[partition].isrs)  # type: ignore[attr-defined]


def leader_isolated(cluster: NetworkedCluster, leader: int, workload: Workload) -> None:
    others = [b for b in cluster.brokers if b.broker_id != leader]
    cluster.network.isolate(node_of(leader), keep=[HOST])
    if COORDINATION in cluster.network.nodes:
        # Its session expires; the others elect a new leader from the ISR, which the old one cannot shrink.
        cluster.wait_for(
            lambda md: md.topics[TOPIC].partitions[0].leader not in (-1, leader), "a new leader", ask=others
        )
    else:
        # The embedded store is a file every broker still reaches: the leader keeps its session and drops the
        # followers it no longer hears from out of the ISR, writes to it stopping at min.insync.replicas.
        cluster.wait_for(
            lambda md: isr_of(md, 0) == [leader], "the ISR shrunk to the leader", ask=[cluster.brokers[leader]]
        )
        isr_stays_shrunk(cluster, leader)


def leader_cut_from_coordination(cluster: NetworkedCluster, leader: int, workload: Workload) -> None:
    """Partition 0's leader is cut from coordination only. Beside the workload, a fresh producer writes to a
    topic the victim leads every partition of: its one connection is to the victim (librdkafka asks only the
    brokers it is connected to for Metadata), so the victim, which still runs, must send it on. Left to
    answer from its last view, the victim held such a producer for good."""
    others = [b for b in cluster.brokers if b.broker_id != leader]
    cut_off = ALL_LED_BY.format(leader=leader, n=time.monotonic_ns())
    create_led_by(cluster, cut_off, leader)
    pinned = Workload(cluster.bootstrap, cut_off, 3).start()
    try:
        pinned.wait_acked(100)
        cluster.network.cut(node_of(leader), COORDINATION)
        cluster.wait_for(
            lambda md: md.topics[TOPIC].partitions[0].leader not in (-1, leader), "a new leader", ask=others
        )
        before = workload.acked_count()
        workload.wait_acked(before + 50)  # the new leader takes writes while the old one still runs
        cluster.wait_for(
            lambda md: all(p.leader not in (-1, leader) for p in md.topics[cut_off].partitions.values()),
            f"new leaders of {cut_off}",
            ask=others,
        )
        before = pinned.acked_count()
        pinned.wait_acked(before + 50)  # the producer that only knew the victim went on through the new leaders
        result = pinned.finish()
        # Read back through the brokers still registered: the victim, deposed, answers that its partitions have
        # no leader, which librdkafka's watermark query takes as final.
        result.consumed = pinned.read_back(",".join(b.bootstrap for b in others))
    finally:
        pinned.finish(timeout_s=1)
    assert pinned.fatal is None, pinned.fatal
    assert not result.problems(), result.problems()


def create_led_by(cluster: NetworkedCluster, topic: str, leader: int) -> None:
    """A topic of 3 partitions, ``leader`` the first (preferred) replica of each, led by it everywhere."""
    rest = [b.broker_id for b in cluster.brokers if b.broker_id != leader]
    assignment = [[leader, *rest], [leader, *reversed(rest)], [leader, *rest]]
    # An assignment naming a broker the controller has not seen register again yet is refused (as in Kafka).
    everyone = {b.broker_id for b in cluster.brokers}
    cluster.wait_for_everywhere(lambda md: set(md.brokers) == everyone, "every broker registered in every view")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept alive until its futures resolve
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)]
    ).values():
        future.result(timeout=30)
    cluster.wait_for_everywhere(
        lambda md: (
            cluster.fully_replicated(md, topic)
            and all(p.leader == leader for p in md.topics[topic].partitions.values())
        ),
        f"{topic} led by broker {leader} with full ISRs",
    )


def split_two_one(cluster: NetworkedCluster, leader: int, workload: Workload) -> None:
    followers = [node_of(b.broker_id) for b in cluster.brokers if b.broker_id != leader]
    cluster.network.partition([node_of(leader)], followers)
    cluster.wait_for(
        lambda md: isr_of(md, 0) == [leader], "the ISR shrunk to the leader", ask=[cluster.brokers[leader]]
    )
    isr_stays_shrunk(cluster, leader)


def isr_stays_shrunk(cluster: NetworkedCluster, leader: int) -> None:
    """The cut-off leader, its ISR shrunk, takes no follower back into the topic's ISRs while none can fetch.

    Held for the lag time and an ISR check interval past the shrink: long enough for a leader that
    took a silent follower's last fetch for catching up (it did, once writes stopped at
    min.insync.replicas) to have expanded again.
    """
    asked = cluster.brokers[leader]
    since = len(asked.log_text())
    deadline = time.monotonic() + LAG_TIME_MAX_MS * 1.5 / 1000
    answers = 0
    while time.monotonic() < deadline:
        md = AdminClient({"bootstrap.servers": asked.bootstrap}).list_topics(TOPIC, timeout=5)
        # librdkafka may ask another broker it has learned of than the one it was bootstrapped with; a follower's
        # view trails the store by a moment after the leader's shrink, so only the leader's own answer counts
        # (named by its address: "host:port/bootstrap" as bootstrapped, "host:port/<id>" once learned).
        if md.orig_broker_name.rsplit("/", 1)[0] == asked.bootstrap:
            answers += 1
            assert isr_of(md, 0) == [leader], f"the cut-off leader's ISR grew back: {isr_of(md, 0)}"
        time.sleep(0.05)
    assert answers, "no answer came from the cut-off leader itself"
    lines = asked.log_text()[since:].splitlines()
    expanded = [line for line in lines if f"{TOPIC}-" in line and "Expanding ISR" in line]
    assert not expanded, f"the cut-off leader expanded ISRs no follower could fetch for: {expanded}"


def bridge(cluster: NetworkedCluster, leader: int, workload: Workload) -> None:
    follower, _bridge = (b.broker_id for b in cluster.brokers if b.broker_id != leader)
    cluster.network.cut(node_of(leader), node_of(follower))
    ask = [cluster.brokers[leader]]
    cluster.wait_for(lambda md: follower not in isr_of(md, 0), f"broker {follower} out of the ISR", ask=ask)
    before = workload.acked_count()
    workload.wait_acked(before + 50)  # the leader and the bridge still make min.insync.replicas


def lossy_network(cluster: NetworkedCluster, leader: int, workload: Workload) -> None:
    for broker in cluster.brokers:
        cluster.network.lossy(node_of(broker.broker_id), 0.2)
    before = workload.acked_count()
    workload.wait_acked(before + 100, timeout_s=120)


PARTITIONS: dict[str, Callable[[NetworkedCluster, int, Workload], None]] = {
    "leader isolated": leader_isolated,
    "leader cut from coordination": leader_cut_from_coordination,
    "split 2/1": split_two_one,
    "bridge": bridge,
    "lossy network": lossy_network,
}
CHOSEN = [p.strip() for p in (os.environ.get("BARNABAS_TEST_PARTITIONS") or ",".join(PARTITIONS)).split(",")]
#: What needs a coordination server on the network (the embedded store is a file: no network to cut).
NEEDS_SERVER = {"leader cut from coordination"}
#: make test: the partitions each backend runs (see above); make fault runs every partition on each.
SPLIT = os.environ.get("BARNABAS_TEST_REPLICATION_SPLIT", "1") == "1"
IN_MAKE_TEST = {
    "sqlite": {"leader isolated"},
    "etcd": set(PARTITIONS),
    "zookeeper": {"leader isolated", "leader cut from coordination"},
    "postgres": {"leader isolated", "leader cut from coordination"},
}
pytestmark = pytest.mark.timeout(240 + 90 * CYCLES * len(CHOSEN))


@pytest.fixture
def network() -> Iterator[PrivateNetwork]:
    try:
        made = PrivateNetwork()
    except NetworkUnavailableError as exc:
        pytest.skip(f"no private network on this machine: {exc}")
    with made:
        yield made


@contextlib.contextmanager
def coordination_on(backend: str, network: PrivateNetwork, base: Path) -> Iterator[tuple[str, bool]]:
    """The cluster's coordination URL, and whether a server runs for it (in a node of its own); stopped after."""
    if backend == "sqlite":
        yield f"sqlite:///{base / 'coordination.db'}", False
        return
    node: NetNode = network.add(COORDINATION)
    if backend == "postgres":
        install = PostgresInstall().initdb()
        try:
            yield install.server("coordination", node=node).start().url_for(), True
        finally:
            install.cleanup(keep=False)
        return
    server = (
        EtcdServer(base / "etcd", node=node) if backend == "etcd" else ZooKeeperServer(base, "zookeeper", node=node)
    ).start()
    try:
        yield server.url_for(), True
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["sqlite", "etcd", "zookeeper", "postgres"])
def test_no_acknowledged_message_is_lost_through_network_partitions(
    tmp_path: Path, network: PrivateNetwork, backend: str
) -> None:
    with coordination_on(backend, network, tmp_path) as (url, has_server):
        partition_in_turn(network, tmp_path, url, backend, has_server)


def partition_in_turn(network: PrivateNetwork, tmp_path: Path, url: str, backend: str, has_server: bool) -> None:
    cluster = NetworkedCluster(network, tmp_path, url)
    workload: Workload | None = None
    done: list[str] = []
    try:
        cluster.start()
        cluster.create_topic(TOPIC, 3, 3)
        workload = Workload(cluster.bootstrap, TOPIC, 3).start()
        workload.wait_acked(200)
        for _ in range(CYCLES):
            for name in CHOSEN:
                if (not has_server and name in NEEDS_SERVER) or (SPLIT and name not in IN_MAKE_TEST[backend]):
                    continue
                leader = agreed_leader(cluster)
                PARTITIONS[name](cluster, leader, workload)
                network.heal()
                cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"healed after {name}")
                before = workload.acked_count()
                workload.wait_acked(before + 100)
                done.append(f"{name} (leader {leader})")
        result = workload.finish()
        read_back = workload.read_back(cluster.bootstrap)
    except BaseException:
        for broker in cluster.brokers:
            print(f"--- broker {broker.broker_id}, last lines ---\n{broker.tail(60)}")
        raise
    finally:
        if workload is not None:
            workload.finish(timeout_s=1)
        cluster.stop()
    print(f"{result.acked_count} acked, {len(result.failed)} failed deliveries; {len(done)} partitions: {done}")
    assert workload.fatal is None, workload.fatal
    result.consumed = read_back
    assert not result.problems(), result.problems()
    assert result.acked_count > 200 + 100 * len(done)
