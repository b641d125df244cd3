"""Watches poll the namespace's revision and its ephemeral-key index (Cassandra has no client watch).

Rules this module keeps (coordination.md §6):

- Every :data:`POLL_INTERVAL_S` one QUORUM read returns the ``rev`` row and every index row of a
  live ephemeral key. When ``rev`` moved from ``r`` to ``r2``, the change-log rows ``r+1 … r2``
  name the changed keys; those under the prefix make one ``Changed``. A gap in the log (rows
  expired after :data:`CHANGE_LOG_TTL_S`, or more than :data:`MAX_CATCH_UP` revisions behind) is a
  ``Resync``.
- A key that vanishes by TTL (its session died) writes no change-log row: the watcher sees its
  index row vanish instead. The index row outlives the key by a second, so the key is gone when
  ``Changed`` names it: notification comes within about 1 s + one poll after the key expired.
- The baseline (``rev`` and the index) is read *before* the first ``Resync`` is yielded, so whatever
  the consumer re-reads next is at least as new. A failed poll means changes may have been missed:
  the next successful poll yields ``Resync`` (after a server restart too).
- Polls are QUORUM, not SERIAL: they are hints, and a Paxos round a poll misses moves ``rev`` for
  the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator

from ...api import Changed, Resync, WatchEvent
from ...errors import UnavailableError
from . import _cql as cql
from ._connection import Connection

__all__ = ["CHANGE_LOG_TTL_S", "MAX_CATCH_UP", "POLL_INTERVAL_S", "watch_prefix"]

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.25
#: Further behind than this many revisions, a watcher resyncs instead of reading the change log.
MAX_CATCH_UP = 10_000
#: Change-log rows live this long: a watcher further behind gets a Resync.
CHANGE_LOG_TTL_S = 3600


async def _poll(connection: Connection, ns: str, prefix: str) -> tuple[int, frozenset[str]]:
    """The revision and the live ephemeral keys under ``prefix``."""
    rev = -1
    ephemeral = set()
    for row in await connection.execute(cql.SELECT_WATCHED, (ns,)):
        if row["kind"] == cql.KIND_META:
            rev = int(row["version"])
            continue
        _, slash, key = row["key"].partition("/")
        if slash and key.startswith(prefix):
            ephemeral.add(key)
    return rev, frozenset(ephemeral)


async def _changes(connection: Connection, ns: str, since: int, until: int) -> set[str] | None:
    """Keys changed by revisions ``since + 1 … until``, or None when the log has a gap there."""
    if until - since > MAX_CATCH_UP:
        return None
    rows = await connection.execute(cql.SELECT_CHANGES, (ns, cql.change_key(since), cql.change_key(until)))
    if len(rows) != until - since:
        return None
    keys: set[str] = set()
    for row in rows:
        keys.update(json.loads(bytes(row["value"]))["keys"])
    return keys


async def watch_prefix(
    connection: Connection, ns: str, prefix: str, closed: asyncio.Event
) -> AsyncGenerator[WatchEvent, None]:
    """Yield ``Resync()`` first, then ``Changed``/``Resync`` for keys under ``prefix``, until ``closed``."""
    last_rev: int | None = None  # None: the next successful poll is a new baseline (Resync)
    ephemeral: frozenset[str] = frozenset()
    next_poll = time.monotonic()
    while True:
        # Polls keep their pace while the consumer is busy: one that waited longer polls at once.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, next_poll - time.monotonic())):
                await closed.wait()
        if closed.is_set():
            return
        next_poll = time.monotonic() + POLL_INTERVAL_S
        event: WatchEvent | None = None
        try:
            rev, live = await _poll(connection, ns, prefix)
            if last_rev is None or rev < last_rev:
                event = Resync()
            else:
                changed = set(ephemeral - live)  # expired (or deleted) ephemeral keys
                if rev > last_rev:
                    keys = await _changes(connection, ns, last_rev, rev)
                    if keys is None:
                        event = Resync()
                    else:
                        changed.update(key for key in keys if key.startswith(prefix))
                if event is None and changed:
                    event = Changed(frozenset(changed))
            last_rev, ephemeral = rev, live
        except UnavailableError as exc:
            if last_rev is not None:
                log.info("watch %r: poll failed, will resync: %s", prefix, exc)
            last_rev = None
        if event is not None:
            yield event
