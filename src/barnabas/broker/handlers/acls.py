"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): ACLs in coordination (Kafka's AclApis).

Kafka's errors, in Kafka's order:

- The caller needs DESCRIBE (DescribeAcls) or ALTER (Create, Delete) on the cluster, else every
  result is CLUSTER_AUTHORIZATION_FAILED; with authorization off every result is SECURITY_DISABLED.
- A creation Kafka refuses (AclControlManager.validateNewAcl: an UNKNOWN or ANY type, a MATCH or
  ANY pattern, a CLUSTER named other than ``kafka-cluster``, an empty name, a principal that is not
  ``type:name``) is INVALID_REQUEST, as is a filter with an UNKNOWN field; the others are applied.
  Kafka closes the connection on a request with UNKNOWN fields (it fails to parse); barnabas
  answers INVALID_REQUEST for them instead, so a client learns why.
- Versions 1-3 are served (Kafka 4 dropped v0, KIP-896); every client that manages ACLs uses v1+.
- A change is in this broker's authorizer when the answer goes, and reaches the others by their
  watch (``barnabas.cluster.acls``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from barnabas.cluster.acls import AclStore
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    creation_problem,
    filter_problem,
)

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

__all__ = ["SPECS"]

log = logging.getLogger(__name__)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
_DISABLED = "No Authorizer is configured on the broker"
_DENIED = "Cluster authorization failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilterView:
    """The filter fields, the same in a DescribeAcls request's body and in each DeleteAcls filter."""

    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int = PatternType.LITERAL
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreation:
    resource_type: int
    resource_name: str
    resource_pattern_type: int = PatternType.LITERAL
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: tuple[AclFilterView, ...]


def _filter(view: AclFilterView) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.of(view.resource_type_filter), view.resource_name_filter, PatternType.of(view.pattern_type_filter),
        view.principal_filter, view.host_filter, AclOperation.of(view.operation),
        AclPermissionType.of(view.permission_type),
    )  # fmt: skip


def _binding(creation: AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType.of(creation.resource_type),
            creation.resource_name,
            PatternType.of(creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            AclOperation.of(creation.operation),
            AclPermissionType.of(creation.permission_type),
        ),
    )


def _refusal(state: NodeNeeds, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """The error every result gets when the caller may not do this, or when there are no ACLs to manage."""
    if not cluster_allowed(state, operation):
        return ErrorCode.cluster_authorization_failed, _DENIED
    if state.node.acls is None:
        return ErrorCode.security_disabled, _DISABLED
    return None


# -- DescribeAcls -------------------------------------------------------------------------------


def handle_describe_acls(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_ACLS, request.header.api_version)
    acl_filter = _filter(view_of(AclFilterView, request.body))
    resources: list[Any] = []
    error, message = _refusal(state, AclOperation.DESCRIBE) or (ErrorCode.none, None)
    if error is ErrorCode.none and (problem := filter_problem(acl_filter)):
        error, message = ErrorCode.invalid_request, problem
    if error is ErrorCode.none:
        assert state.node.acls is not None
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in state.node.acls.authorizer.acls(acl_filter):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        resources = [
            make(
                types.DescribeAclsResource,
                resource_type=pattern.resource_type,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type,
                acls=tuple(
                    make(
                        types.AclDescription,
                        principal=e.principal,
                        host=e.host,
                        operation=e.operation,
                        permission_type=e.permission,
                    )
                    for e in entries
                ),
            )
            for pattern, entries in by_pattern.items()
        ]
    response = make(
        types.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
        resources=tuple(resources),
    )  # fmt: skip
    return encode_response(request.header.correlation_id, response)


# -- CreateAcls ---------------------------------------------------------------------------------


async def _create(store: AclStore, bindings: list[AclBinding]) -> tuple[ErrorCode, str | None]:
    try:
        await store.create(bindings)
    except CoordinationError as exc:
        log.warning("creating ACLs failed: %s", exc)
        return ErrorCode.unknown_server_error, f"coordination: {exc}"
    for binding in bindings:
        log.info("ACL created: %s", binding)
    return ErrorCode.none, None


async def handle_create_acls(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(CREATE_ACLS, request.header.api_version)
    bindings = [_binding(creation) for creation in view_of(CreateAclsRequest, request.body).creations]
    refusal = _refusal(state, AclOperation.ALTER)
    outcomes: list[tuple[ErrorCode, str | None]]
    if refusal is not None:
        outcomes = [refusal] * len(bindings)
    else:
        assert state.node.acls is not None
        problems = [creation_problem(binding) for binding in bindings]
        valid = [binding for binding, problem in zip(bindings, problems, strict=True) if problem is None]
        applied = await _create(state.node.acls, valid) if valid else (ErrorCode.none, None)
        outcomes = [applied if problem is None else (ErrorCode.invalid_request, problem) for problem in problems]
    results = tuple(make(types.AclCreationResult, error_code=e, error_message=m) for e, m in outcomes)
    response = make(types.CreateAclsResponse, throttle_time=NO_THROTTLE, results=results)
    return encode_response(request.header.correlation_id, response)


# -- DeleteAcls ---------------------------------------------------------------------------------


async def _delete(store: AclStore, filters: list[AclBindingFilter]) -> list[list[AclBinding]] | str:
    """The ACLs each filter removed, or why nothing was."""
    try:
        removed = await store.delete(filters)
    except CoordinationError as exc:
        log.warning("deleting ACLs failed: %s", exc)
        return f"coordination: {exc}"
    for binding in (b for found in removed for b in found):
        log.info("ACL deleted: %s", binding)
    return removed


def _matching(types: Any, bindings: list[AclBinding]) -> tuple[Any, ...]:
    return tuple(
        make(
            types.DeleteAclsMatchingAcl,
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=b.pattern.resource_type,
            resource_name=b.pattern.name,
            pattern_type=b.pattern.pattern_type,
            principal=b.entry.principal,
            host=b.entry.host,
            operation=b.entry.operation,
            permission_type=b.entry.permission,
        )
        for b in bindings
    )


async def handle_delete_acls(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DELETE_ACLS, request.header.api_version)
    filters = [_filter(f) for f in view_of(DeleteAclsRequest, request.body).filters]
    refusal = _refusal(state, AclOperation.ALTER)
    outcomes: list[tuple[ErrorCode, str | None, list[AclBinding]]]
    if refusal is not None:
        outcomes = [(*refusal, [])] * len(filters)
    else:
        assert state.node.acls is not None
        problems = [filter_problem(f) for f in filters]
        valid = [f for f, problem in zip(filters, problems, strict=True) if problem is None]
        removed = await _delete(state.node.acls, valid) if valid else []
        found = iter(removed if isinstance(removed, list) else [])
        outcomes = []
        for problem in problems:
            if problem is not None:
                outcomes.append((ErrorCode.invalid_request, problem, []))
            elif isinstance(removed, str):
                outcomes.append((ErrorCode.unknown_server_error, removed, []))
            else:
                outcomes.append((ErrorCode.none, None, next(found)))
    results = tuple(
        make(types.DeleteAclsFilterResult, error_code=e, error_message=m, matching_acls=_matching(types, acls))
        for e, m, acls in outcomes
    )
    response = make(types.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=results)
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(DESCRIBE_ACLS, "DescribeAcls", 1, 3, handle_describe_acls),
    ApiSpec(CREATE_ACLS, "CreateAcls", 1, 3, handle_create_acls),
    ApiSpec(DELETE_ACLS, "DeleteAcls", 1, 3, handle_delete_acls),
]
