"""Leader moves the controller makes on request: elections, reassignments, leader rebalancing.

Pure functions of the stored state and the live brokers, as ``next_partition_state`` is; the
controller writes what they return. Kafka's rules (ZooKeeper-mode KafkaController, KIP-455,
KIP-460):

- "Live" is a mapping of registered broker id to its registration (BrokerInfo); "in sync" means
  in the ISR in the broker epoch it is registered in now (``PartitionState.in_sync``): a broker
  that restarted is not in sync until its leader takes it back.
- The preferred leader is the first replica of the assignment. A preferred election moves
  leadership to it only if it is in sync; if it leads already the election is not needed. An
  unclean election is only needed for a partition without an in-sync leader, and takes an
  in-sync replica if there is one, else any live replica.
- A reassignment to target replicas T of a partition with original replicas O makes the
  assignment ``(T ++ O).distinct`` with ``adding = that - O`` and ``removing = that - T``, and
  bumps the leader epoch so every replica takes the new replica set. New replicas replicate
  from the leader and join the ISR as any follower does. Once every target replica is in the
  ISR the reassignment completes: the assignment becomes T, the removed replicas leave the ISR,
  and leadership moves to a live in-sync target replica if the leader is being removed.
- Cancelling reverts the assignment to O at once: replicas being added leave the ISR. A revert
  that would leave no live in-sync original replica to lead is refused (Kafka refuses one that
  needs an unclean election).
- Leader rebalancing (``auto.leader.rebalance.enable``) runs preferred elections on the
  partitions of every broker whose share of partitions led by someone else, among those it
  prefers, is above ``leader.imbalance.per.broker.percentage``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence

from barnabas.protocol import ErrorCode

from .brokers import BrokerInfo
from .model import PartitionState, Reassignment, Topic

__all__ = [
    "ElectionError",
    "Live",
    "broker_epochs",
    "cancel_reassignment",
    "completed_reassignment",
    "elected",
    "imbalanced_partitions",
    "in_sync",
    "initial_state",
    "preferred_election",
    "reassign",
    "recovered_election",
    "settle_on",
    "unclean_election",
]

TopicPartition = tuple[str, int]
Live = Mapping[int, BrokerInfo]


def broker_epochs(live: Live) -> dict[int, int]:
    """Broker id -> broker epoch of each live broker."""
    return {broker_id: info.epoch for broker_id, info in live.items()}


def in_sync(state: PartitionState, broker_id: int, live: Live) -> bool:
    """Whether ``broker_id`` is live and in the ISR in the incarnation it is registered in now."""
    info = live.get(broker_id)
    return info is not None and state.in_sync(broker_id, info.epoch)


def elected(state: PartitionState, leader: int, isr: Sequence[int], live: Live) -> PartitionState:
    """``state`` led by ``leader`` at the next leader epoch with ISR ``isr`` (their live broker epochs)."""
    moved = state.with_isr(isr, {r: live[r].epoch for r in isr if r in live})
    return dataclasses.replace(moved, leader=leader, leader_epoch=state.leader_epoch + 1, recovered=None)


def recovered_election(state: PartitionState, replicas: Sequence[int], live: Live) -> PartitionState | None:
    """The first leader of a partition restored from its replicas' logs, or None while it must wait.

    The coordination store that knew the partition's ISR is gone, so any replica may be the one
    that lagged. An acknowledged record is on the leader of its epoch, and every later leader was
    elected from an ISR that held it; so the replica whose log ends latest — the highest leader
    epoch in its log, then the highest offset — holds every acknowledged record the others hold.
    It is chosen only once every replica has reported (one not heard from may be that replica),
    and only while it is live; it leads alone in the ISR at an epoch above every reported one,
    and the others truncate to it and join as any follower does. A tie goes to assignment order.
    """
    ends = state.recovered
    if ends is None or any(r not in ends for r in replicas):
        return None
    best = _latest_log(ends, replicas)
    return _restored_leader(state, ends, best, live) if best in live else None


def _latest_log(ends: Mapping[int, tuple[int, int]], among: Sequence[int]) -> int:
    """Of ``among`` (all reported), the replica whose log ends latest; the first of them on a tie."""
    return max(among, key=lambda r: (ends[r], -among.index(r)))


def _restored_leader(
    state: PartitionState, ends: Mapping[int, tuple[int, int]], leader: int, live: Live
) -> PartitionState:
    """A restored partition led by ``leader`` alone, at an epoch above every one its replicas' logs hold."""
    epoch = max([state.leader_epoch, *(epoch for epoch, _ in ends.values())]) + 1
    return PartitionState(
        leader=leader,
        leader_epoch=epoch,
        isr=(leader,),
        controller_epoch=state.controller_epoch,
        broker_epochs={leader: live[leader].epoch},
        topic_id=state.topic_id,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ElectionError:
    """Why a partition gets no election: Kafka's error code and message."""

    code: ErrorCode
    message: str


def initial_state(replicas: Sequence[int], live: Live) -> PartitionState:
    """A new partition's first state: led by its first live replica, the live replicas in sync.

    Replicas that are not live stay out of the ISR and join once they have caught up, as any
    follower does; with none live the partition waits for the controller to elect a leader.
    """
    isr = [r for r in replicas if r in live]
    return PartitionState(
        leader=isr[0] if isr else -1, leader_epoch=0, isr=tuple(isr), broker_epochs={r: live[r].epoch for r in isr}
    )


def preferred_election(state: PartitionState, replicas: Sequence[int], live: Live) -> PartitionState | ElectionError:
    """The state with the preferred replica leading, or why that cannot or need not happen."""
    preferred = replicas[0]
    if state.leader == preferred and in_sync(state, preferred, live):
        return ElectionError(ErrorCode.election_not_needed, "Leader is already the preferred replica.")
    if not in_sync(state, preferred, live):
        return ElectionError(
            ErrorCode.preferred_leader_not_available,
            f"Failed to elect leader: preferred replica {preferred} is not alive or not in the ISR {list(state.isr)}.",
        )
    return dataclasses.replace(state, leader=preferred, leader_epoch=state.leader_epoch + 1)


def unclean_election(state: PartitionState, replicas: Sequence[int], live: Live) -> PartitionState | ElectionError:
    """A leader for a partition that has no in-sync leader: in-sync if possible, else any live replica.

    A restored partition still waiting for a replica's report (``recovered_election``) takes the
    live replica whose reported log ends latest: the operator gives up on the missing ones.
    """
    if in_sync(state, state.leader, live):
        return ElectionError(ErrorCode.election_not_needed, "Partition has a live leader already.")
    if state.recovered is not None:
        reported = [r for r in replicas if r in live and r in state.recovered]
        if not reported:
            return ElectionError(ErrorCode.eligible_leaders_not_available, "No live replica has reported its log yet.")
        return _restored_leader(state, state.recovered, _latest_log(state.recovered, reported), live)
    current = state.current_isr(broker_epochs(live))
    candidates = [r for r in replicas if r in current]
    if candidates:
        return elected(state, candidates[0], current, live)
    alive = [r for r in replicas if r in live]
    if not alive:
        return ElectionError(ErrorCode.eligible_leaders_not_available, "No live replica can lead the partition.")
    return elected(state, alive[0], (alive[0],), live)


def reassign(topic: Topic, partition: int, target: Sequence[int]) -> Topic:
    """``topic`` with ``partition`` moving to ``target`` (replacing any reassignment in progress)."""
    original = topic.original_replicas(partition)
    full = tuple(dict.fromkeys((*target, *original)))
    adding = tuple(r for r in full if r not in original)
    removing = tuple(r for r in full if r not in target)
    reassigning = dict(topic.reassigning)
    if adding or removing:
        reassigning[partition] = Reassignment(adding, removing)
    else:
        reassigning.pop(partition, None)
    return dataclasses.replace(topic, assignment={**topic.assignment, partition: full}, reassigning=reassigning)


def cancel_reassignment(
    topic: Topic, partition: int, state: PartitionState, live: Live
) -> tuple[Topic, PartitionState] | ElectionError:
    """The topic and state with ``partition`` back on its original replicas, or why not."""
    if partition not in topic.reassigning:
        return ElectionError(ErrorCode.no_reassignment_in_progress, "No reassignment is in progress.")
    original = topic.original_replicas(partition)
    settled = settle_on(state, original, live)
    if settled.leader < 0:
        return ElectionError(
            ErrorCode.invalid_replica_assignment,
            f"Unable to revert the reassignment of {topic.name}-{partition}: no live in-sync original replica.",
        )
    reassigning = {p: r for p, r in topic.reassigning.items() if p != partition}
    reverted = dataclasses.replace(topic, assignment={**topic.assignment, partition: original}, reassigning=reassigning)
    return reverted, settled


def settle_on(state: PartitionState, replicas: Sequence[int], live: Live) -> PartitionState:
    """The state once the partition's replica set is ``replicas``: at a new epoch, led from within it.

    Replicas outside the set leave the ISR; a leader outside it, or not in sync, hands over to the
    first in-sync replica of the set (none: the partition has no leader).
    """
    isr = tuple(r for r in state.isr if r in replicas)
    if state.leader in replicas and in_sync(state, state.leader, live):
        leader = state.leader
    else:
        candidates = [r for r in replicas if r in isr and in_sync(state, r, live)]
        leader = candidates[0] if candidates else -1
    return dataclasses.replace(state.with_isr(isr, {}), leader=leader, leader_epoch=state.leader_epoch + 1)


def completed_reassignment(
    topic: Topic, partition: int, state: PartitionState, live: Live
) -> tuple[Topic, PartitionState] | None:
    """The topic and state once ``partition``'s reassignment completes, or None while it cannot yet."""
    if partition not in topic.reassigning:
        return None
    target = topic.target_replicas(partition)
    if not all(in_sync(state, r, live) for r in target):
        return None
    settled = settle_on(state, target, live)
    if settled.leader < 0:
        return None  # no live in-sync target replica can lead yet: keep the old leader meanwhile
    reassigning = {p: r for p, r in topic.reassigning.items() if p != partition}
    done = dataclasses.replace(topic, assignment={**topic.assignment, partition: target}, reassigning=reassigning)
    return done, settled


def imbalanced_partitions(
    topics: Mapping[str, Topic],
    states: Mapping[TopicPartition, PartitionState],
    live: Live,
    threshold_percent: int,
) -> list[TopicPartition]:
    """Partitions to move back to their preferred leader (Kafka's checkAndTriggerAutoLeaderRebalance).

    For each broker, its imbalance is the share of partitions it prefers that another broker
    leads; above the threshold, each of them whose preferred leader is alive and in sync is
    returned. Partitions under reassignment are left alone.
    """
    preferred_by: dict[int, list[TopicPartition]] = defaultdict(list)
    for name, topic in topics.items():
        for partition, replicas in topic.assignment.items():
            if replicas and partition not in topic.reassigning and (name, partition) in states:
                preferred_by[replicas[0]].append((name, partition))
    chosen: list[TopicPartition] = []
    for broker, partitions in sorted(preferred_by.items()):
        if broker not in live:
            continue
        elsewhere = [tp for tp in partitions if states[tp].leader != broker]
        if len(elsewhere) * 100 <= threshold_percent * len(partitions):
            continue
        chosen.extend(tp for tp in elsewhere if in_sync(states[tp], broker, live))
    return chosen
