"""The coordination server crashes or hangs under load: PostgreSQL killed and paused, Cassandra nodes killed and paused.

Three brokers, a topic with 3 partitions, replication factor 3 and min.insync.replicas=2 under the
queue workload (barnabas.testing.workload: an idempotent acks=all producer, a consumer committing
to a group). Each fault is held for a fixed time (that is the nemesis), then undone; then every
partition must take writes again (its high watermark moves), the cluster must be whole (every
partition led, every ISR full), and it must still elect: after each fault a partition leader is
killed, its leadership moves, and it comes back. At the end the checker (barnabas.testing.checker) must find
every acknowledged value read back exactly once, in order, where it was acknowledged, and the
brokers' logs must show no leader epoch of a partition, and no controller epoch, held by two brokers.

- PostgreSQL (one server: the backend has no replicas of its own) killed with SIGKILL and started
  again on its data dir and port a second later: the leases live on the server's clock and outlast
  so short an outage, so produce goes on; and paused (SIGSTOP) for twice the session timeout: by
  the server's clock every lease has ended when it resumes, so every broker loses its session at
  once (the test waits for each to register again), and the controller elects every partition
  anew. Produce goes on while it is paused (leaders keep their last view) and stalls for the
  elections. The pause found a broker crash: ``bounded`` closed a hung call's socket while the
  event loop still watched it, and uvloop aborted the process (test_postgres_backend.py).
- Cassandra: a ring of three nodes (127.0.0.1-3, replication factor 3, QUORUM and SERIAL). First,
  clients that open a fresh keyspace at once through different nodes must make one schema (brokers
  starting together failed to, one start in two: _schema.py). Then a node is killed and restarted,
  and another paused for twice the session timeout, in turn; a quorum of two is left throughout, so
  no broker may lose its session. The pause found that all did: the driver kept sending to the hung
  node until every session ran out (it now heartbeats idle connections and marks a silent node down,
  and sends a read or renewal unanswered for 0.5 s to another node too, _connection.py). The
  brokers' session timeout here is Kafka's default, 9 s: every renewal is three Paxos rounds over
  the ring, which on this 2-core machine, beside three JVMs and three brokers, often outlast the
  second a 3 s session allows. The ring takes ~40 s and ~3 GB to start, so these cases run in
  ``make fault`` only (``BARNABAS_TEST_REPLICATION_SPLIT=0``).

``BARNABAS_TEST_REPLICATION_CYCLES`` repeats each case's faults (1; ``make fault``: 5). Each run prints
what it measured (acknowledgements while each fault was held, how long until every partition took
writes again, the leader failover time, the longest time no value was acknowledged).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from barnabas.coordination.api import Check, Put
from barnabas.coordination.backends.cassandra import open_backend
from barnabas.testing.servers.cassandra import CassandraRing, CassandraServer
from barnabas.testing.servers.postgres import PostgresInstall
from barnabas.testing.workload import Workload
from tests.contract.servers.cassandra import cassandra_ring  # noqa: F401 - the ring the Cassandra case fails
from tests.contract.servers.postgres import postgres_install  # noqa: F401 - servers this module kills
from tests.support.cluster import BrokerCluster
from tests.support.leader_epochs import leaderships, shared_epochs

TOPIC = "server-faults"
OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 3
CYCLES = int(os.environ.get("BARNABAS_TEST_REPLICATION_CYCLES", "1"))
SPLIT = os.environ.get("BARNABAS_TEST_REPLICATION_SPLIT", "1") == "1"
#: The brokers' session timeout (FAST_FAILOVER's broker.session.timeout.ms): a pause is held past it.
SESSION_S = 3.0
#: On Cassandra, Kafka's default broker.session.timeout.ms (see above: with 3 s, sessions were lost
#: on this machine with no fault made at all).
CASSANDRA_SESSION_S = 9.0
KILL_HOLD_S = 1.0
PAUSE_HOLD_S = 2 * SESSION_S
#: What a broker logs when its coordination session ends under it.
SESSION_LOST = "lost its coordination session"
pytestmark = pytest.mark.timeout(300 + 150 * CYCLES)


@dataclass(frozen=True)
class Fault:
    """A nemesis: ``make`` is a context that makes the fault on entry and undoes it on exit."""

    name: str
    make: Callable[[], AbstractContextManager[None]]
    hold_s: float
    #: Whether values must still be acknowledged while the fault is held.
    carry_on: bool
    #: A line every broker must log after the fault is made, if any: proof the fault did what it is for.
    every_broker_logs: str | None = None
    #: A line no broker may log from the fault's making until the cluster is whole again, if any.
    no_broker_logs: str | None = None


@dataclass
class Report:
    """What a run measured, printed for docs/reliability.md."""

    faults: list[str] = field(default_factory=list)
    acked_while_held: list[int] = field(default_factory=list)
    #: Seconds from undoing the fault until every partition's high watermark moved again.
    writes_again_s: list[float] = field(default_factory=list)
    #: Seconds from killing a partition's leader until another led it.
    failover_s: list[float] = field(default_factory=list)

    def line(self, acked: int, stall_s: float) -> str:
        return (
            f"{len(self.faults)} faults {self.faults}; {acked} acked; acked while held {self.acked_while_held}; "
            f"every partition written again after {_seconds(self.writes_again_s)}; "
            f"leader failover {_seconds(self.failover_s)}; longest time without an acknowledgement {stall_s:.1f} s"
        )


def _seconds(values: list[float]) -> str:
    listed = ", ".join(f"{v:.1f}" for v in values)
    return f"[{listed}] s (max {max(values, default=0.0):.1f} s)"


class StallMeter:
    """The longest time no value was acknowledged, sampled every 20 ms in a thread while in a ``with`` block."""

    def __init__(self, workload: Workload) -> None:
        self._workload = workload
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="stall meter", daemon=True)
        self.longest_s = 0.0
        #: When (wall clock, for reading beside the brokers' logs) the longest stall began.
        self.longest_from = 0.0

    def __enter__(self) -> StallMeter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        count, since = self._workload.acked_count(), time.time()
        while not self._stop.wait(0.02):
            now, seen = time.time(), self._workload.acked_count()
            if seen != count:
                count, since = seen, now
            if now - since > self.longest_s:
                self.longest_s, self.longest_from = now - since, since


class HighWatermarks:
    """Each partition's high watermark as a client reads it from the leader: whether every partition takes writes.

    A fresh AdminClient per reading (as ``BrokerCluster.wait_for`` asks for Metadata): a long-lived
    librdkafka client once kept failing for a minute after a broker it knew had been restarted.
    """

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self.last_error: str | None = None

    def now(self) -> list[int] | None:
        """Every partition's high watermark, or None while some leader does not answer."""
        admin = AdminClient({"bootstrap.servers": self._bootstrap})
        asked = {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        try:
            answers = admin.list_offsets(asked, request_timeout=5)
            return [answers[tp].result().offset for tp in asked]
        except KafkaException as exc:
            self.last_error = str(exc)
            return None

    def wait_all_grow(self, by: int, timeout_s: float = 60.0) -> None:
        """Wait until every partition's high watermark has moved ``by`` records past where it is now."""
        deadline = time.monotonic() + timeout_s
        start = None
        while start is None and time.monotonic() < deadline:
            start = self.now()
        while time.monotonic() < deadline:
            ends = self.now()
            if start is not None and ends is not None and all(e >= s + by for s, e in zip(start, ends, strict=True)):
                return
            time.sleep(0.1)
        raise AssertionError(
            f"not every partition took {by} more records in {timeout_s} s: {start} -> {self.now()} ({self.last_error})"
        )


def run_faults(cluster: BrokerCluster, faults: list[Fault]) -> None:
    """The workload through every fault ``CYCLES`` times, each followed by a leader election, then the checks.

    The election also spaces the faults: a Cassandra node just restarted (a cold JVM that has replayed
    its commit log) answered slowly for seconds, and a pause of another node right then left the
    brokers no quorum that answered in time.
    """
    cluster.start()
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    watermarks = HighWatermarks(cluster.bootstrap)
    report = Report()
    try:
        with StallMeter(workload) as stalls:
            workload.wait_acked(200)
            # The consumer's first commit creates the offsets topic (150 replicas): let that load pass first.
            cluster.wait_for(lambda md: cluster.fully_replicated(md, OFFSETS_TOPIC), "the offsets topic created")
            workload.wait_acked(workload.acked_count() + 500)
            for _ in range(CYCLES):
                for fault in faults:
                    make_and_undo(cluster, workload, watermarks, fault, report)
                    elects_again(cluster, watermarks, report)
        result = workload.finish()
        result.consumed = workload.read_back(cluster.bootstrap)
    finally:
        workload.finish(timeout_s=1)
    print(
        report.line(result.acked_count, stalls.longest_s),
        f"(from {time.strftime('%H:%M:%S', time.localtime(stalls.longest_from))})",
    )
    assert workload.fatal is None, workload.fatal
    assert not result.problems(), result.problems()
    logs = {broker.broker_id: broker.log_text() for broker in cluster.brokers}
    assert leaderships(logs), "no leadership found in the brokers' logs: the epoch check would check nothing"
    assert not shared_epochs(logs)
    stopped = [f.name for f, n in zip(faults * CYCLES, report.acked_while_held, strict=True) if f.carry_on and not n]
    assert not stopped, f"nothing was acknowledged while these faults were held: {stopped}"


def make_and_undo(
    cluster: BrokerCluster, workload: Workload, watermarks: HighWatermarks, fault: Fault, report: Report
) -> None:
    """Make the fault, hold it, undo it; then every partition must take writes again and the cluster be whole."""
    marks = {broker.broker_id: len(broker.log_text()) for broker in cluster.brokers}
    with fault.make():
        before = workload.acked_count()
        time.sleep(fault.hold_s)  # the fault itself: how long it is held
        report.acked_while_held.append(workload.acked_count() - before)
    undone = time.monotonic()
    if fault.every_broker_logs is not None:
        wait_logged(cluster, marks, fault.every_broker_logs)
    watermarks.wait_all_grow(10)
    report.writes_again_s.append(time.monotonic() - undone)
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"whole after the {fault.name}")
    if fault.no_broker_logs is not None:
        logged = [b.broker_id for b in cluster.brokers if fault.no_broker_logs in b.log_text()[marks[b.broker_id] :]]
        assert not logged, f"brokers {logged} logged {fault.no_broker_logs!r} through the {fault.name}"
    report.faults.append(fault.name)


def wait_logged(cluster: BrokerCluster, marks: dict[int, int], line: str, timeout_s: float = 60.0) -> None:
    """Wait until every broker's log has ``line`` past its mark."""
    deadline = time.monotonic() + timeout_s
    while missing := [b.broker_id for b in cluster.brokers if line not in b.log_text()[marks[b.broker_id] :]]:
        if time.monotonic() > deadline:
            raise AssertionError(f"brokers {missing} never logged {line!r}")
        time.sleep(0.1)


def elects_again(cluster: BrokerCluster, watermarks: HighWatermarks, report: Report) -> None:
    """The coordination service still elects: a killed leader's partition moves, and it comes back."""
    victim = cluster.leader_of(TOPIC, 0)
    killed = time.monotonic()
    cluster.brokers[victim].kill()
    moved = lambda md: md.topics[TOPIC].partitions[0].leader not in (-1, victim)  # noqa: E731
    cluster.wait_for(moved, "a new leader")
    report.failover_s.append(time.monotonic() - killed)
    cluster.brokers[victim].start()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "whole after the leader's bounce")
    watermarks.wait_all_grow(10)


# -- PostgreSQL ----------------------------------------------------------------------------------


def test_postgres_killed_and_paused_under_load(
    tmp_path: Path,
    postgres_install: PostgresInstall,  # noqa: F811 - the fixture imported above
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    server = postgres_install.server(f"faults-{uuid.uuid4().hex[:8]}").start()

    @contextmanager
    def killed() -> Iterator[None]:
        server.kill()
        yield
        server.start()

    @contextmanager
    def paused() -> Iterator[None]:
        server.pause()
        try:
            yield
        finally:
            server.resume()

    try:
        cluster = cluster_factory(tmp_path, 3, server.url_for(), {"min.insync.replicas": "2"})
        run_faults(
            cluster,
            [
                Fault("kill -9", killed, KILL_HOLD_S, carry_on=True),
                Fault("pause", paused, PAUSE_HOLD_S, carry_on=True, every_broker_logs="registered again"),
            ],
        )
    finally:
        server.resume()
        server.stop()


# -- Cassandra -----------------------------------------------------------------------------------

#: Rounds of clients starting together: the race they lost was lost in about one round in two.
SCHEMA_ROUNDS = 8
#: A killed node replays its commit log when it starts again: on this loaded machine, with the other
#: two nodes and the brokers busy, that took up to two minutes (the harness allows one).
NODE_RESTART_S = 300.0


@pytest.mark.skipif(SPLIT, reason="make fault only: a 3-node Cassandra ring takes ~40 s and 3 GB to start")
def test_cassandra_clients_starting_together_make_one_schema(cassandra_ring: CassandraRing) -> None:  # noqa: F811
    """Three clients open a fresh keyspace at once, each through another node first, as a cluster's brokers
    do when they start: every one must open it, and all must read what each wrote (one table, not two).

    Before _schema.py one of the three failed in about one round in two: its node had not heard of the
    keyspace or the table another client had just created through another node.
    """
    hosts = [member.host for member in cassandra_ring.members]

    async def one_round() -> None:
        keyspace = "s_" + uuid.uuid4().hex[:12]
        urls = [
            f"cassandra://{','.join(hosts[i:] + hosts[:i])}:{cassandra_ring.native_port}/{keyspace}"
            f"?replication_factor={len(hosts)}"
            for i in range(len(hosts))
        ]
        opened = await asyncio.gather(*(open_backend(url) for url in urls), return_exceptions=True)
        stores = [store for store in opened if not isinstance(store, BaseException)]
        try:
            failed = [repr(store) for store in opened if isinstance(store, BaseException)]
            assert not failed, f"clients failed to open keyspace {keyspace}: {failed}"
            for n, store in enumerate(stores):
                await store.commit([Check(f"k{n}", 0)], [Put(f"k{n}", b"x")])
            for store in stores:
                assert sorted(await store.list("")) == [f"k{n}" for n in range(len(stores))]
        finally:
            await asyncio.gather(*(store.close() for store in stores))

    async def rounds() -> None:
        for _ in range(SCHEMA_ROUNDS):
            await one_round()

    asyncio.run(asyncio.wait_for(rounds(), 600))


@pytest.mark.skipif(SPLIT, reason="make fault only: a 3-node Cassandra ring takes ~40 s and 3 GB to start")
@pytest.mark.timeout(300 + 400 * CYCLES)
def test_cassandra_node_killed_and_paused_under_load(
    tmp_path: Path,
    cassandra_ring: CassandraRing,  # noqa: F811
    cluster_factory: Callable[..., BrokerCluster],
) -> None:
    turn = itertools.count()

    def victim() -> CassandraServer:
        """The nodes in turn: each fault hits the next one."""
        return cassandra_ring.members[next(turn) % len(cassandra_ring.members)]

    @contextmanager
    def killed() -> Iterator[None]:
        node = victim()
        node.kill()
        yield
        cassandra_ring.restart(node, NODE_RESTART_S)

    @contextmanager
    def paused() -> Iterator[None]:
        node = victim()
        node.pause()
        try:
            yield
        finally:
            node.resume()

    properties = {"min.insync.replicas": "2", "broker.session.timeout.ms": str(int(CASSANDRA_SESSION_S * 1000))}
    cluster = cluster_factory(tmp_path, 3, cassandra_ring.url_for(), properties)
    run_faults(
        cluster,
        [
            Fault("kill -9 of a node", killed, KILL_HOLD_S, carry_on=True, no_broker_logs=SESSION_LOST),
            Fault("pause of a node", paused, 2 * CASSANDRA_SESSION_S, carry_on=True, no_broker_logs=SESSION_LOST),
        ],
    )
