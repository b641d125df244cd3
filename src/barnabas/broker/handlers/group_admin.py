"""ListGroups (16), DescribeGroups (15) and DeleteGroups (42): groups as tools see them.

ListGroups lists the groups this broker coordinates (clients ask every broker), filtered by
state from v4; DescribeGroups reports an unknown group as Dead with no members, and member
metadata and assignments only while the group is Stable (Kafka's GroupMetadata.summary);
DeleteGroups removes only Empty groups (NON_EMPTY_GROUP otherwise).

Authorization (KafkaApis): ListGroups lists every group to a principal that may DESCRIBE the
cluster, else only the groups it may DESCRIBE (no error for the others); DescribeGroups needs
DESCRIBE and DeleteGroups DELETE on each group, else that group's GROUP_AUTHORIZATION_FAILED.
DescribeGroups answers authorized operations (v3+) when asked, for each group it describes.
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.groups import GroupState
from barnabas.protocol import AUTHORIZED_OPERATIONS_OMITTED, ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed, allowed_names, authorized_operations, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import GroupNeeds
from ._view import view_of

DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    #: v4+ (KIP-518).
    states_filter: tuple[str, ...] = ()
    #: v5+ (KIP-848).
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...]
    #: v3+ (KIP-430).
    include_authorized_operations: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...]


def handle_list_groups(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(LIST_GROUPS, request.header.api_version)
    body = view_of(ListGroupsRequest, request.body)
    wanted_states = {s.lower() for s in body.states_filter}
    wanted_types = {t.lower() for t in body.types_filter}
    coordinator = state.groups
    code = ErrorCode.coordinator_load_in_progress if coordinator.loading() else ErrorCode.none
    groups = coordinator.list_groups()
    if not cluster_allowed(state, AclOperation.DESCRIBE, log_denied=False):
        names = allowed_names(state, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups),
                              log_denied=False)  # fmt: skip
        groups = [g for g in groups if g.group_id in names]
    listed = tuple(
        make(
            types.ListedGroup,
            group_id=g.group_id,
            protocol_type=g.protocol_type or "",
            group_state=g.state.value,
            group_type="classic",
        )
        for g in groups
        if (not wanted_states or g.state.value.lower() in wanted_states)
        and (not wanted_types or "classic" in wanted_types)
    )
    response = make(types.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=code, groups=listed)
    return encode_response(request.header.correlation_id, response)


def handle_describe_groups(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_GROUPS, request.header.api_version)
    body = view_of(DescribeGroupsRequest, request.body)
    with_ops = request.header.api_version >= 3 and body.include_authorized_operations
    described = []
    for group_id in body.groups:
        if allowed(state, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            code, group = state.groups.describe_group(group_id)
        else:
            code, group = ErrorCode.group_authorization_failed, None
        if group is None:
            state_name = GroupState.DEAD.value if code is ErrorCode.none else ""
            described.append(
                make(
                    types.DescribedGroup,
                    error_code=code,
                    group_id=group_id,
                    group_state=state_name,
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                )
            )
            continue
        stable = group.is_in(GroupState.STABLE)
        protocol = group.protocol_name or ""
        members = tuple(
            make(
                types.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        described.append(
            make(
                types.DescribedGroup,
                error_code=code,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=protocol,
                members=members,
                authorized_operations=(
                    authorized_operations(state, ResourceType.GROUP, group_id)
                    if with_ops
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
            )
        )
    response = make(types.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(described))
    return encode_response(request.header.correlation_id, response)


async def handle_delete_groups(state: GroupNeeds, request: Request) -> bytes:
    types = response_types(DELETE_GROUPS, request.header.api_version)
    names = list(dict.fromkeys(view_of(DeleteGroupsRequest, request.body).groups_names))
    deletable = allowed_names(state, AclOperation.DELETE, ResourceType.GROUP, names)
    results = await state.groups.delete_groups([n for n in names if n in deletable]) if deletable else {}
    results.update((n, ErrorCode.group_authorization_failed) for n in names if n not in deletable)
    deleted = tuple(make(types.DeletableGroupResult, group_id=g, error_code=e) for g, e in results.items())
    response = make(types.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=deleted)
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(DESCRIBE_GROUPS, "DescribeGroups", 0, 5, handle_describe_groups),
    ApiSpec(LIST_GROUPS, "ListGroups", 0, 5, handle_list_groups),
    ApiSpec(DELETE_GROUPS, "DeleteGroups", 0, 2, handle_delete_groups),
]
