"""Kafka's ACL vocabulary: resource, pattern and operation types, bindings and the filters that find them.

Rules this module keeps (Kafka's clients ``org.apache.kafka.common.acl`` and ``…common.resource``):

- The enums carry Kafka's wire codes. UNKNOWN (0) stands for any code this side does not know,
  as Kafka's ``fromCode`` makes it; ANY and MATCH only ever appear in filters.
- A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
  host, operation, ALLOW or DENY). The literal name ``*`` is the wildcard resource.
- A filter's None fields match anything; ``matches`` is Kafka's ``AclBindingFilter.matches``,
  MATCH included (a literal name the filter's name equals, the wildcard, or a prefix of it).
- ``creation_problem`` and ``filter_problem`` are Kafka's checks (AclControlManager's
  validateNewAcl and validateFilter, the requests' UNKNOWN checks): a problem is a message for
  INVALID_REQUEST, never an exception.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "creation_problem",
    "filter_problem",
    "supported_operations",
]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: The one name the CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"


class _Coded(enum.IntEnum):
    @classmethod
    def of(cls, code: int) -> Self:
        """The member with this wire code, UNKNOWN for any other (Kafka's fromCode)."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def named(cls, name: str) -> Self:
        """The member named ``name`` in any case, with or without underscores (``Read``, ``ClusterAction``).

        Raises:
            ValueError: no such member.
        """
        wanted = name.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        raise ValueError(f"unknown {cls.__name__}: {name!r}")


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
#: The operations each resource type has (Kafka's AclEntry.supportedOperations), for authorized-operations fields.
_SUPPORTED: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}  # fmt: skip


def supported_operations(resource_type: ResourceType) -> tuple[AclOperation, ...]:
    """What can be allowed or denied on a concrete resource type (none for UNKNOWN and ANY)."""
    return _SUPPORTED.get(resource_type, ())


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None (and ANY) match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding.pattern) and self._matches_entry(binding.entry)

    def _matches_pattern(self, pattern: ResourcePattern) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type is not ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if wanted is PatternType.ANY or wanted == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    def _matches_entry(self, entry: AccessControlEntry) -> bool:
        # AccessControlEntryFilter.matches
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (self.permission is AclPermissionType.ANY or self.permission == entry.permission)
        )


def _principal_problem(principal: str) -> str | None:
    if ":" not in principal:
        return f"expected a string in format principalType:principalName but got {principal}"
    return None


def creation_problem(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create this ACL (INVALID_REQUEST), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission.name}"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Resource name should not be empty"
    return _principal_problem(entry.principal)


def filter_problem(acl_filter: AclBindingFilter) -> str | None:
    """Why Kafka refuses this describe or delete filter (INVALID_REQUEST), or None."""
    unknown = [
        field
        for field, value in (
            ("resource type", acl_filter.resource_type),
            ("pattern type", acl_filter.pattern_type),
            ("operation", acl_filter.operation),
            ("permission type", acl_filter.permission),
        )
        if value == 0
    ]
    if unknown:
        return f"Unknown {', '.join(unknown)} in the ACL filter"
    return None
