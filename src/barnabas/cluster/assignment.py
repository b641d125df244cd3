"""Replica placement for new partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``, ported as is.

Rules this module keeps (Kafka 2.x/3.x ``core/src/main/scala/kafka/admin/AdminUtils.scala``):

- It is a pure function of its arguments: no clock, no I/O, and randomness only through the ``rng``
  passed in. A fixed ``start_index`` makes the result fully deterministic, as Kafka's
  ``fixedStartIndex`` does; it fixes both the first broker and the initial follower shift.
- Brokers are taken in ascending id order, as ``AdminZkClient.getBrokerMetadatas`` sorts them before
  calling the placement, so the result never depends on the order of the mapping passed in.
- The three goals, in Kafka's words: spread replicas evenly over brokers; for the partitions led by one
  broker, spread their followers over the other brokers; and if every broker has a rack, put each
  partition's replicas on different racks where possible.
- Rack-unaware: the first replica goes round-robin from a random start; the followers of a partition
  sit at a shift from it that grows by one each time the round-robin wraps (``nextReplicaShift``).
- Rack-aware: the same round-robin over a rack-alternated broker list (one broker from each rack in
  turn); followers skip brokers whose rack already holds a replica while some rack has none, and
  brokers that already hold one while some broker has none. With at least as many replicas as racks
  every rack gets a replica, otherwise no rack gets two.
- Racks are used according to :class:`RackAwareMode` (Kafka's ``kafka.admin.RackAwareMode``): enforced
  (the default, as for ``CreateTopics``) fails when only some brokers have a rack; safe falls back to
  rack-unaware placement then; disabled ignores racks.
- Errors carry Kafka's messages: :class:`InvalidPartitionsError` (``INVALID_PARTITIONS``),
  :class:`InvalidReplicationFactorError` (``INVALID_REPLICATION_FACTOR``) and
  :class:`IncompleteRackInformationError` (Kafka's ``AdminOperationException``), all
  :class:`AssignmentError`, which is a ``ValueError``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "AssignmentError",
    "IncompleteRackInformationError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "RackAwareMode",
    "assign_replicas",
    "rack_alternated_broker_list",
    "start_index_for_new_partitions",
]

# Kafka's `AdminUtils.rand`: one generator for the process when the caller passes none.
_RANDOM = random.Random()


class AssignmentError(ValueError):
    """A replica assignment that cannot be made; the message is Kafka's."""


class InvalidPartitionsError(AssignmentError):
    """Kafka's InvalidPartitionsException (error code INVALID_PARTITIONS)."""


class InvalidReplicationFactorError(AssignmentError):
    """Kafka's InvalidReplicationFactorException (error code INVALID_REPLICATION_FACTOR)."""


class IncompleteRackInformationError(AssignmentError):
    """Kafka's AdminOperationException for brokers of which only some have a rack."""


class RackAwareMode(enum.Enum):
    """How racks are used (Kafka's ``kafka.admin.RackAwareMode``)."""

    ENFORCED = "enforced"
    """Use racks; fail if only some brokers have one."""
    SAFE = "safe"
    """Use racks only if every broker has one, else place as if none had."""
    DISABLED = "disabled"
    """Ignore racks."""


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Place ``replication_factor`` replicas of each new partition on ``brokers``, preferred leader first.

    Args:
        brokers: broker id → rack, None for a broker without one.
        partitions: how many partitions to place.
        replication_factor: replicas per partition.
        first_partition: id of the first partition to place (the current partition count when growing a
            topic, Kafka's ``startPartitionId``); partitions get consecutive ids from here.
        start_index: position in the (sorted or rack-alternated) broker list of the first partition's
            leader, and the initial follower shift (Kafka's ``fixedStartIndex``); None picks both at random.
        rack_aware_mode: whether and how racks are used, see :class:`RackAwareMode`.
        rng: the source of the random start and shift; a process-wide generator if None.

    Returns:
        partition id → replica broker ids, the first being the preferred leader, for ids
        ``first_partition`` .. ``first_partition + partitions - 1``.

    Raises:
        InvalidPartitionsError: ``partitions`` is not positive.
        InvalidReplicationFactorError: ``replication_factor`` is not positive or exceeds the broker count.
        IncompleteRackInformationError: only some brokers have a rack, in ENFORCED mode.
        ValueError: ``first_partition`` or ``start_index`` is negative.
    """
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    if first_partition < 0:
        raise ValueError(f"first_partition must not be negative, got {first_partition}")
    if start_index is not None and start_index < 0:
        raise ValueError(f"start_index must not be negative, got {start_index}")
    racks = {broker: rack for broker, rack in brokers.items() if rack is not None}
    rack_aware = rack_aware_mode is not RackAwareMode.DISABLED and bool(racks)
    if rack_aware and len(racks) < len(brokers):
        if rack_aware_mode is RackAwareMode.ENFORCED:
            raise IncompleteRackInformationError(
                "Not all brokers have rack information for replica rack aware assignment."
            )
        rack_aware = False
    if start_index is None:
        # Two draws, in this order, as Kafka's two `rand.nextInt(brokers)` calls.
        generator = rng if rng is not None else _RANDOM
        start_index = generator.randrange(len(brokers))
        replica_shift = generator.randrange(len(brokers))
    else:
        replica_shift = start_index
    new_partitions = range(first_partition, first_partition + partitions)
    if rack_aware:
        return _assign_rack_aware(
            racks, new_partitions, replication_factor, start_index=start_index, replica_shift=replica_shift
        )
    return _assign_rack_unaware(
        sorted(brokers), new_partitions, replication_factor, start_index=start_index, replica_shift=replica_shift
    )


def start_index_for_new_partitions(broker_ids: Iterable[int], partition0_leader: int) -> int:
    """The ``start_index`` Kafka uses when adding partitions to a topic.

    ``AdminZkClient.createNewPartitionsAssignment`` continues from the position of partition 0's first
    replica in the sorted broker list (the first broker with an id at least that large, or 0), and passes
    the current partition count as ``first_partition``.

    Args:
        broker_ids: the brokers that will be passed to :func:`assign_replicas`.
        partition0_leader: the first replica of the topic's partition 0.

    Returns:
        The index to pass as ``start_index``.
    """
    ordered = sorted(broker_ids)
    return next((index for index, broker in enumerate(ordered) if broker >= partition0_leader), 0)


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn: racks sorted by name, brokers by id within a rack.

    Kafka's ``getRackAlternatedBrokerList``: for rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8 it
    returns 0, 3, 6, 1, 4, 7, 2, 5, 8. A rack that runs out of brokers is skipped.

    Args:
        racks: broker id → rack.

    Returns:
        Every broker id once, alternating racks.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [iter(sorted(by_rack[rack])) for rack in sorted(by_rack)]
    result: list[int] = []
    rack_index = 0
    while len(result) < len(racks):
        taken = next(columns[rack_index], None)
        if taken is not None:
            result.append(taken)
        rack_index = (rack_index + 1) % len(columns)
    return result


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    # Kafka's `replicaIndex`: followers start 1 + shift after the leader and never land on it.
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _assign_rack_unaware(
    broker_list: Sequence[int], partitions: range, replication_factor: int, *, start_index: int, replica_shift: int
) -> dict[int, tuple[int, ...]]:
    # Kafka's `assignReplicasToBrokersRackUnaware`.
    n_brokers = len(broker_list)
    next_replica_shift = replica_shift
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in partitions:
        if partition > 0 and partition % n_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (partition + start_index) % n_brokers
        replicas = [broker_list[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[_replica_index(first_replica_index, next_replica_shift, j, n_brokers)])
        assignment[partition] = tuple(replicas)
    return assignment


def _assign_rack_aware(
    racks: Mapping[int, str], partitions: range, replication_factor: int, *, start_index: int, replica_shift: int
) -> dict[int, tuple[int, ...]]:
    # Kafka's `assignReplicasToBrokersRackAware`.
    num_racks = len(set(racks.values()))
    arranged = rack_alternated_broker_list(racks)
    n_brokers = len(arranged)
    next_replica_shift = replica_shift
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in partitions:
        if partition > 0 and partition % n_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (partition + start_index) % n_brokers
        leader = arranged[first_replica_index]
        replicas = [leader]
        racks_with_replicas = {racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first_replica_index, next_replica_shift * num_racks, k, n_brokers)]
                rack = racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, or that
                # already has a replica while some broker has none (Kafka's two skip rules).
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == n_brokers
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition] = tuple(replicas)
    return assignment
