"""DescribeClientQuotas (48) and AlterClientQuotas (49): user and client-id quotas (KIP-546).

Kafka's checks and errors (ClientQuotasImage.describe, ClientQuotaControlManager):

- Describe: a filter component with an empty entity type, a type named twice, MATCH_TYPE_EXACT
  without a name, DEFAULT or SPECIFIED with one, an unknown match type, or an ``ip`` component with a
  user or client-id one is INVALID_REQUEST; a type other than user, client-id and ip is
  UNSUPPORTED_VERSION. The error is the whole response's, with no entries. ``strict`` keeps only
  entities with no type beyond the filter's.
- Alter, per entity: no components, a type named twice, an unknown type, an empty name, a key named
  twice, an unknown key, a value not above 0, or a fraction for a byte rate is INVALID_REQUEST; an
  entity named twice in one request answers INVALID_REQUEST for it. ``ip`` entities
  (``connection_creation_rate``) are refused with INVALID_REQUEST: barnabas does not enforce them.
  The valid entities' changes are written in one commit; ``validate_only`` writes nothing.
- Describing needs DESCRIBE_CONFIGS and altering ALTER_CONFIGS on the cluster, else
  CLUSTER_AUTHORIZATION_FAILED (KafkaApis). The change reaches every broker by its watch, and is in
  this broker's view when the answer goes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from barnabas.cluster.client_quotas import CLIENT_ID, QUOTA_KEYS, USER, QuotaEntity
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

__all__ = ["SPECS"]

log = logging.getLogger(__name__)

DESCRIBE_KEY, ALTER_KEY = 48, 49
IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_LONG_MAX = float(2**63 - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentData:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClientQuotasRequest:
    components: tuple[ComponentData, ...]
    strict: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EntityData:
    entity_type: str
    entity_name: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpData:
    key: str
    value: float
    remove: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryData:
    entity: tuple[EntityData, ...]
    ops: tuple[OpData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterClientQuotasRequest:
    entries: tuple[EntryData, ...]
    validate_only: bool


class _RefusedError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


# -- describe -----------------------------------------------------------------------------------


def _filter(body: DescribeClientQuotasRequest) -> tuple[dict[str, str | None], set[str]]:
    """(type -> exact name or None for the default, types that must merely be present)."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for component in body.components:
        kind = component.entity_type
        if not kind:
            raise _RefusedError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in present:
            raise _RefusedError(
                ErrorCode.invalid_request, f"Entity type {kind} cannot appear more than once in the filter."
            )
        if kind not in (IP, USER, CLIENT_ID):
            raise _RefusedError(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise _RefusedError(
                    ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[kind] = component.match
        elif component.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if component.match is not None:
                name = "MATCH_TYPE_DEFAULT" if component.match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
                raise _RefusedError(
                    ErrorCode.invalid_request, f"Request specified {name}, but also specified a match string."
                )
            if component.match_type == MATCH_DEFAULT:
                exact[kind] = None
            else:
                present.add(kind)
        else:
            raise _RefusedError(ErrorCode.invalid_request, f"Unknown match type {component.match_type}")
    if (IP in exact or IP in present) and ({USER, CLIENT_ID} & (exact.keys() | present)):
        mixed = "IP filter component should not be used with user or clientId filter component."
        raise _RefusedError(ErrorCode.invalid_request, f"Invalid entity filter component combination. {mixed}")
    return exact, present


def _matches(entity: QuotaEntity, exact: dict[str, str | None], present: set[str], strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(present):
        return False
    return all(kind in names and names[kind] == name for kind, name in exact.items()) and present <= names.keys()


def describe(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_KEY, request.header.api_version)
    body = view_of(DescribeClientQuotasRequest, request.body)
    entries: tuple[Any, ...] | None = None
    error, message = ErrorCode.none, None
    try:
        if not cluster_allowed(state, AclOperation.DESCRIBE_CONFIGS):
            raise _RefusedError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        exact, present = _filter(body)
        entries = tuple(
            make(
                types.EntryData,
                entity=tuple(make(types.EntityData, entity_type=k, entity_name=n) for k, n in entity),
                values=tuple(make(types.ValueData, key=key, value=value) for key, value in sorted(quotas.items())),
            )
            for entity, quotas in sorted(state.node.client_quotas.entries().items(), key=lambda item: repr(item[0]))
            if _matches(entity, exact, present, body.strict)
        )
    except _RefusedError as refused:
        error, message = refused.error, str(refused)
    response = make(
        types.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
        entries=entries,
    )  # fmt: skip
    return encode_response(request.header.correlation_id, response)


# -- alter --------------------------------------------------------------------------------------


def _entity(entry: EntryData) -> QuotaEntity:
    """The entry's entity, checked (Kafka's validateEntity and configKeysForEntityType)."""
    if not entry.entity:
        raise _RefusedError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for component in entry.entity:
        kind, name = component.entity_type, component.entity_name
        if kind in names:
            raise _RefusedError(
                ErrorCode.invalid_request, f"Invalid client quota entity, duplicate entity entry {kind}"
            )
        if kind not in (USER, CLIENT_ID, IP):
            raise _RefusedError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _RefusedError(ErrorCode.invalid_request, f"Empty {kind} not supported")
        names[kind] = name
    if IP in names:
        if len(names) > 1:
            combined = "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
            raise _RefusedError(ErrorCode.invalid_request, combined)
        unsupported = "ip quotas (connection_creation_rate) are not supported by barnabas"
        raise _RefusedError(ErrorCode.invalid_request, unsupported)
    return tuple(sorted(names.items()))


def _changes(entry: EntryData) -> dict[str, float | None]:
    """key -> new value, or None to remove, checked (Kafka's validateQuotaKeyValue)."""
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise _RefusedError(
                ErrorCode.invalid_request, f"Duplicate quota key {op.key} not updating quota for this entity"
            )
        if op.remove:
            changes[op.key] = None
            continue
        whole = QUOTA_KEYS.get(op.key)
        if whole is None:
            raise _RefusedError(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
        if not op.value > 0.0:
            raise _RefusedError(ErrorCode.invalid_request, f"Quota {op.key} must be greater than 0")
        if whole and op.value > _LONG_MAX:
            raise _RefusedError(ErrorCode.invalid_request, f"Proposed value for {op.key} is too large for a LONG.")
        if whole and abs(op.value % 1.0) > 1e-6:
            raise _RefusedError(ErrorCode.invalid_request, f"{op.key} cannot be a fractional value.")
        changes[op.key] = op.value
    return changes


def _checked(body: AlterClientQuotasRequest) -> tuple[list[tuple[Any, QuotaEntity | None]], dict[Any, Any]]:
    """Each entry's result key with its entity (None when refused), and the refusals and changes by key."""
    results: dict[Any, Any] = {}
    order: list[tuple[Any, QuotaEntity | None]] = []
    for entry in body.entries:
        key = tuple((c.entity_type, c.entity_name) for c in entry.entity)
        try:
            entity = _entity(entry)
            changes = _changes(entry)
        except _RefusedError as refused:
            results[key] = refused
            order.append((key, None))
            continue
        if any(seen == entity for _, seen in order):
            results[key] = _RefusedError(ErrorCode.invalid_request, f"Ignoring duplicate entity {entity}")
            order.append((key, None))
            continue
        results[key] = changes
        order.append((key, entity))
    return order, results


async def alter(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(ALTER_KEY, request.header.api_version)
    body = view_of(AlterClientQuotasRequest, request.body)
    order, results = _checked(body)
    if not cluster_allowed(state, AclOperation.ALTER_CONFIGS):
        denied = _RefusedError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        results = dict.fromkeys(results, denied)
    changes = {entity: results[key] for key, entity in order if entity is not None and isinstance(results[key], dict)}
    if changes and not body.validate_only:
        try:
            await state.node.client_quotas.alter(changes)
            log.info("client quotas altered: %s", changes)
        except CoordinationError as exc:
            log.warning("altering client quotas failed: %s", exc)
            failed = _RefusedError(ErrorCode.unknown_server_error, f"coordination: {exc}")
            results = {key: failed if isinstance(value, dict) else value for key, value in results.items()}
    entries = []
    for key in dict.fromkeys(key for key, _ in order):
        outcome = results[key]
        error, message = (outcome.error, str(outcome)) if isinstance(outcome, _RefusedError) else (ErrorCode.none, None)
        entity = tuple(make(types.EntityData, entity_type=kind, entity_name=name) for kind, name in key)
        entries.append(make(types.EntryData, error_code=error, error_message=message, entity=entity))
    response = make(types.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(entries))
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(DESCRIBE_KEY, "DescribeClientQuotas", 0, 1, describe),
    ApiSpec(ALTER_KEY, "AlterClientQuotas", 0, 1, alter),
]
