"""Who may call what: Kafka's authorization of every API (KafkaApis, AclApis, ControllerApis), one row per key.

``RULES`` is the table: for each API key this broker serves, the checks Kafka makes, in the order
it makes them, with the error a denial answers and where that error goes. Each handler makes
its own checks through the helpers below (the error goes where its response puts it: per
partition, per topic, per group or for the whole request); tests/integration/test_acl_table.py
sends every API once allowed and once denied, generated from this table, so the two cannot drift.

Rules this module keeps:

- With authorization off (no ``authorizer.class.name``: ``NodeState.acls`` is None) every check
  passes, as Kafka's ``authorizer.forall`` does.
- The principal and host are the connection's (``request_context``): ``User:<name>`` and the
  client's address without Kafka's leading slash.
- A denial the client asked about by name is logged at INFO on ``barnabas.authorizer`` (Kafka's
  ``kafka.authorizer.logger``); a filter (Metadata for all topics, ListGroups) logs nothing.
- SaslHandshake, SaslAuthenticate and ApiVersions are never checked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from barnabas.protocol import ErrorCode
from barnabas.security.acl import CLUSTER_NAME, AclOperation, ResourceType, supported_operations

from ..request_context import CLIENT_HOST, PRINCIPAL
from ._needs import NodeNeeds

__all__ = [
    "RULES",
    "Check",
    "allowed",
    "allowed_by_type",
    "allowed_names",
    "authorized_operations",
    "cluster_allowed",
]

audit = logging.getLogger("barnabas.authorizer")

_O, _R, _E = AclOperation, ResourceType, ErrorCode


@dataclass(frozen=True, slots=True)
class Check:
    """One authorization Kafka makes for an API: ``operation`` on ``resource`` (which one: ``on``), else ``error``."""

    operation: AclOperation
    resource: ResourceType
    on: str
    error: ErrorCode
    #: When the check is made, if not always ("a follower's fetch", "a transactional id is given").
    when: str = ""


def _c(operation: AclOperation, resource: ResourceType, on: str, error: ErrorCode, when: str = "") -> Check:
    return Check(operation, resource, on, error, when)


_CLUSTER = "the cluster"
_TOPICS = "each topic"
_GROUP = "the group"
_GROUP_RESOURCE = "a group resource is named"
_CAF, _TAF, _GAF, _XAF = (_E.cluster_authorization_failed, _E.topic_authorization_failed,
                          _E.group_authorization_failed, _E.transactional_id_authorization_failed)  # fmt: skip

#: API key -> the checks Kafka makes, first the one that decides whether anything is done at all.
RULES: dict[int, tuple[Check, ...]] = {
    0: (_c(_O.WRITE, _R.TOPIC, _TOPICS, _TAF), _c(_O.WRITE, _R.TRANSACTIONAL_ID, "the transactional id", _XAF,
                                                    "the batches are transactional")),  # Produce
    1: (_c(_O.READ, _R.TOPIC, _TOPICS, _TAF, "a consumer's fetch"),
        _c(_O.CLUSTER_ACTION, _R.CLUSTER, _CLUSTER, _TAF, "a follower's fetch (replica id set)")),  # Fetch
    2: (_c(_O.DESCRIBE, _R.TOPIC, _TOPICS, _TAF),),  # ListOffsets
    3: (_c(_O.DESCRIBE, _R.TOPIC, "each topic named (all topics: those allowed, silently)", _TAF),
        _c(_O.CREATE, _R.CLUSTER, "the cluster, else each topic to auto-create", _TAF, "a topic is auto-created"),
        _c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _E.none, "cluster authorized operations asked (v8-v10)")),  # Metadata
    8: (_c(_O.READ, _R.GROUP, _GROUP, _GAF), _c(_O.READ, _R.TOPIC, _TOPICS, _TAF)),  # OffsetCommit
    9: (_c(_O.DESCRIBE, _R.GROUP, "each group", _GAF),
        _c(_O.DESCRIBE, _R.TOPIC, "each topic (all topics: those allowed, silently)", _TAF)),  # OffsetFetch
    10: (_c(_O.DESCRIBE, _R.GROUP, "each group key", _GAF),
         _c(_O.DESCRIBE, _R.TRANSACTIONAL_ID, "each transaction key", _XAF)),  # FindCoordinator
    11: (_c(_O.READ, _R.GROUP, _GROUP, _GAF),),  # JoinGroup
    12: (_c(_O.READ, _R.GROUP, _GROUP, _GAF),),  # Heartbeat
    13: (_c(_O.READ, _R.GROUP, _GROUP, _GAF),),  # LeaveGroup
    14: (_c(_O.READ, _R.GROUP, _GROUP, _GAF),),  # SyncGroup
    15: (_c(_O.DESCRIBE, _R.GROUP, "each group", _GAF),),  # DescribeGroups
    16: (_c(_O.DESCRIBE, _R.CLUSTER, "the cluster, else each group (those allowed, silently)", _E.none),),  # ListGroups
    17: (),  # SaslHandshake
    18: (),  # ApiVersions
    19: (_c(_O.CREATE, _R.CLUSTER, "the cluster, else each topic", _TAF),
         _c(_O.DESCRIBE_CONFIGS, _R.TOPIC, "each topic created, for its configs in the answer", _TAF)),  # CreateTopics
    20: (_c(_O.DELETE, _R.TOPIC, _TOPICS, _TAF),),  # DeleteTopics
    21: (_c(_O.DELETE, _R.TOPIC, _TOPICS, _TAF),),  # DeleteRecords
    22: (_c(_O.IDEMPOTENT_WRITE, _R.CLUSTER, "the cluster, else WRITE on any topic", _CAF),  # InitProducerId
         _c(_O.WRITE, _R.TRANSACTIONAL_ID, "the transactional id", _XAF, "a transactional id is given")),
    23: (_c(_O.CLUSTER_ACTION, _R.CLUSTER, "the cluster, else DESCRIBE on each topic", _TAF),),  # OffsetForLeaderEpoch
    29: (_c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _CAF),),  # DescribeAcls
    30: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # CreateAcls
    31: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # DeleteAcls
    32: (_c(_O.DESCRIBE_CONFIGS, _R.TOPIC, "each topic resource", _TAF),
         _c(_O.DESCRIBE_CONFIGS, _R.CLUSTER, "the cluster, for broker resources", _CAF),
         _c(_O.DESCRIBE_CONFIGS, _R.GROUP, "each group resource", _GAF, _GROUP_RESOURCE)),  # DescribeConfigs
    33: (_c(_O.ALTER_CONFIGS, _R.TOPIC, "each topic resource", _TAF),
         _c(_O.ALTER_CONFIGS, _R.CLUSTER, "the cluster, for broker resources", _CAF),
         _c(_O.ALTER_CONFIGS, _R.GROUP, "each group resource", _GAF, _GROUP_RESOURCE)),  # AlterConfigs
    35: (_c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _CAF),),  # DescribeLogDirs
    36: (),  # SaslAuthenticate
    37: (_c(_O.ALTER, _R.TOPIC, _TOPICS, _TAF),),  # CreatePartitions
    42: (_c(_O.DELETE, _R.GROUP, "each group", _GAF),),  # DeleteGroups
    43: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # ElectLeaders
    44: (_c(_O.ALTER_CONFIGS, _R.TOPIC, "each topic resource", _TAF),
         _c(_O.ALTER_CONFIGS, _R.CLUSTER, "the cluster, for broker resources", _CAF),
         _c(_O.ALTER_CONFIGS, _R.GROUP, "each group resource", _GAF, _GROUP_RESOURCE)),  # IncrementalAlterConfigs
    45: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # AlterPartitionReassignments
    46: (_c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _CAF),),  # ListPartitionReassignments
    47: (_c(_O.DELETE, _R.GROUP, _GROUP, _GAF), _c(_O.READ, _R.TOPIC, _TOPICS, _TAF)),  # OffsetDelete
    48: (_c(_O.DESCRIBE_CONFIGS, _R.CLUSTER, _CLUSTER, _CAF),),  # DescribeClientQuotas
    49: (_c(_O.ALTER_CONFIGS, _R.CLUSTER, _CLUSTER, _CAF),),  # AlterClientQuotas
    50: (_c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _CAF),),  # DescribeUserScramCredentials
    51: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # AlterUserScramCredentials
    60: (_c(_O.DESCRIBE, _R.CLUSTER, _CLUSTER, _E.none, "cluster authorized operations asked"),),  # DescribeCluster
    64: (_c(_O.ALTER, _R.CLUSTER, _CLUSTER, _CAF),),  # UnregisterBroker
    75: (_c(_O.DESCRIBE, _R.TOPIC, "each topic named (all topics: those allowed, silently)",
            _TAF),),  # DescribeTopicPartitions
}  # fmt: skip


def _who() -> tuple[str, str]:
    return str(PRINCIPAL.get()), CLIENT_HOST.get().removeprefix("/")


def allowed(
    state: NodeNeeds, operation: AclOperation, resource_type: ResourceType, name: str, *, log_denied: bool = True
) -> bool:
    """Whether the connection's principal may do ``operation`` on the resource (True with authorization off)."""
    acls = state.node.acls
    if acls is None:
        return True
    principal, host = _who()
    if acls.authorizer.authorize(principal, host, operation, resource_type, name):
        return True
    if log_denied:
        audit.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s",
                   principal, operation.name, host, resource_type.name.title(), name)  # fmt: skip
    return False


def cluster_allowed(state: NodeNeeds, operation: AclOperation, *, log_denied: bool = True) -> bool:
    return allowed(state, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def allowed_names(
    state: NodeNeeds,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    log_denied: bool = True,
) -> set[str]:
    """The names among ``names`` the principal may do ``operation`` on (Kafka's filterByAuthorized)."""
    unique = set(names)
    if state.node.acls is None:
        return unique
    return {name for name in unique if allowed(state, operation, resource_type, name, log_denied=log_denied)}


def allowed_by_type(state: NodeNeeds, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether ``operation`` is allowed on some resource of the type (Kafka's authorizeByResourceType)."""
    acls = state.node.acls
    if acls is None:
        return True
    principal, host = _who()
    return acls.authorizer.authorize_by_resource_type(principal, host, operation, resource_type)


def authorized_operations(state: NodeNeeds, resource_type: ResourceType, name: str) -> int:
    """The operations allowed on the resource as Kafka's authorized-operations bit field (all without authorization)."""
    acls = state.node.acls
    if acls is None:
        return sum(1 << operation for operation in supported_operations(resource_type))
    principal, host = _who()
    return acls.authorizer.authorized_operations(principal, host, resource_type, name)
