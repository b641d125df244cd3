"""Prefix watches that survive member failures by resuming from the last revision seen.

Rules this module keeps (coordination.md §3):

- The first event is ``Resync()``, yielded only once the etcd watch exists: every change after the
  revision the watch started at is reported, so a consumer that re-reads on Resync misses nothing.
- One ``Changed`` per etcd watch response, naming the keys of its events (a transaction's events
  come in one response). Deletions by lease expiry are events like any other.
- When the stream breaks (member killed or restarted, or cut off from its leader: the watch carries
  ``hasleader``), it is re-created on the current endpoint from ``last revision + 1``: etcd replays
  what was missed, so no Resync is needed. It is Resync instead when that revision was compacted,
  when the cluster id changed, or when the member is behind the last revision seen (a replaced or
  restored cluster would otherwise leave the watch waiting for revisions that never come).
- Retries wait 20 ms, doubling to 1 s, until the consumer closes the generator or the metastore
  closes (then the generator just ends).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator

import grpc
from aetcd import rpc

from ...api import Changed, Resync, WatchEvent
from ...errors import UnavailableError
from ._connection import REQUIRE_LEADER, Connection, prefix_range_end

__all__ = ["watch_prefix"]

log = logging.getLogger(__name__)

RETRY_PAUSE_S = 0.02
RETRY_PAUSE_MAX_S = 1.0


async def watch_prefix(connection: Connection, root: bytes, prefix: str) -> AsyncGenerator[WatchEvent, None]:
    """Hints about keys under ``root + prefix`` (keys reported without ``root``)."""
    key = root + prefix.encode()
    range_end = prefix_range_end(key)
    last_revision = 0  # events up to here were reported (or Resync covers them)
    resync = True  # the next created watch starts from now and is announced with Resync()
    cluster_id: int | None = None
    pause = RETRY_PAUSE_S
    while not connection.is_closed():
        try:
            stubs = await connection.ready(time.monotonic() + connection.timeout_s)
        except UnavailableError:
            if await connection.wait_closed(pause):
                return
            pause = min(pause * 2, RETRY_PAUSE_MAX_S)
            continue
        call = stubs.watch.Watch(metadata=REQUIRE_LEADER)
        try:
            create = rpc.WatchCreateRequest(key=key, range_end=range_end)
            if not resync:
                create.start_revision = last_revision + 1
            await call.write(rpc.WatchRequest(create_request=create))
            async for response in call:
                header = response.header
                if cluster_id is not None and header.cluster_id and header.cluster_id != cluster_id:
                    log.warning("etcd cluster id changed from %x to %x: resync", cluster_id, header.cluster_id)
                    resync = True
                    break
                cluster_id = header.cluster_id or cluster_id
                if response.compact_revision:
                    log.info("watch of %r resumed at compacted revision %d: resync", prefix, last_revision + 1)
                    resync = True
                    break
                if response.canceled:
                    log.info("watch of %r canceled by etcd: %s", prefix, response.cancel_reason)
                    break
                if response.created:
                    pause = RETRY_PAUSE_S
                    if resync:
                        resync = False
                        last_revision = header.revision
                        yield Resync()
                    elif header.revision < last_revision:
                        log.info("etcd member %s is behind revision %d: resync", stubs.endpoint, last_revision)
                        resync = True
                        break
                if response.events:
                    last_revision = max(event.kv.mod_revision for event in response.events)
                    yield Changed(
                        frozenset(event.kv.key[len(root) :].decode(errors="replace") for event in response.events)
                    )
        except grpc.aio.AioRpcError as exc:
            if connection.is_closed():
                return
            log.info("watch of %r via %s broke (%s): resuming", prefix, stubs.endpoint, exc.details())
            connection.failed(stubs)
        except asyncio.CancelledError:
            # Closing the metastore closes the channel under us; the consumer's own cancellation propagates.
            task = asyncio.current_task()
            if connection.is_closed() and (task is None or not task.cancelling()):
                return
            raise
        finally:
            call.cancel()
        if await connection.wait_closed(pause):
            return
        pause = min(pause * 2, RETRY_PAUSE_MAX_S)
