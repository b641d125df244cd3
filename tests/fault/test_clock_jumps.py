"""One broker's wall clock jumps under load: an NTP step, or an operator's ``date -s``, on one host.

Kafka reads the wall clock for what it stores as a time (record timestamps, retention, the expiry
of stored offsets and producer ids); how long something has taken must not depend on it. barnabas
measures durations on a monotonic clock (a follower's lag, sessions and leases, timeouts), so a jump
of one broker's wall clock must not shrink an ISR, must not keep a stalled follower in one, must not
end a session, and must not lose or duplicate a record.

Three brokers (replication factor 3, min.insync.replicas=2) under the queue workload, each broker's
wall clock its own (barnabas.testing.wall_clock: a preload library steps ``CLOCK_REALTIME`` in that
process alone). In each cycle:

- the leader of partition 0 jumps 10 minutes ahead and is held there for twice
  ``replica.lag.time.max.ms``: no ISR may shrink, and every partition goes on taking writes;
- it jumps back to the true time and 10 minutes further back, and a follower of its partition is
  paused (SIGSTOP): the leader must drop the follower from the ISR within ``replica.lag.time.max.ms``
  and its partition take writes again. Sessions here are long (30 s), so the follower's session
  does not end first: the leader's own lag tracking is what is tested. Before followers' lag was
  measured on the monotonic clock, the leader saw every follower caught up "in the future" and
  acks=all writes to its partitions stopped until the follower's session ended.
- the clock is put right and the follower resumed; the controller's clock then jumps 10 minutes
  back and ahead again around a leader's kill -9: the partition must be led again.

At the end the checker must find every acknowledged value read back once, in order, where it was
acknowledged, and no leader epoch held by two brokers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from barnabas.testing.wall_clock import ClockShimUnavailableError, WallClock, shim_library
from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.leader_epochs import leaderships, shared_epochs
from tests.support.nemesis import CYCLES, PARTITIONS, TOPIC, HighWatermarks, StallMeter

STEP_S = 600.0
LAG_S = 3.0
SESSION_S = 30.0
#: How long after the follower's pause every partition must take writes again: the lag, the leader's
#: ISR check (every half lag) and the write of the new ISR, with room for this loaded machine.
SHRINK_WITHIN_S = LAG_S + 9.0
pytestmark = pytest.mark.timeout(240 + 120 * CYCLES)


class SteppedClockCluster(BrokerCluster):
    """A cluster whose brokers each run on a wall clock of their own (``clocks[broker_id]``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.clocks: dict[int, WallClock] = {}  # filled by make_broker, which the base class's __init__ calls
        super().__init__(*args, **kwargs)

    def make_broker(self, data_dir: Path, broker_id: int, properties: Mapping[str, str]) -> BrokerProcess:
        clock = self.clocks[broker_id] = WallClock(data_dir.parent / f"clock-{broker_id}")
        return BrokerProcess(
            data_dir, broker_id, ["--coordination", self.coordination_url], dict(properties), env=clock.env()
        )


@pytest.fixture(scope="module")
def shim() -> Path:
    try:
        return shim_library()
    except ClockShimUnavailableError as exc:
        pytest.skip(str(exc))


def isr_shrinks(broker: BrokerProcess, since: int) -> list[str]:
    """The ISR shrinks the broker wrote after offset ``since`` of its log (expansions are replicas catching up)."""
    return [line for line in broker.log_text()[since:].splitlines() if ": Shrinking ISR from [" in line]


def test_one_brokers_clock_jumping_loses_nothing_and_stalls_no_partition(
    tmp_path: Path, shim: Path, cluster_factory: Callable[..., BrokerCluster]
) -> None:
    properties = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": str(int(LAG_S * 1000)),
        "broker.session.timeout.ms": str(int(SESSION_S * 1000)),
    }
    cluster = cluster_factory(tmp_path, 3, None, properties, cluster_class=SteppedClockCluster)
    assert isinstance(cluster, SteppedClockCluster)
    cluster.start()
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    watermarks = HighWatermarks(cluster.bootstrap)
    measured: list[str] = []
    try:
        with StallMeter(workload) as stalls:
            workload.wait_acked(500)
            for _ in range(CYCLES):
                measured.append(leader_ahead(cluster, watermarks))
                measured.append(leader_behind_with_a_stalled_follower(cluster, watermarks))
                measured.append(controller_steps_around_a_failover(cluster, watermarks))
        result = workload.finish()
        result.consumed = workload.read_back(cluster.bootstrap)
    finally:
        workload.finish(timeout_s=1)
    print(f"{result.acked_count} acked; {'; '.join(measured)}; longest time without an ack {stalls.longest_s:.1f} s")
    assert workload.fatal is None, workload.fatal
    assert not result.problems(), result.problems()
    logs = {broker.broker_id: broker.log_text() for broker in cluster.brokers}
    assert leaderships(logs)
    assert not shared_epochs(logs)


def leader_ahead(cluster: SteppedClockCluster, watermarks: HighWatermarks) -> str:
    """Partition 0's leader 10 minutes ahead for twice the lag time: no ISR shrinks, every partition takes writes."""
    leader = cluster.leader_of(TOPIC, 0)
    marks = {b.broker_id: len(b.log_text()) for b in cluster.brokers}
    cluster.clocks[leader].step(STEP_S)
    try:
        time.sleep(2 * LAG_S)  # the fault itself: how long the clock is held ahead
        watermarks.wait_all_grow(10)
    finally:
        cluster.clocks[leader].reset()
    shrunk = {b.broker_id: isr_shrinks(b, marks[b.broker_id]) for b in cluster.brokers}
    assert not any(shrunk.values()), f"ISRs shrank while broker {leader}'s clock was ahead: {shrunk}"
    return f"broker {leader} {STEP_S:.0f} s ahead: no ISR shrink"


def leader_behind_with_a_stalled_follower(cluster: SteppedClockCluster, watermarks: HighWatermarks) -> str:
    """Partition 0's leader 10 minutes behind, a follower paused: the leader drops it within the lag time."""
    leader = cluster.leader_of(TOPIC, 0)
    replicas = cluster.metadata().topics[TOPIC].partitions[0].replicas
    follower = next(r for r in replicas if r != leader)
    led_elsewhere = [p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) != follower]
    cluster.clocks[leader].step(-STEP_S)
    marks = {b.broker_id: len(b.log_text()) for b in cluster.brokers}
    cluster.pause(follower)
    paused = time.monotonic()
    try:
        # The follower's own partitions stall until its session ends: only those led elsewhere are watched.
        watermarks.wait_all_grow(10, timeout_s=SHRINK_WITHIN_S, partitions=led_elsewhere)
        writes_again_s = time.monotonic() - paused
        dropped = [line for line in isr_shrinks(cluster.brokers[leader], marks[leader]) if f"{TOPIC}-0:" in line]
        assert dropped, f"broker {leader} never dropped paused broker {follower} from {TOPIC}-0's ISR"
    finally:
        cluster.resume(follower)
        cluster.clocks[leader].reset()
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "every ISR full again")
    return f"broker {leader} {STEP_S:.0f} s behind, broker {follower} paused: writes again after {writes_again_s:.1f} s"


def controller_steps_around_a_failover(cluster: SteppedClockCluster, watermarks: HighWatermarks) -> str:
    """The controller's clock back, then ahead, around a leader's kill -9: the partition is led again."""
    controller = cluster.controller()
    victim = a_leader_other_than(cluster, controller)
    cluster.clocks[controller].step(-STEP_S)
    killed = time.monotonic()
    cluster.kill(victim)
    cluster.wait_for(
        lambda md: all(md.topics[TOPIC].partitions[p].leader not in (-1, victim) for p in range(PARTITIONS)),
        f"every partition led without broker {victim}",
    )
    failover_s = time.monotonic() - killed
    cluster.clocks[controller].step(2 * STEP_S)
    cluster.restart(victim)
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"whole after broker {victim}'s restart")
    watermarks.wait_all_grow(10)
    cluster.clocks[controller].reset()
    return f"controller {controller} back, then ahead: broker {victim}'s partitions led after {failover_s:.1f} s"


def a_leader_other_than(cluster: SteppedClockCluster, broker: int) -> int:
    """A broker other than ``broker`` that leads a partition of the topic. Failovers cycle after cycle can leave
    every partition led by ``broker``; a preferred election then spreads them again (each broker is the first
    replica of one partition)."""

    def found() -> int | None:
        return next((b for b in (cluster.leader_of(TOPIC, p) for p in range(PARTITIONS)) if b != broker), None)

    leader = found()
    if leader is None:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)
        cluster.wait_for(
            lambda md: any(md.topics[TOPIC].partitions[p].leader not in (-1, broker) for p in range(PARTITIONS)),
            f"a partition led by a broker other than {broker}",
        )
        leader = found()
    assert leader is not None, f"every partition is still led by broker {broker}"
    return leader
