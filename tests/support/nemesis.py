"""Nemesis runs for fault tests: a fault made and undone under the queue workload, what it cost, and the checks after.

A ``Fault`` is a context that makes the fault on entry and undoes it on exit, held for a fixed time.
``run_faults`` drives the workload (barnabas.testing.workload) on a 3-partition topic, replication
factor 3, through every fault ``CYCLES`` times, each followed by a leader's kill -9 (the cluster must
still elect); then every acknowledged value must be read back once, in order, where it was
acknowledged, and no leader epoch or controller epoch held by two brokers. Each run prints what it
measured (acknowledgements while each fault was held, how long until every partition took writes
again, the leader failover time, the longest time no value was acknowledged).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from barnabas.testing.workload import Workload
from tests.support.cluster import BrokerCluster
from tests.support.leader_epochs import leaderships, shared_epochs

__all__ = ["CYCLES", "PARTITIONS", "TOPIC", "Fault", "HighWatermarks", "Report", "StallMeter", "run_faults"]

TOPIC = "nemesis"
OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 3
#: How many times a run makes each of its faults (1; ``make fault``: 5).
CYCLES = int(os.environ.get("BARNABAS_TEST_REPLICATION_CYCLES", "1"))


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
    #: A line some broker must log while the fault is held, if any: proof a fault that one broker feels did its work.
    some_broker_logs: str | None = None


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

    def now(self, partitions: Collection[int] = range(PARTITIONS)) -> list[int] | None:
        """Each partition's high watermark, or None while some leader does not answer."""
        admin = AdminClient({"bootstrap.servers": self._bootstrap})
        asked = {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in partitions}
        try:
            answers = admin.list_offsets(asked, request_timeout=5)
            return [answers[tp].result().offset for tp in asked]
        except KafkaException as exc:
            self.last_error = str(exc)
            return None

    def wait_all_grow(self, by: int, timeout_s: float = 60.0, partitions: Collection[int] | None = None) -> None:
        """Wait until the high watermark of every partition (of ``partitions``, if given) has moved ``by``
        records past where it is now."""
        deadline = time.monotonic() + timeout_s
        watched = range(PARTITIONS) if partitions is None else partitions
        start = None
        while start is None and time.monotonic() < deadline:
            start = self.now(watched)
        while time.monotonic() < deadline:
            ends = self.now(watched)
            if start is not None and ends is not None and all(e >= s + by for s, e in zip(start, ends, strict=True)):
                return
            time.sleep(0.1)
        raise AssertionError(
            f"not every partition of {list(watched)} took {by} more records in {timeout_s} s: "
            f"{start} -> {self.now(watched)} ({self.last_error})"
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
    if fault.some_broker_logs is not None:
        wait_logged(cluster, marks, fault.some_broker_logs, by_every_broker=False)
    if fault.every_broker_logs is not None:
        wait_logged(cluster, marks, fault.every_broker_logs)
    watermarks.wait_all_grow(10)
    report.writes_again_s.append(time.monotonic() - undone)
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"whole after the {fault.name}")
    if fault.no_broker_logs is not None:
        logged = [b.broker_id for b in cluster.brokers if fault.no_broker_logs in b.log_text()[marks[b.broker_id] :]]
        assert not logged, f"brokers {logged} logged {fault.no_broker_logs!r} through the {fault.name}"
    report.faults.append(fault.name)


def wait_logged(
    cluster: BrokerCluster, marks: dict[int, int], line: str, timeout_s: float = 60.0, *, by_every_broker: bool = True
) -> None:
    """Wait until every broker's log (or, not ``by_every_broker``, some broker's) has ``line`` past its mark."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [b.broker_id for b in cluster.brokers if line not in b.log_text()[marks[b.broker_id] :]]
        if not missing or (not by_every_broker and len(missing) < len(cluster.brokers)):
            return
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
