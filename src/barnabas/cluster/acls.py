"""ACLs in coordination, and every broker's authorizer kept current from them (ZooKeeper-mode Kafka's /kafka-acl).

Rules this module keeps:

- One key per resource pattern, ``acls/<PATTERN_TYPE>/<RESOURCE_TYPE>/<name>`` (the name
  percent-encoded, so any name is one key), holding Kafka's AclEntry JSON
  ``{"version": 1, "acls": [{"principal", "host", "operation", "permissionType"}]}``; a pattern
  without entries has no key.
- A CreateAcls or DeleteAcls request is one commit, checked against the version of every key it
  read: it lands whole or, when another writer got there first, is read and tried again. Creating
  an ACL that exists already changes nothing and succeeds (Kafka's AclControlManager).
- The authorizer is loaded whole at start and kept current by the metadata watcher's watch on
  the prefix (re-reading the keys a change names); a broker that wrote a change re-reads it at
  once. A change therefore applies on every broker as soon as its watch reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from urllib.parse import quote, unquote

from barnabas.coordination import Check, Delete, Put, Storage, VersionConflictError, Versioned
from barnabas.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from barnabas.security.authorizer import Authorizer

__all__ = ["ACLS_PREFIX", "AclStore", "acl_key"]

ACLS_PREFIX = "acls/"
_VERSION = 1
#: Compare-and-set rounds before a change gives up to writers racing it.
_ATTEMPTS = 10

_Entries = frozenset[AccessControlEntry]


def acl_key(pattern: ResourcePattern) -> str:
    return f"{ACLS_PREFIX}{pattern.pattern_type.name}/{pattern.resource_type.name}/{quote(pattern.name, safe='')}"


def _parse_key(key: str) -> ResourcePattern | None:
    parts = key.removeprefix(ACLS_PREFIX).split("/")
    if len(parts) != 3 or parts[0] not in PatternType.__members__ or parts[1] not in ResourceType.__members__:
        return None
    return ResourcePattern(ResourceType[parts[1]], unquote(parts[2]), PatternType[parts[0]])


def _to_json(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {"principal": e.principal, "host": e.host, "operation": e.operation.name, "permissionType": e.permission.name}
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    ]
    return json.dumps({"version": _VERSION, "acls": acls}).encode()


def _from_json(data: bytes) -> _Entries:
    document = json.loads(data)
    return frozenset(
        AccessControlEntry(
            acl["principal"], acl["host"], AclOperation[acl["operation"]], AclPermissionType[acl["permissionType"]]
        )
        for acl in document["acls"]
    )


class AclStore:
    """Every ACL in coordination, and the authorizer that decides on them."""

    def __init__(self, storage: Storage, authorizer: Authorizer) -> None:
        self._storage = storage
        self.authorizer = authorizer

    @property
    def prefix(self) -> str:
        return ACLS_PREFIX

    async def load(self) -> None:
        """Read every ACL (at start, and on a watch's Resync)."""
        listed = await self._storage.list(ACLS_PREFIX)
        self.authorizer.load(_patterns(listed))

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read the ACLs under ``keys`` (a watch's Changed event)."""
        for key in keys:
            pattern = _parse_key(key)
            if pattern is not None:
                versioned = await self._storage.get(key)
                self.authorizer.set_entries(pattern, _from_json(versioned.value) if versioned is not None else ())

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Add ``bindings`` (valid ones: see ``barnabas.security.acl.creation_problem``) in one commit.

        Raises:
            VersionConflictError: other writers kept changing the same patterns.
            CoordinationError: coordination cannot be reached.
        """
        added: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            added.setdefault(binding.pattern, set()).add(binding.entry)
        keys = {acl_key(pattern): pattern for pattern in added}
        for _ in range(_ATTEMPTS):
            current = {key: await self._storage.get(key) for key in keys}
            ops: list[Put | Delete] = []
            for key, pattern in keys.items():
                entries = _entries_of(current[key])
                if not added[pattern] <= entries:
                    ops.append(Put(key, _to_json(entries | added[pattern])))
            if await self._commit(current, ops):
                return
        raise VersionConflictError(ACLS_PREFIX, "ACLs kept changing under us")

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every ACL any of ``filters`` matches, in one commit.

        Returns:
            For each filter, the ACLs it matched (and that are now gone).

        Raises:
            VersionConflictError: other writers kept changing ACLs.
            CoordinationError: coordination cannot be reached.
        """
        for _ in range(_ATTEMPTS):
            listed = await self._storage.list(ACLS_PREFIX)
            patterns = _patterns(listed)
            matched = [
                [AclBinding(p, e) for p, entries in _sorted_patterns(patterns) for e in _sorted_entries(entries)
                 if acl_filter.matches(AclBinding(p, e))]
                for acl_filter in filters
            ]  # fmt: skip
            gone: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for binding in (b for found in matched for b in found):
                gone.setdefault(binding.pattern, set()).add(binding.entry)
            current = {acl_key(pattern): listed.get(acl_key(pattern)) for pattern in gone}
            ops: list[Put | Delete] = []
            for pattern, entries in gone.items():
                key, left = acl_key(pattern), patterns[pattern] - entries
                ops.append(Put(key, _to_json(left)) if left else Delete(key))
            if await self._commit(current, ops):
                return matched
        raise VersionConflictError(ACLS_PREFIX, "ACLs kept changing under us")

    async def _commit(self, current: dict[str, Versioned | None], ops: list[Put | Delete]) -> bool:
        """Write ``ops`` if the keys are still at the versions read; False when another writer came first."""
        if not ops:
            return True
        checks = [Check(op.key, _version(current[op.key])) for op in ops]
        try:
            await self._storage.commit(checks, ops)
        except VersionConflictError:
            return False
        await self.refresh(op.key for op in ops)
        return True


def _patterns(listed: dict[str, Versioned]) -> dict[ResourcePattern, _Entries]:
    found = {}
    for key, versioned in listed.items():
        pattern = _parse_key(key)
        if pattern is not None:
            found[pattern] = _from_json(versioned.value)
    return found


def _entries_of(versioned: Versioned | None) -> _Entries:
    return _from_json(versioned.value) if versioned is not None else frozenset()


def _sorted_patterns(patterns: dict[ResourcePattern, _Entries]) -> list[tuple[ResourcePattern, _Entries]]:
    return sorted(patterns.items(), key=lambda item: (item[0].resource_type, item[0].pattern_type, item[0].name))


def _sorted_entries(entries: _Entries) -> list[AccessControlEntry]:
    return sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))


def _version(versioned: Versioned | None) -> int:
    return versioned.version if versioned is not None else 0
