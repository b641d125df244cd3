"""Watch hints for ``<chroot>/kv``: one-shot ZooKeeper watches, re-armed by re-reading.

kazoo 2.11.0 has no ``add_watch`` (ZooKeeper 3.6's persistent recursive watches), so one watcher per
metastore keeps a children watch on ``kv`` and a data watch on every key znode, and remembers each
child's ``mzxid`` and the parent's ``cversion``. Every fired watch is re-armed by the read that
follows it, so no change after that read goes unnoticed.

Rules:

- A changed data watch re-reads that znode and reports its key if its ``mzxid`` moved (it moves on
  every write and on re-creation, so a re-read equal to the remembered one means nothing changed).
- A children watch re-lists ``kv``: added and removed names are reported. The parent's ``cversion``
  counts child creations and deletions; if it moved by more than the names that visibly came or
  went, some key was created and deleted (or deleted and re-created) between two reads and a
  consumer may have seen it: the watcher rescans and sends ``Resync``. A commit whose ``Check(k, 0)``
  covers no op is a create+delete pair and so also ends in a ``Resync``.
- kazoo drops every watch when the connection drops; after SUSPENDED or LOST the watcher rescans
  once reconnected and sends ``Resync``.
- Each subscriber gets ``Resync`` first (immediately if the watcher is armed, else when its first
  scan completes), then coalesced ``Changed`` for keys under its prefix; a pending ``Resync``
  absorbs pending keys.
- The watcher runs while it has subscribers. Watches it leaves on the server fire once more and
  are ignored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from ...api import Changed, Resync, SessionState, WatchEvent
from ...errors import CoordinationError
from ._connection import KazooConnection, raise_first
from ._layout import ZooKeeperUrl, key_of

__all__ = ["KvWatcher", "Subscriber"]

log = logging.getLogger(__name__)

_VANISHED = -1  # listed as a child, gone before its data could be read
_MAX_RETRY_DELAY_S = 1.0


class Subscriber:
    """One ``watch(prefix)`` iterator's pending events."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._keys: set[str] = set()
        self._resync = False
        self._closed = False
        self._wake = asyncio.Event()

    def changed(self, keys: Iterable[str]) -> None:
        mine = {key for key in keys if key.startswith(self.prefix)}
        if mine:
            self._keys |= mine
            self._wake.set()

    def resynced(self) -> None:
        self._resync = True
        self._keys.clear()
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def next(self) -> WatchEvent | None:
        """The next event, or None once closed."""
        while True:
            if self._resync:
                self._resync = False
                self._keys.clear()
                return Resync()
            if self._keys:
                keys, self._keys = frozenset(self._keys), set()
                return Changed(keys)
            if self._closed:
                return None
            self._wake.clear()
            await self._wake.wait()


class KvWatcher:
    """Turns one-shot watches on ``kv`` and its children into events for subscribers."""

    def __init__(self, connection: KazooConnection, layout: ZooKeeperUrl) -> None:
        self._connection = connection
        self._client = connection.client
        self._layout = layout
        self._subscribers: set[Subscriber] = set()
        self._known: dict[str, int] = {}  # child name -> mzxid
        self._cversion = 0
        self._armed = False
        self._resync = True
        self._children_dirty = False
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch = connection.watch_callback(self._on_watch)  # one function, reused: see watch_callback
        connection.listeners.append(self._on_state)

    # -- subscribers -----------------------------------------------------------------------

    def subscribe(self, prefix: str) -> Subscriber:
        subscriber = Subscriber(prefix)
        self._subscribers.add(subscriber)
        if self._armed:
            subscriber.resynced()
        if self._task is None:
            self._resync = True
            self._wake.set()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"zookeeper-watch {self._layout.kv_path}"
            )
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)
        subscriber.close()
        if not self._subscribers:
            self._halt()

    def close(self) -> None:
        for subscriber in list(self._subscribers):
            subscriber.close()
        self._subscribers.clear()
        self._halt()

    def _halt(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._armed = False
        self._known.clear()

    # -- notifications (on the loop) --------------------------------------------------------

    def _on_watch(self, event: Any) -> None:
        if self._task is None:
            return  # a watch left over from before the watcher halted
        if event.type == EventType.NONE:
            # kazoo dropped every watch on a connection loss; the state change that came with it
            # (delivered in order, unlike this event) has already scheduled the rescan.
            return
        if event.type == EventType.CHANGED and event.path:
            self._dirty.add(event.path.rsplit("/", 1)[-1])
        else:  # CHILD on kv, DELETED of a child (its CHILD event follows), CREATED
            self._children_dirty = True
        self._wake.set()

    def _on_state(self, state: SessionState) -> None:
        if state is not SessionState.CONNECTED:
            self._resync = True
            self._armed = False
        self._wake.set()

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                if self._resync:
                    await self._rescan()
                else:
                    changed = set()
                    if self._children_dirty:
                        self._children_dirty = False
                        children_changed = await self._children_changed()
                        if children_changed is None:
                            await self._rescan()
                            continue
                        changed |= children_changed
                    if self._dirty:
                        names, self._dirty = self._dirty, set()
                        changed |= await self._nodes_changed(names)
                    keys = [key for name in changed if (key := key_of(name)) is not None]
                    if keys:
                        for subscriber in list(self._subscribers):
                            subscriber.changed(keys)
                failures = 0
            except Exception as exc:
                if self._connection.stopped:
                    return  # the metastore is closing
                # Not connected (the state listener wakes us on reconnect), a refused read, or a bug:
                # never leave subscribers waiting on a dead task; rescan, backing off while it fails.
                self._resync = True
                self._armed = False
                failures += 1
                level = logging.DEBUG if isinstance(exc, CoordinationError) else logging.ERROR
                log.log(level, "watch on %s failed; rescanning", self._layout.kv_path, exc_info=exc)
                if self._connection.state is SessionState.CONNECTED:
                    await asyncio.sleep(min(0.05 * 2**failures, _MAX_RETRY_DELAY_S))
                self._wake.set()

    async def _rescan(self) -> None:
        """Re-read and re-arm everything, then tell every subscriber to resync."""
        # Connected first: a state change while waiting must not leave a second rescan queued.
        await self._connection.wait_connected(None)
        self._resync = False
        self._children_dirty = False
        self._dirty.clear()
        children, cversion = await self._list_children()
        self._known = await self._read_nodes(children)
        self._cversion = cversion
        self._armed = True
        for subscriber in list(self._subscribers):
            subscriber.resynced()

    async def _children_changed(self) -> set[str] | None:
        """Names added or removed since the last listing; None if some came and went unseen."""
        children, cversion = await self._list_children()
        current = set(children)
        added = current - self._known.keys()
        removed = self._known.keys() - current
        if (cversion - self._cversion) & 0xFFFFFFFF != len(added) + len(removed):
            return None
        for name in removed:
            del self._known[name]
        self._known.update(await self._read_nodes(added))
        self._cversion = cversion
        return added | removed

    async def _nodes_changed(self, names: set[str]) -> set[str]:
        """Names among ``names`` whose znode was written since it was last read."""
        mzxids = await self._read_nodes(name for name in names if name in self._known)
        changed = set()
        for name, mzxid in mzxids.items():
            # A vanished znode is the children watch's to report (it keeps the cversion count).
            if mzxid != _VANISHED and mzxid != self._known.get(name):
                self._known[name] = mzxid
                changed.add(name)
        return changed

    async def _list_children(self) -> tuple[list[str], int]:
        kv = self._layout.kv_path
        (result,) = await self._connection.call(
            f"watch {kv}", lambda: self._client.get_children_async(kv, watch=self._watch, include_data=True)
        )
        raise_first(f"watch {kv}", [result])
        children, stat = result
        return list(children), int(stat.cversion)

    async def _read_nodes(self, names: Iterable[str]) -> dict[str, int]:
        """Each znode's mzxid (``_VANISHED`` if gone), leaving a data watch on each that exists."""
        names = list(names)
        kv = self._layout.kv_path
        results = await self._connection.call(
            f"watch {kv}",
            *(partial(self._client.get_async, f"{kv}/{name}", watch=self._watch) for name in names),
        )
        mzxids = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, NoNodeError):
                mzxids[name] = _VANISHED
                continue
            raise_first(f"watch {kv}/{name}", [result])
            mzxids[name] = int(result[1].mzxid)
        return mzxids
