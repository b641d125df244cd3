"""Create, delete, grow and reconfigure topics: the checks Kafka makes, then storage, then logs.

Shared by CreateTopics, Metadata auto-creation, DeleteTopics, CreatePartitions and
IncrementalAlterConfigs. Failures raise TopicAdminError carrying the Kafka error code the
handler puts in its response; nothing is written until every check has passed. New replicas
are placed on the live brokers that are not cordoned (``cluster.cordons``, KIP-1066).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from barnabas.cluster import Topic, TopicExistsError, initial_state, topic_name_problem
from barnabas.cluster.assignment import (
    AssignmentError,
    IncompleteRackInformationError,
    InvalidPartitionsError,
    assign_replicas,
    start_index_for_new_partitions,
)
from barnabas.config import BrokerConfig, ConfigError, log_config_for, validate_topic_overrides
from barnabas.coordination import VersionConflictError
from barnabas.log import LogConfig
from barnabas.protocol import ErrorCode

from .state import NodeState

__all__ = [
    "TopicAdminError",
    "alter_topic_config",
    "create_partitions",
    "create_topic",
    "delete_topic",
    "reconcile_local_logs",
]

log = logging.getLogger(__name__)

#: Times a topic change is redone after another broker changed the topic first.
UPDATE_ATTEMPTS = 5


class TopicAdminError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def live_brokers(state: NodeState) -> list[int]:
    """Brokers that can hold replicas: the registered ones (this one always included)."""
    return sorted(state.live_brokers())


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def _check_name(state: NodeState, name: str) -> None:
    if problem := topic_name_problem(name):
        raise TopicAdminError(ErrorCode.invalid_topic_exception, problem)
    if name in state.topics.topics:
        raise TopicAdminError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    for existing in state.topics.topics:
        if _collision_key(existing) == _collision_key(name):
            raise TopicAdminError(
                ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {existing}"
            )


async def _placeable_brokers(state: NodeState) -> dict[int, str | None]:
    """The live brokers new replicas may go to, with their racks: cordoned ones are left out (KIP-1066).

    The cordons are read afresh, so a broker cordoned through another broker is left out here too.
    """
    cordoned = await state.cordons.current()
    return {broker_id: info.rack for broker_id, info in state.live_brokers().items() if broker_id not in cordoned}


def _assign(
    state: NodeState,
    brokers: Mapping[int, str | None],
    partitions: range,
    replication_factor: int,
    start_index: int | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-aware placement over ``brokers`` (broker id -> rack), the placeable live brokers."""
    try:
        return assign_replicas(
            brokers, len(partitions), replication_factor, first_partition=partitions.start, start_index=start_index
        )
    except InvalidPartitionsError as exc:
        raise TopicAdminError(ErrorCode.invalid_partitions, str(exc)) from None
    except IncompleteRackInformationError as exc:
        raise TopicAdminError(ErrorCode.invalid_replica_assignment, str(exc)) from None
    except AssignmentError as exc:
        cordoned = sorted(set(state.live_brokers()) - set(brokers))
        reason = f" (cordoned, so left out: brokers {', '.join(map(str, cordoned))})" if cordoned else ""
        raise TopicAdminError(ErrorCode.invalid_replication_factor, f"{exc}{reason}") from None


def _check_assignment(
    state: NodeState, assignment: Mapping[int, Sequence[int]], first_partition: int
) -> dict[int, tuple[int, ...]]:
    brokers = set(live_brokers(state))
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise TopicAdminError(ErrorCode.invalid_replica_assignment, "partitions must be consecutive from 0")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise TopicAdminError(ErrorCode.invalid_replica_assignment, "every partition needs the same replica count")
    for partition, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise TopicAdminError(ErrorCode.invalid_replica_assignment, f"partition {partition} lists a broker twice")
        unknown = set(replicas) - brokers
        if unknown:
            raise TopicAdminError(
                ErrorCode.invalid_replica_assignment,
                f"partition {partition} names unknown brokers {sorted(unknown)}",
            )
    return {p: tuple(replicas) for p, replicas in assignment.items()}


def _check_configs(state: NodeState, configs: Mapping[str, str | None]) -> tuple[dict[str, str], LogConfig]:
    """Validated overrides and the log settings they give; INVALID_CONFIG before anything is stored."""
    try:
        overrides = validate_topic_overrides(configs)
        return overrides, state.log_config(overrides)
    except (ConfigError, ValueError) as exc:
        raise TopicAdminError(ErrorCode.invalid_config, str(exc)) from None


async def create_topic(
    state: NodeState,
    name: str,
    *,
    num_partitions: int = -1,
    replication_factor: int = -1,
    assignment: Mapping[int, Sequence[int]] | None = None,
    configs: Mapping[str, str | None] | None = None,
    validate_only: bool = False,
) -> Topic:
    """Validate and (unless ``validate_only``) create a topic with its local logs."""
    _check_name(state, name)
    overrides, log_config = _check_configs(state, configs or {})
    if assignment:
        if num_partitions != -1 or replication_factor != -1:
            raise TopicAdminError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        replicas = _check_assignment(state, assignment, 0)
    else:
        partitions = state.config["num.partitions"] if num_partitions == -1 else num_partitions
        factor = state.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise TopicAdminError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        if factor <= 0:
            raise TopicAdminError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        replicas = _assign(state, await _placeable_brokers(state), range(partitions), factor)
    topic = Topic(
        name=name,
        topic_id=uuid.uuid4(),
        assignment=replicas,
        config=overrides,
        internal=name.startswith("__"),
    )
    if validate_only:
        return topic
    states = {p: initial_state(r, state.live_brokers()) for p, r in replicas.items()}
    try:
        await state.topics.create(topic, states)
    except TopicExistsError:
        raise TopicAdminError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.") from None
    _create_local_logs(state, topic, replicas, log_config)
    state.metadata_changed_here([name])
    log.info("created topic %s (%s) with %d partitions", name, topic.topic_id, len(replicas))
    return topic


def _create_local_logs(
    state: NodeState, topic: Topic, replicas: Mapping[int, Sequence[int]], config: LogConfig | None = None
) -> None:
    """Create this broker's missing logs among ``replicas``, with ``config`` (default: the topic's stored
    config, worked out only when a log is missing: most reconcile passes create nothing)."""
    me = state.broker_id
    missing = [p for p, brokers in replicas.items() if me in brokers and state.logs.get(topic.name, p) is None]
    if not missing:
        return
    if config is None:
        config = stored_log_config(state.config, topic)
    now_ms = state.now_ms()
    for partition in missing:
        state.logs.create(topic.name, partition, topic.topic_id, config, now_ms)


async def delete_topic(state: NodeState, name: str) -> Topic:
    """Delete a topic from storage, then its local logs."""
    topic = state.topic(name)
    if topic is None:
        raise TopicAdminError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic.")
    if not state.config["delete.topic.enable"]:
        raise TopicAdminError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
    await state.topics.delete(name)
    for partition in topic.assignment:
        if state.logs.get(name, partition) is not None:
            state.logs.delete_topic_partition(name, partition, state.now_ms())
        state.fetch_waiters.notify((name, partition))
    state.metadata_changed_here()
    log.info("deleted topic %s (%s)", name, topic.topic_id)
    return topic


async def create_partitions(
    state: NodeState,
    name: str,
    count: int,
    *,
    assignment: Sequence[Sequence[int]] | None = None,
    validate_only: bool = False,
) -> Topic:
    """Grow a topic to ``count`` partitions.

    The topic's document is changed by compare-and-set; when another broker changed it first (two
    CreatePartitions at once), the checks run again on what it stored, as Kafka's single controller
    would have run them second.
    """
    return await _retrying_on_conflict(
        state, name, lambda: _create_partitions_once(state, name, count, assignment, validate_only)
    )


async def _retrying_on_conflict(state: NodeState, name: str, change: Callable[[], Awaitable[Topic]]) -> Topic:
    """Run ``change`` again on the stored topic each time another writer changed it first."""
    for _ in range(UPDATE_ATTEMPTS):
        try:
            return await change()
        except VersionConflictError:
            await state.topics.refresh_topic(name)
    raise TopicAdminError(ErrorCode.request_timed_out, f"The topic '{name}' kept changing; try again.")


async def _create_partitions_once(
    state: NodeState, name: str, count: int, assignment: Sequence[Sequence[int]] | None, validate_only: bool
) -> Topic:
    topic = state.topic(name)
    if topic is None:
        raise TopicAdminError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    current = topic.partition_count
    if count <= current:
        raise TopicAdminError(
            ErrorCode.invalid_partitions,
            f"Topic currently has {current} partitions, which is higher than the requested {count}.",
        )
    factor = len(topic.assignment[0])
    new_partitions = range(current, count)
    if assignment:
        if len(assignment) != len(new_partitions):
            raise TopicAdminError(
                ErrorCode.invalid_replica_assignment,
                f"Increasing the number of partitions by {len(new_partitions)} but {len(assignment)} "
                "assignments provided.",
            )
        added = _check_assignment(state, dict(zip(new_partitions, assignment, strict=True)), current)
        if any(len(replicas) != factor for replicas in added.values()):
            raise TopicAdminError(ErrorCode.invalid_replica_assignment, "replica count differs from the topic's")
    else:  # continue the round robin where partition 0 starts it, as Kafka's addPartitions does
        brokers = await _placeable_brokers(state)
        start = start_index_for_new_partitions(brokers, topic.assignment[0][0])
        added = _assign(state, brokers, new_partitions, factor, start)
    grown = dataclasses.replace(topic, assignment={**topic.assignment, **added})
    if validate_only:
        return grown
    states = {p: initial_state(r, state.live_brokers()) for p, r in added.items()}
    await state.topics.update(grown, states)
    _create_local_logs(state, grown, added, state.log_config(grown.config))
    state.metadata_changed_here([name])
    log.info("topic %s grew from %d to %d partitions", name, current, count)
    return grown


async def alter_topic_config(
    state: NodeState, name: str, overrides: Mapping[str, str | None], *, validate_only: bool = False
) -> Topic:
    """Replace a topic's config overrides (None values are removed) and apply them to its logs.

    Another broker's change of the topic meanwhile is read and this one applied over it.
    """

    async def alter() -> Topic:
        topic = state.topic(name)
        if topic is None:
            raise TopicAdminError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        normalised, config = _check_configs(state, overrides)
        updated = dataclasses.replace(topic, config=normalised)
        if validate_only:
            return updated
        await state.topics.update(updated)
        state.logs.update_config(name, config)
        return updated

    return await _retrying_on_conflict(state, name, alter)


def stored_log_config(config: BrokerConfig, topic: Topic) -> LogConfig:
    """A stored topic's log settings; overrides the log refuses fall back to broker defaults (logged).

    Only data written before a validation rule existed can hit the fallback; refusing to start
    over it would take every other topic down with it.
    """
    try:
        return log_config_for(config, topic.config)
    except ValueError as exc:
        log.error("topic %s has an invalid stored config (%s); using broker defaults", topic.name, exc)
        return log_config_for(config, {})


def reconcile_local_logs(
    state: NodeState, topics: Collection[str] | None = None, local: Sequence[tuple[str, int]] | None = None
) -> None:
    """Make local logs match storage: create missing replicas, delete logs of deleted topics
    (only the logs of ``topics`` when given; ``local``, when given, lists those topics' local logs,
    so that a pass over every topic a few at a time does not list every log each time).

    A log whose topic was deleted, or deleted and re-created under a new id, while this broker
    was down is removed, as Kafka's StopReplica with deletion would. A topic whose stored
    document does not read is not a deleted one: its logs stay (TopicStore.unreadable_topics);
    nor is one a restore could not rebuild (NodeState.kept_topics).
    """
    stored = state.topics.topics
    wanted = None if topics is None else set(topics)
    expected = {
        (topic.name, partition): topic
        for topic in (stored.values() if wanted is None else [stored[n] for n in wanted if n in stored])
        for partition, replicas in topic.assignment.items()
        if state.broker_id in replicas
    }
    kept = state.topics.unreadable_topics | state.kept_topics
    if local is None:
        every = state.logs.partitions()
        local = every if wanted is None else [tp for tp in every if tp[0] in wanted]
    for name, partition in local:
        partition_log = state.logs.get(name, partition)
        topic = expected.get((name, partition))
        if topic is None and name in kept and name not in state.topics.topics:
            continue
        stale_id = (
            partition_log is not None
            and topic is not None
            and partition_log.topic_id
            not in (
                None,
                topic.topic_id,
            )
        )
        if topic is None or stale_id:
            log.info("removing local log %s-%d: its topic no longer exists", name, partition)
            state.logs.delete_topic_partition(name, partition, state.now_ms())
    for topic in {id(t): t for t in expected.values()}.values():
        _create_local_logs(state, topic, topic.assignment)
