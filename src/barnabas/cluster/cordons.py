"""Cordoned brokers: brokers new partitions are not placed on (Kafka's KIP-1066, for whole brokers).

A broker being emptied for removal must not take new replicas meanwhile, or a topic created while
its replicas move away lands on it again. KIP-1066 calls that cordoning: a cordoned broker keeps
serving what it holds, and replica placement for new topics and new partitions leaves it out.

Rules this module keeps:

- One key per cordoned broker, ``cordoned/brokers/<id>``; its presence is the mark (the value,
  ``{"cordoned_log_dirs": "*"}``, says what is cordoned: every log dir, the only kind barnabas has).
  A broker that is down or not registered yet may be cordoned: the mark is about the id.
- Every broker keeps the set in a cache, read whole at start and kept current by the metadata
  watcher's watch on the prefix; a broker that wrote a change re-reads it at once.
- Placement reads the store afresh (:meth:`CordonStore.current`), so a topic created after a
  cordon was acknowledged never lands on the broker, whichever broker creates it; when the store
  cannot be read it falls back to the cache (the write that follows fails anyway).
- Only placement is affected: explicit replica assignments and reassignments may still name a
  cordoned broker, as Kafka's do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from barnabas.coordination import CoordinationError, KeyExistsError, Storage

__all__ = ["CORDONS_PREFIX", "CordonStore"]

log = logging.getLogger(__name__)

CORDONS_PREFIX = "cordoned/brokers/"
_VALUE = json.dumps({"cordoned_log_dirs": "*"}).encode()


def _broker_of(key: str) -> int | None:
    """The broker id a key under the prefix names, None for any other key."""
    name = key.removeprefix(CORDONS_PREFIX)
    return int(name) if name.isdigit() and name.isascii() and str(int(name)) == name else None


class CordonStore:
    """The cordoned broker ids, as last read from coordination."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        #: Cordoned broker ids as last read.
        self.brokers: frozenset[int] = frozenset()

    @property
    def prefix(self) -> str:
        return CORDONS_PREFIX

    async def load(self) -> frozenset[int]:
        """Read every cordon (at start, on a watch's Resync, before placing replicas)."""
        listed = await self._storage.list(CORDONS_PREFIX)
        self.brokers = frozenset(b for b in map(_broker_of, listed) if b is not None)
        return self.brokers

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read the cordons under ``keys`` (a watch's Changed event)."""
        brokers = set(self.brokers)
        for key in keys:
            broker = _broker_of(key)
            if broker is None:
                continue
            if await self._storage.get(key) is None:
                brokers.discard(broker)
            else:
                brokers.add(broker)
        self.brokers = frozenset(brokers)

    async def current(self) -> frozenset[int]:
        """The cordoned brokers read now; the cached set if coordination cannot be reached."""
        try:
            return await self.load()
        except CoordinationError as exc:
            log.debug("reading cordons failed (%s); using the last view", exc)
            return self.brokers

    async def cordon(self, broker_id: int) -> bool:
        """Mark ``broker_id`` cordoned; False if it was already.

        Raises:
            CoordinationError: coordination cannot be reached.
        """
        key = f"{CORDONS_PREFIX}{broker_id}"
        try:
            await self._storage.put_if_absent(key, _VALUE)
        except KeyExistsError:
            created = False
        else:
            created = True
            log.info("broker %d cordoned: new partitions are not placed on it", broker_id)
        await self.refresh([key])
        return created

    async def uncordon(self, broker_id: int) -> bool:
        """Lift the mark on ``broker_id``; False if there was none.

        Raises:
            CoordinationError: coordination cannot be reached.
        """
        key = f"{CORDONS_PREFIX}{broker_id}"
        removed = await self._storage.delete(key)
        if removed:
            log.info("broker %d uncordoned: new partitions may be placed on it again", broker_id)
        await self.refresh([key])
        return removed
