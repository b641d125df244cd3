"""A leader's host crashes and loses writes it never flushed, and the broker is back before its session ends.

Kafka's answer (KIP-380, KIP-966): a broker that registers again is a new incarnation with a new
broker epoch; the controller treats that as a bounce, so the leaderships it held are elected again
at a new leader epoch, and it leaves the ISR until it has caught up. Without that, the restarted
broker took its leaderships back at the old leader epoch and the followers truncated to its damaged
log, throwing away the only full copies of acknowledged records.

The fault, for each backend: an idempotent acks=all producer runs; the victim, which leads two of
the three partitions and is not the controller, is killed -9; the last 64 KiB of each of its
partitions' active segments is cut off (what a kernel crash or a power cut loses when nothing was
flushed); it is started again at once. To land the restart in the controller's blind spot every
time, the controller is paused (SIGSTOP) from just before the victim's old registration can vanish
until its new one is in place, so on resuming it finds the victim registered as before, as it would
after any restart faster than its watches. Then every acknowledged record must be read back, and
the victim's partitions must have moved to another leader or to a new leader epoch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from barnabas.testing.workload import Workload
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.host_crash import LOST_TAIL_BYTES, cut_active_segment_tails
from tests.support.raw_client import RawKafkaClient

pytestmark = pytest.mark.timeout(300)

TOPIC = "unflushed"
#: Session timeout: ZooKeeper's test server allows at most 4 s, and etcd grants whole seconds.
SESSION_TIMEOUT_MS = 4000
#: When to pause the controller after the kill, as a share of the session timeout: a session's
#: last keepalive came at most a third of it before the kill, so its keys last at least two thirds
#: of it, and the paused controller's own session lasts at least that long too.
PAUSE_AT_SHARE = 0.55


def leaders_and_epochs(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, int]]:
    """Partition -> (leader, leader epoch), as Metadata v12 reports them."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with RawKafkaClient.connect("127.0.0.1", broker.port) as client:
        (found,) = client.request(3, 12, request).topics
    return {int(p.partition_index): (int(p.leader_id), int(p.leader_epoch)) for p in found.partitions}


def test_a_leader_restarted_within_its_session_after_losing_unflushed_writes_loses_nothing_acknowledged(
    tmp_path: Path, coordination_url: str, cluster_factory: Callable[..., BrokerCluster]
) -> None:
    properties = {"min.insync.replicas": "2", "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    cluster = cluster_factory(tmp_path, 3, coordination_url, properties).start()
    controller = cluster.controller()
    victim, bystander = [b for b in range(3) if b != controller]
    # The victim leads partitions 0 and 1; every partition has all three replicas.
    assignment = [[victim, bystander, controller], [victim, controller, bystander], [controller, victim, bystander]]
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=3, replica_assignment=assignment)]).values():
        future.result(timeout=30)
    # Asked of the bystander, which is asked below: another broker may see the topic whole first.
    ask = [cluster.brokers[bystander]]
    cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), f"{TOPIC} fully replicated", ask=ask)
    led_before = leaders_and_epochs(cluster.brokers[bystander], TOPIC)
    assert led_before[0][0] == victim and led_before[1][0] == victim, led_before

    workload = Workload(cluster.bootstrap, TOPIC, 3).start()
    try:
        workload.wait_acked(20_000, timeout_s=120)  # well over 64 KiB of batches per partition
        paused = cluster.brokers[controller]
        sqlite = coordination_url.startswith("sqlite")
        if sqlite:  # a dead process's SQLite session ends at once: pause before the kill
            paused.pause()
        cluster.brokers[victim].kill()
        killed_at = time.monotonic()
        cut = cut_active_segment_tails(cluster.brokers[victim].data_dir, TOPIC)
        assert all(size == LOST_TAIL_BYTES for size in cut.values()), cut
        restarted = threading.Thread(target=cluster.brokers[victim].start, name="restart the victim")
        restarted.start()
        try:
            if not sqlite:
                time.sleep(max(killed_at + PAUSE_AT_SHARE * SESSION_TIMEOUT_MS / 1000 - time.monotonic(), 0))
                paused.pause()
            restarted.join(timeout=60)
        finally:
            paused.resume()
        assert not restarted.is_alive(), "the victim did not start again"
        print(f"the victim was back {time.monotonic() - killed_at:.1f} s after the kill")

        before = workload.acked_count()
        cluster.wait_for(lambda md: cluster.fully_replicated(md, TOPIC), "healed after the restart", 90)
        workload.wait_acked(before + 2_000, timeout_s=90)
        result = workload.finish(timeout_s=60)
    finally:
        workload.finish(timeout_s=1)
    led_after = leaders_and_epochs(cluster.brokers[bystander], TOPIC)
    print(f"{result.acked_count} acked; leaders and epochs {led_before} -> {led_after}")
    assert workload.fatal is None, workload.fatal
    assert not result.problems(), result.problems()
    assert not result.failed, result.failed[:5]
    for partition in (0, 1):
        leader, epoch = led_after[partition]
        assert leader != victim or epoch > led_before[partition][1], (partition, led_before, led_after)
