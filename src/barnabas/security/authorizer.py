"""Kafka's StandardAuthorizer: may this principal, from this host, do this operation on this resource?

Rules this module keeps (StandardAuthorizerData and Authorizer.authorizeByResourceType):

- A super user (``super.users``, compared as ``type:name``) may do anything, whatever the ACLs.
- The ACLs that apply to a resource are the LITERAL ones with its name, the LITERAL wildcard
  ``*`` of its type, and the PREFIXED ones whose name starts it. Of those, an entry applies
  when its principal is the caller's or ``User:*``, its host the caller's or ``*``, and its
  operation the one asked, or ALL. An ALLOW entry also grants what its operation implies:
  DESCRIBE by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS (a DENY entry
  implies nothing).
- Any applying DENY denies; else any applying ALLOW allows; else the answer is deny, unless no
  ACL at all names the resource (whatever its principal), when ``allow.everyone.if.no.acl.found``
  decides.
- It is pure and runs per request: ACLs are indexed by (type, name, pattern type), prefixed
  names by length, and decisions are remembered until the ACLs change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from barnabas.config import BrokerConfig
from barnabas.config.authorizer import parse_super_users

from .acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    supported_operations,
)

__all__ = ["Authorizer", "authorizer_for"]

_IMPLIES_DESCRIBE = frozenset({
    AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER,
})  # fmt: skip
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
#: Decisions remembered before the memory is emptied (it is also emptied whenever the ACLs change).
_MAX_REMEMBERED = 1 << 16
#: A name no ACL has, for authorize_by_resource_type's first check (Kafka's "hardcode").
_ANY_NAME = "hardcode"

_EVERY_ACL = AclBindingFilter()

_Key = tuple[ResourceType, str, PatternType]
_Entries = tuple[AccessControlEntry, ...]


def _applies(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """ALLOW or DENY if ``entry`` speaks to this request, else None (StandardAuthorizerData.findResult)."""
    if entry.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if entry.host not in (WILDCARD, host):
        return None
    granted = entry.operation
    if granted is not AclOperation.ALL and granted != operation:
        if entry.permission is not AclPermissionType.ALLOW:
            return None
        if operation is AclOperation.DESCRIBE and granted not in _IMPLIES_DESCRIBE:
            return None
        if operation is AclOperation.DESCRIBE_CONFIGS and granted not in _IMPLIES_DESCRIBE_CONFIGS:
            return None
        if operation not in (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS):
            return None
    return entry.permission


class Authorizer:
    """The ACLs as last read from coordination, and the decisions made on them."""

    def __init__(self, super_users: Iterable[str] = (), *, allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._entries: dict[_Key, _Entries] = {}
        #: Lengths of the PREFIXED names of each resource type, shortest first.
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._remembered: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    # -- the ACLs ---------------------------------------------------------------------------

    def load(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Replace every ACL (at start, and when a watch resyncs)."""
        self._entries = {}
        for pattern, entries in acls.items():
            self._put(pattern, entries)
        self._changed()

    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the entries of one resource pattern; none removes it."""
        self._put(pattern, entries)
        self._changed()

    def _put(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        key = (pattern.resource_type, pattern.name, pattern.pattern_type)
        ordered = tuple(sorted(set(entries), key=_entry_order))
        if ordered:
            self._entries[key] = ordered
        else:
            self._entries.pop(key, None)

    def _changed(self) -> None:
        lengths: dict[ResourceType, set[int]] = {}
        for resource_type, name, pattern_type in self._entries:
            if pattern_type is PatternType.PREFIXED:
                lengths.setdefault(resource_type, set()).add(len(name))
        self._prefix_lengths = {resource_type: tuple(sorted(found)) for resource_type, found in lengths.items()}
        self._remembered = {}

    def acls(self, acl_filter: AclBindingFilter = _EVERY_ACL) -> list[AclBinding]:
        """Every ACL the filter matches, in a stable order (type, pattern type, name, entry)."""
        found: list[AclBinding] = []
        for (resource_type, name, pattern_type), entries in sorted(self._entries.items()):
            pattern = ResourcePattern(resource_type, name, pattern_type)
            found.extend(binding for entry in entries if acl_filter.matches(binding := AclBinding(pattern, entry)))
        return found

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._entries.values())

    # -- decisions --------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` (``User:alice``) from ``host`` (``127.0.0.1``) may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        decided = self._remembered.get(key)
        if decided is None:
            decided = self._decide(principal, host, operation, resource_type, name)
            if len(self._remembered) >= _MAX_REMEMBERED:
                self._remembered = {}
            self._remembered[key] = decided
        return decided

    def _sections(self, resource_type: ResourceType, name: str) -> Iterable[_Entries]:
        entries = self._entries
        yield entries.get((resource_type, name, PatternType.LITERAL), ())
        if name != WILDCARD:
            yield entries.get((resource_type, WILDCARD, PatternType.LITERAL), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            yield entries.get((resource_type, name[:length], PatternType.PREFIXED), ())

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        named = allowed = False
        for section in self._sections(resource_type, name):
            named = named or bool(section)
            for entry in section:
                permission = _applies(entry, principal, host, operation)
                if permission is AclPermissionType.DENY:
                    return False
                allowed = allowed or permission is AclPermissionType.ALLOW
        return allowed or (not named and self.allow_if_no_acl)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (Authorizer.authorizeByResourceType).

        InitProducerId allows an idempotent producer that may write to some topic.
        """
        if self.authorize(principal, host, operation, resource_type, _ANY_NAME):
            return True
        denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allowed = False
        for (of_type, name, pattern_type), entries in self._entries.items():
            if of_type != resource_type:
                continue
            for entry in entries:
                if entry.host not in (WILDCARD, host) or entry.principal not in (principal, WILDCARD_PRINCIPAL):
                    continue
                if entry.operation not in (operation, AclOperation.ALL):
                    continue
                if entry.permission is AclPermissionType.DENY:
                    if pattern_type is PatternType.LITERAL and name == WILDCARD:
                        return False
                    denied[pattern_type].add(name)
                elif pattern_type is PatternType.LITERAL and name == WILDCARD:
                    wildcard_allowed = True
                else:
                    allowed[pattern_type].add(name)
        if wildcard_allowed:
            return True
        for pattern_type, names in allowed.items():
            for name in names:
                if pattern_type is PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in denied[PatternType.PREFIXED] for end in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bit field of the operations allowed on the resource (Kafka's authorized-operations fields)."""
        field = 0
        for operation in supported_operations(resource_type):
            if self.authorize(principal, host, operation, resource_type, name):
                field |= 1 << operation
        return field


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, entry.operation, entry.permission)


def authorizer_for(config: BrokerConfig) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, or None when authorization is off (Kafka's default)."""
    if not config["authorizer.class.name"]:
        return None
    return Authorizer(
        parse_super_users(config["super.users"]), allow_if_no_acl=config["allow.everyone.if.no.acl.found"]
    )
