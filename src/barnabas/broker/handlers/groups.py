"""FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14).

The request fields go to the GroupCoordinator as they are, read through one view per request
(timeouts in milliseconds); what still differs by version is LeaveGroup's one member before v3,
FindCoordinator's batched keys from v4 and v0 JoinGroup's lack of a rebalance timeout.
FindCoordinator creates ``__consumer_offsets`` on first use and names the leader of the group's
partition, COORDINATOR_NOT_AVAILABLE while there is none.

Authorization (KafkaApis): FindCoordinator needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED)
or transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) it asks about; JoinGroup, SyncGroup,
Heartbeat and LeaveGroup need READ on the group, else GROUP_AUTHORIZATION_FAILED and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.groups import MemberIdentity
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..offsets_topic import OFFSETS_TOPIC
from ..registry import ApiSpec
from ..request_context import CLIENT_HOST, LISTENER_NAME
from ._authorize import allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import GroupNeeds
from ._view import view_of

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
GROUP_KEY, TRANSACTION_KEY = 0, 1


# -- Request views -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorRequest:
    #: v0-v3: the one key asked for.
    key: str = ""
    #: v1+; v0 asks for a group coordinator.
    key_type: int = GROUP_KEY
    #: v4+ (KIP-699): several keys at once.
    coordinator_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequestProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupRequestProtocol, ...]
    #: v1+ (KIP-62); v0 uses the session timeout instead (Kafka's JoinGroupRequest.maybeOverrideRebalanceTimeout).
    rebalance_timeout_ms: int = -1
    #: v5+ (KIP-345 static membership).
    group_instance_id: str | None = None
    #: v8+ (KIP-800).
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    #: v3+ (KIP-345).
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeavingMember:
    """LeaveGroupRequest's MemberIdentity (v3+)."""

    member_id: str
    group_instance_id: str | None
    #: v5+ (KIP-800).
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: str
    #: v0-v2: the one member leaving.
    member_id: str = ""
    #: v3+ (KIP-345): members leaving together.
    members: tuple[LeavingMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequestAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupRequestAssignment, ...]
    #: v3+ (KIP-345).
    group_instance_id: str | None = None
    #: v5+ (KIP-559).
    protocol_type: str | None = None
    protocol_name: str | None = None


# -- FindCoordinator ---------------------------------------------------------------------------


async def _locate(state: GroupNeeds, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator for ``key``."""
    unavailable = (ErrorCode.coordinator_not_available, None, -1, "", -1)
    if key_type == GROUP_KEY and not allowed(state, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, None, -1, "", -1
    if key_type == TRANSACTION_KEY and not allowed(state, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed, None, -1, "", -1
    if key_type == TRANSACTION_KEY:
        return ErrorCode.coordinator_not_available, "transactions are not supported yet", -1, "", -1
    if key_type != GROUP_KEY:
        return ErrorCode.invalid_request, f"unknown key type {key_type}", -1, "", -1
    coordinator, offsets = state.groups, state.offsets_topic
    if not await offsets.ensure_exists():
        return unavailable
    partition_state = state.node.partition_state(OFFSETS_TOPIC, coordinator.partition_for(key))
    # The leader's endpoint on the listener the client came in on (Kafka's FindCoordinator does the same).
    found = state.node.brokers_on(LISTENER_NAME.get()).get(partition_state.leader) if partition_state else None
    if found is None:
        return unavailable
    broker, endpoint = found
    return ErrorCode.none, None, broker.broker_id, endpoint.host, endpoint.port


async def handle_find_coordinator(state: GroupNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(FIND_COORDINATOR, version)
    body = view_of(FindCoordinatorRequest, request.body)
    key_type = body.key_type
    if version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            code, message, node_id, host, port = await _locate(state, key, key_type)
            coordinators.append(
                make(
                    types.Coordinator,
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=message,
                )
            )
        response = make(types.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
    else:
        code, message, node_id, host, port = await _locate(state, body.key, key_type)
        response = make(
            types.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            node_id=node_id, host=host, port=port,
        )  # fmt: skip
    return encode_response(request.header.correlation_id, response)


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------


async def handle_join_group(state: GroupNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(JOIN_GROUP, version)
    body = view_of(JoinGroupRequest, request.body)
    if not _may_read(state, body.group_id):
        response = make(
            types.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
            generation_id=-1, protocol_type=None, protocol_name=_protocol_name(version, None), leader="",
            skip_assignment=False, member_id="", members=(),
        )  # fmt: skip
        return encode_response(request.header.correlation_id, response)
    result = await state.groups.join_group(
        body.group_id,
        body.member_id,
        body.group_instance_id,
        require_known_member_id=version >= 4,
        client_id=request.header.client_id or "",
        client_host=CLIENT_HOST.get(),
        rebalance_timeout_ms=body.session_timeout_ms if version == 0 else body.rebalance_timeout_ms,
        session_timeout_ms=body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
    )
    members = ()
    if result.error is ErrorCode.none:
        members = tuple(
            make(types.JoinGroupResponseMember, member_id=m, group_instance_id=instance, metadata=metadata)
            for m, instance, metadata in result.members
        )
    response = make(
        types.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type if result.error is ErrorCode.none else None,
        protocol_name=_protocol_name(version, result.protocol_name),
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=members,
    )
    return encode_response(request.header.correlation_id, response)


def _may_read(state: GroupNeeds, group_id: str) -> bool:
    return allowed(state, AclOperation.READ, ResourceType.GROUP, group_id)


def _protocol_name(version: int, name: str | None) -> str | None:
    """Nullable from v7; before that an empty string stands for none."""
    return name if version >= 7 else name or ""


async def handle_sync_group(state: GroupNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(SYNC_GROUP, version)
    body = view_of(SyncGroupRequest, request.body)
    if not _may_read(state, body.group_id):
        response = make(
            types.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
            protocol_type=None, protocol_name=None, assignment=b"",
        )  # fmt: skip
        return encode_response(request.header.correlation_id, response)
    result = await state.groups.sync_group(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id,
        assignment={a.member_id: bytes(a.assignment) for a in body.assignments},
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
    )
    response = make(
        types.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
    return encode_response(request.header.correlation_id, response)


def handle_heartbeat(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(HEARTBEAT, request.header.api_version)
    body = view_of(HeartbeatRequest, request.body)
    code = (
        state.groups.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
        if _may_read(state, body.group_id)
        else ErrorCode.group_authorization_failed
    )
    response = make(types.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)
    return encode_response(request.header.correlation_id, response)


def handle_leave_group(state: GroupNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(LEAVE_GROUP, version)
    body = view_of(LeaveGroupRequest, request.body)
    if not _may_read(state, body.group_id):
        denied = ErrorCode.group_authorization_failed
        response = make(types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=denied, members=())
        return encode_response(request.header.correlation_id, response)
    if version >= 3:
        leaving = [MemberIdentity(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [MemberIdentity(body.member_id)]
    top, errors = state.groups.leave_group(body.group_id, leaving)
    if version < 3 and top is ErrorCode.none and errors:
        top = errors[0]  # one member: its error is the answer
    members = tuple(
        make(types.MemberResponse, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e)
        for m, e in zip(leaving, errors, strict=True)
    ) if version >= 3 else ()  # fmt: skip
    response = make(types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top, members=members)
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(FIND_COORDINATOR, "FindCoordinator", 0, 6, handle_find_coordinator),
    ApiSpec(JOIN_GROUP, "JoinGroup", 0, 9, handle_join_group),
    ApiSpec(HEARTBEAT, "Heartbeat", 0, 4, handle_heartbeat),
    ApiSpec(LEAVE_GROUP, "LeaveGroup", 0, 5, handle_leave_group),
    ApiSpec(SYNC_GROUP, "SyncGroup", 0, 5, handle_sync_group),
]
