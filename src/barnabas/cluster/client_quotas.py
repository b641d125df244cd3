"""Client quota configs in coordination, and every broker's cache of them (Kafka's /config/users and /config/clients).

Rules this module keeps:

- An entity is a user, a client id, or a user and a client id, each named or the default (None):
  Kafka's ClientQuotaEntity. One key per entity, ``client_quotas/<type>=<name>[/<type>=<name>]``
  with the types in sorted order (``client-id`` before ``user``) and each name percent-encoded, the
  default written ``<default>`` (an encoded name never has ``<``), holding JSON ``{key: value}``.
- The keys are Kafka's QuotaConfig names: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes
  per second, whole numbers), ``request_percentage`` (percent of one thread's time) and
  ``controller_mutation_rate`` (partition mutations per second).
- The changes of one AlterClientQuotas request are one commit (compare-and-set on each entity's
  key), as Kafka's controller writes them in one atomic batch; an entity left with no quota has
  its key deleted.
- The cache is read whole at start and kept current by the metadata watcher's watch on the prefix;
  a broker that wrote a change re-reads it at once. Its ``generation`` moves on every change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from barnabas.coordination import Check, Delete, Put, Storage, VersionConflictError, Versioned

__all__ = [
    "CLIENT_ID",
    "CLIENT_QUOTAS_PREFIX",
    "QUOTA_KEYS",
    "USER",
    "ClientQuotaStore",
    "QuotaEntity",
    "entity_key",
]

CLIENT_QUOTAS_PREFIX = "client_quotas/"
USER, CLIENT_ID = "user", "client-id"
DEFAULT_NAME = "<default>"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
#: Kafka's user and client-id quota keys, each with whether it takes whole numbers only (a LONG config).
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
#: An entity: (entity type, name or None for the default) pairs, sorted by type.
QuotaEntity = tuple[tuple[str, str | None], ...]
#: Compare-and-set rounds before a change gives up to writers racing it.
_ATTEMPTS = 10


def entity_key(entity: QuotaEntity) -> str:
    """The storage key of ``entity``."""
    parts = (f"{kind}={DEFAULT_NAME if name is None else quote(name, safe='')}" for kind, name in entity)
    return CLIENT_QUOTAS_PREFIX + "/".join(parts)


def _parse_key(key: str) -> QuotaEntity | None:
    entity = []
    for part in key.removeprefix(CLIENT_QUOTAS_PREFIX).split("/"):
        kind, sep, name = part.partition("=")
        if not sep or kind not in (USER, CLIENT_ID):
            return None
        entity.append((kind, None if name == DEFAULT_NAME else unquote(name)))
    return tuple(sorted(entity))


class ClientQuotaStore:
    """Every entity's quotas, as last read from coordination."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._cache: dict[QuotaEntity, dict[str, float]] = {}
        #: Moves on every change of the cache (quota lookups are cached against it).
        self.generation = 0

    @property
    def prefix(self) -> str:
        return CLIENT_QUOTAS_PREFIX

    def entries(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with at least one quota, and its quotas."""
        return self._cache

    def get(self, entity: QuotaEntity, key: str) -> float | None:
        quotas = self._cache.get(entity)
        return None if quotas is None else quotas.get(key)

    async def load(self) -> None:
        """Read every entity's quotas (at start, and on a watch's Resync)."""
        listed = await self._storage.list(CLIENT_QUOTAS_PREFIX)
        cache = {}
        for key, versioned in listed.items():
            entity = _parse_key(key)
            if entity is not None:
                cache[entity] = _from_json(versioned.value)
        self._cache = cache
        self.generation += 1

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read the entities under ``keys`` (a watch's Changed event)."""
        for key in keys:
            entity = _parse_key(key)
            if entity is None:
                continue
            versioned = await self._storage.get(key)
            if versioned is None:
                self._cache.pop(entity, None)
            else:
                self._cache[entity] = _from_json(versioned.value)
        self.generation += 1

    async def alter(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]]) -> None:
        """Set (a value) or remove (None) quotas of several entities, in one commit.

        Raises:
            VersionConflictError: other writers kept changing the same keys.
            CoordinationError: coordination cannot be reached.
        """
        keys = {entity: entity_key(entity) for entity in changes}
        for _ in range(_ATTEMPTS):
            current = {entity: await self._storage.get(key) for entity, key in keys.items()}
            checks = [Check(key, _version(current[entity])) for entity, key in keys.items()]
            ops: list[Put | Delete] = []
            for entity, alterations in changes.items():
                stored = current[entity]
                quotas = _from_json(stored.value) if stored is not None else {}
                for name, value in alterations.items():
                    if value is None:
                        quotas.pop(name, None)
                    else:
                        quotas[name] = value
                if quotas:
                    ops.append(Put(keys[entity], json.dumps(quotas, sort_keys=True).encode()))
                elif stored is not None:
                    ops.append(Delete(keys[entity]))
            try:
                await self._storage.commit(checks, ops)
            except VersionConflictError:
                continue
            await self.refresh(keys.values())
            return
        raise VersionConflictError(CLIENT_QUOTAS_PREFIX, "client quotas kept changing under us")


def _version(versioned: Versioned | None) -> int:
    return versioned.version if versioned is not None else 0


def _from_json(data: bytes) -> dict[str, float]:
    return {str(key): float(value) for key, value in json.loads(data).items()}
