"""LeaderReplica's ISR rules on a real log: who may join and who lags (Kafka's Partition).

A follower joins the ISR on the strength of a recent fetch that reached the high watermark, as
Kafka expands the ISR only from a follower's fetch; one that stopped fetching long ago must not
rejoin because the leader, left alone in the ISR, stopped taking writes and its high watermark
came down to where that follower stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from barnabas.broker.fetch_sessions import PassStamp
from barnabas.broker.replication import LeaderReplica
from barnabas.cluster import PartitionState
from barnabas.log import LogConfig, PartitionLog

from ..log.batches import T0, make_batch

LAG_MS = 3000
EPOCHS = {0: 10, 1: 11, 2: 12}


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[LeaderReplica]:
    log = PartitionLog.open(tmp_path / "orders-0", LogConfig(), T0, hw_follows_log_end=False)
    state = PartitionState(leader=0, leader_epoch=1, isr=(0, 1, 2), broker_epochs=EPOCHS)
    replica = LeaderReplica("orders", 0, log, state, (0, 1, 2), broker_id=0, now_ms=0)
    log.append_as_leader(make_batch(5), 1, T0)
    log.complete_appends(T0)
    yield replica
    log.close()


def shrink_to_leader(leader: LeaderReplica, now_ms: int) -> None:
    """Both followers stop fetching at the log end; after the lag time the ISR is the leader alone."""
    for follower in (1, 2):
        leader.on_follower_fetch(follower, leader.log.log_end_offset, 0, EPOCHS[follower])
    assert leader.log.high_watermark == leader.log.log_end_offset
    assert leader.lagging(now_ms, LAG_MS) == [1, 2]
    leader.set_state(PartitionState(leader=0, leader_epoch=1, isr=(0,), broker_epochs={0: EPOCHS[0]}))


def test_a_follower_that_stopped_fetching_does_not_rejoin_the_isr(leader: LeaderReplica) -> None:
    now_ms = LAG_MS + 1
    shrink_to_leader(leader, now_ms)

    assert leader.wants_to_join(EPOCHS, now_ms, LAG_MS) == {}


def test_a_follower_rejoins_once_it_fetches_the_high_watermark_again(leader: LeaderReplica) -> None:
    now_ms = LAG_MS + 1
    shrink_to_leader(leader, now_ms)

    leader.on_follower_fetch(2, leader.log.log_end_offset, now_ms, EPOCHS[2])

    assert leader.wants_to_join(EPOCHS, now_ms, LAG_MS) == {2: EPOCHS[2]}


def test_a_follower_behind_the_high_watermark_does_not_join(leader: LeaderReplica) -> None:
    now_ms = LAG_MS + 1
    shrink_to_leader(leader, now_ms)

    leader.on_follower_fetch(1, leader.log.log_end_offset - 1, now_ms, EPOCHS[1])

    assert leader.wants_to_join(EPOCHS, now_ms, LAG_MS) == {}


def test_a_follower_that_restarted_joins_only_in_its_registered_epoch(leader: LeaderReplica) -> None:
    now_ms = LAG_MS + 1
    shrink_to_leader(leader, now_ms)
    leader.on_follower_fetch(1, leader.log.log_end_offset, now_ms, EPOCHS[1])

    assert leader.wants_to_join({**EPOCHS, 1: EPOCHS[1] + 1}, now_ms, LAG_MS) == {}


def test_fetches_recorded_on_a_session_stamp_keep_a_follower_caught_up(leader: LeaderReplica) -> None:
    """A session that skips a quiet partition records its fetches on the stamp alone: the follower stays in
    sync while the stamp moves, and lags once the session stops fetching."""
    end = leader.log.log_end_offset
    for follower in (1, 2):
        leader.on_follower_fetch(follower, end, 0, EPOCHS[follower])
    stamp = PassStamp(0)
    leader.followers[1].quiet = stamp
    stamp.ms = 2 * LAG_MS

    assert leader.lagging(2 * LAG_MS, LAG_MS) == [2]  # follower 2's fetches were not recorded anywhere
    assert leader.lagging(3 * LAG_MS, LAG_MS) == [2]
    assert leader.lagging(3 * LAG_MS + 1, LAG_MS) == [1, 2]  # the session stopped at 2 × LAG_MS


def test_a_read_after_skipped_fetches_counts_them_as_kafka_would(leader: LeaderReplica) -> None:
    """Writes land after the last skipped fetch; the next fetch, still at the old end, is behind the leader
    but at what the leader's end was at the fetch before it (the stamp's), so it was caught up then."""
    end = leader.log.log_end_offset
    leader.on_follower_fetch(1, end, 0, EPOCHS[1])
    stamp = PassStamp(2000)
    leader.followers[1].quiet = stamp
    leader.log.append_as_leader(make_batch(1), 1, T0)
    leader.log.complete_appends(T0)

    leader.on_follower_fetch(1, end, 4000, EPOCHS[1])

    progress = leader.followers[1]
    assert (progress.quiet, progress.last_caught_up_ms, progress.last_fetch_ms) == (None, 2000, 4000)
    assert 1 not in leader.lagging(2000 + LAG_MS, LAG_MS)
    assert 1 in leader.lagging(2000 + LAG_MS + 1, LAG_MS)


def test_a_leader_is_abandoned_once_every_follower_in_its_isr_has_stopped_fetching(leader: LeaderReplica) -> None:
    leader.on_follower_fetch(1, leader.log.log_end_offset, 0, EPOCHS[1])
    leader.on_follower_fetch(2, leader.log.log_end_offset, LAG_MS, EPOCHS[2])
    now_ms = LAG_MS + 1

    assert not leader.abandoned(leader.lagging(now_ms, LAG_MS)), "broker 2 fetched within the lag time"
    assert leader.abandoned(leader.lagging(2 * LAG_MS + 1, LAG_MS))


def test_a_leader_alone_in_its_isr_is_never_abandoned(leader: LeaderReplica) -> None:
    """Nobody else can lead it: the controller elects from the ISR, so no follower moved on."""
    shrink_to_leader(leader, LAG_MS + 1)

    assert not leader.abandoned(leader.lagging(10 * LAG_MS, LAG_MS))


def test_the_high_watermark_holds_while_the_isr_is_below_min_insync_replicas(leader: LeaderReplica) -> None:
    """Kafka's leader keeps its high watermark while under min ISR (Partition.isUnderMinIsr, since 3.7): what
    it alone took with acks=1 is neither readable nor counted as committed until enough replicas have it."""
    leader.min_isr = 2
    shrink_to_leader(leader, LAG_MS + 1)
    held = leader.log.high_watermark
    leader.log.append_as_leader(make_batch(3), 1, T0)  # acks=1, the leader alone in the ISR
    leader.log.complete_appends(T0)

    assert not leader.maybe_advance_high_watermark()
    assert leader.log.high_watermark == held

    leader.on_follower_fetch(2, leader.log.log_end_offset, LAG_MS + 2, EPOCHS[2])
    leader.set_state(PartitionState(leader=0, leader_epoch=1, isr=(0, 2), broker_epochs={0: EPOCHS[0], 2: EPOCHS[2]}))

    assert leader.log.high_watermark == leader.log.log_end_offset == held + 3


def test_min_insync_replicas_above_the_replica_count_holds_nothing_back(leader: LeaderReplica) -> None:
    """Kafka takes min(min.insync.replicas, replicas): a topic asking for more in sync than it has replicas."""
    leader.min_isr = 5
    for follower in (1, 2):
        leader.on_follower_fetch(follower, leader.log.log_end_offset, 0, EPOCHS[follower])

    assert leader.log.high_watermark == leader.log.log_end_offset
