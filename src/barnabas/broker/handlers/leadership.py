"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Admin clients send these to the controller (Kafka's ControllerNodeProvider); the broker that is
controller hands them to its Controller, any other answers NOT_CONTROLLER so the client looks
the controller up again and retries. The writes are made before the answer, so a client that
reads metadata after the answer sees them (Kafka's ElectLeaders waits for the same).
ElectLeaders and AlterPartitionReassignments need ALTER on the cluster, ListPartitionReassignments
DESCRIBE, else CLUSTER_AUTHORIZATION_FAILED (for the request and each partition it names).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from barnabas.cluster import NotControllerError
from barnabas.cluster.leadership import ElectionError
from barnabas.coordination import CoordinationError, FencedError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import ControllerNeeds
from ._view import view_of

ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
PREFERRED, UNCLEAN = 0, 1

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersTopic:
    """ElectLeadersRequest's TopicPartitions."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    #: Null means every partition.
    topic_partitions: tuple[ElectLeadersTopic, ...] | None
    timeout_ms: int
    #: v1+ (KIP-460); v0 elects preferred leaders.
    election_type: int = PREFERRED


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition:
    partition_index: int
    #: Null cancels the partition's reassignment.
    replicas: tuple[int, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest:
    timeout_ms: int
    topics: tuple[ReassignableTopic, ...]
    #: v1+ (KIP-860).
    allow_replication_factor_change: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsTopics:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsRequest:
    timeout_ms: int
    #: Null means every partition.
    topics: tuple[ListPartitionReassignmentsTopics, ...] | None


class _Denied(Exception):  # noqa: N818 - a refusal, not an error of ours
    """The principal may not ask this of the cluster."""


def _failure(exc: Exception) -> tuple[ErrorCode, str]:
    """The top-level answer when the controller could not act at all."""
    if isinstance(exc, _Denied):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    if isinstance(exc, NotControllerError | FencedError):
        return ErrorCode.not_controller, "This broker is not the controller."
    log.warning("controller request failed: %s", exc)
    return ErrorCode.request_timed_out, f"Coordination is unavailable: {exc}"


def _by_topic(results: Mapping[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for (name, partition), result in sorted(results.items()):
        grouped.setdefault(name, []).append((partition, result))
    return grouped


def _per_topic(
    results: Mapping[TopicPartition, ElectionError | None],
    topic_entry: Callable[[str, tuple[Any, ...]], Any],
    partition_entry: Callable[[int, ErrorCode, str | None], Any],
) -> tuple[Any, ...]:
    """Per-partition outcomes as the response's topic entries, each holding its partition entries."""
    return tuple(
        topic_entry(
            name,
            tuple(
                partition_entry(partition, ErrorCode.none, None)
                if error is None
                else partition_entry(partition, error.code, error.message)
                for partition, error in partitions
            ),
        )
        for name, partitions in _by_topic(results).items()
    )


async def handle_elect_leaders(state: ControllerNeeds, request: Request) -> bytes:
    types = response_types(ELECT_LEADERS, request.header.api_version)
    body = view_of(ElectLeadersRequest, request.body)
    preferred = body.election_type == PREFERRED
    wanted = (
        None
        if body.topic_partitions is None
        else list(dict.fromkeys((t.topic, p) for t in body.topic_partitions for p in t.partitions))
    )
    top_code, top_message = ErrorCode.none, None
    results: Mapping[TopicPartition, ElectionError | None]
    try:
        if not cluster_allowed(state, AclOperation.ALTER):
            raise _Denied
        results = await state.controller.elect_leaders(wanted, preferred=preferred)
    except (NotControllerError, CoordinationError, _Denied) as exc:
        top_code, top_message = _failure(exc)
        results = {tp: ElectionError(top_code, top_message) for tp in wanted or ()}
    election_results = _per_topic(
        results,
        lambda name, partitions: make(types.ReplicaElectionResult, topic=name, partition_result=partitions),
        lambda partition, code, message: make(
            types.PartitionResult, partition_id=partition, error_code=code, error_message=message
        ),
    )
    response = make(
        types.ElectLeadersResponse,
        throttle_time=NO_THROTTLE,
        error_code=top_code,
        replica_election_results=election_results,
    )
    return encode_response(request.header.correlation_id, response)


async def handle_alter_partition_reassignments(state: ControllerNeeds, request: Request) -> bytes:
    types = response_types(ALTER_PARTITION_REASSIGNMENTS, request.header.api_version)
    body = view_of(AlterPartitionReassignmentsRequest, request.body)
    changes: dict[TopicPartition, Sequence[int] | None] = {}
    for topic in body.topics:
        for requested in topic.partitions:
            replicas = None if requested.replicas is None else list(requested.replicas)
            changes[(topic.name, requested.partition_index)] = replicas
    allow_rf_change = body.allow_replication_factor_change
    top_code, top_message = ErrorCode.none, None
    results: Mapping[TopicPartition, ElectionError | None] = {}
    try:
        if not cluster_allowed(state, AclOperation.ALTER):
            raise _Denied
        results = await state.controller.alter_reassignments(changes, allow_replication_factor_change=allow_rf_change)
    except (NotControllerError, CoordinationError, _Denied) as exc:
        top_code, top_message = _failure(exc)
        if isinstance(exc, _Denied):
            results = {tp: ElectionError(top_code, top_message) for tp in changes}
    responses = _per_topic(
        results,
        lambda name, partitions: make(types.ReassignableTopicResponse, name=name, partitions=partitions),
        lambda partition, code, message: make(
            types.ReassignablePartitionResponse, partition_index=partition, error_code=code, error_message=message
        ),
    )
    response = make(
        types.AlterPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_rf_change,
        error_code=top_code,
        error_message=top_message,
        responses=responses,
    )
    return encode_response(request.header.correlation_id, response)


def handle_list_partition_reassignments(state: ControllerNeeds, request: Request) -> bytes:
    types = response_types(LIST_PARTITION_REASSIGNMENTS, request.header.api_version)
    body = view_of(ListPartitionReassignmentsRequest, request.body)
    wanted: set[TopicPartition] | None = None
    if body.topics is not None:
        wanted = {(t.name, p) for t in body.topics for p in t.partition_indexes}
    top_code, top_message = ErrorCode.none, None
    ongoing: dict[TopicPartition, Any] = {}
    if not cluster_allowed(state, AclOperation.DESCRIBE):
        top_code, top_message = _failure(_Denied())
    elif state.controller.fence is None:
        top_code, top_message = ErrorCode.not_controller, "This broker is not the controller."
    else:
        for name, topic in state.node.topics.topics.items():
            for partition, moving in topic.reassigning.items():
                if wanted is None or (name, partition) in wanted:
                    ongoing[(name, partition)] = make(
                        types.OngoingPartitionReassignment,
                        partition_index=partition,
                        replicas=topic.assignment[partition],
                        adding_replicas=moving.adding,
                        removing_replicas=moving.removing,
                    )
    topics = tuple(
        make(types.OngoingTopicReassignment, name=name, partitions=tuple(entry for _, entry in partitions))
        for name, partitions in _by_topic(ongoing).items()
    )
    response = make(
        types.ListPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        error_code=top_code,
        error_message=top_message,
        topics=topics,
    )
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(ELECT_LEADERS, "ElectLeaders", 0, 2, handle_elect_leaders),
    ApiSpec(ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1, handle_alter_partition_reassignments),
    ApiSpec(LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0, handle_list_partition_reassignments),
]
