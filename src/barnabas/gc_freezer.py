"""Keep a long-running server's old objects out of Python's full garbage collections.

A broker with 10,000 partitions holds ~550,000 GC-tracked objects. CPython runs a full
collection whenever a quarter as many objects again have reached its oldest generation (the
temporaries of a pass over every partition that outlive a few young collections suffice), and
each one walked them all: the event loop stood still for ~400 ms every 15 to 25 s, however idle
the broker. :func:`freeze_survivors` collects everything once and then moves the survivors into
CPython's permanent generation (``gc.freeze``), which automatic collections skip; refcounting
still frees them as ever. Cycles among frozen objects that become garbage later wait for the next
round, ``interval_s`` on, which unfreezes, collects and freezes again.

Objects made later (partitions created on a running broker) would be walked by every full
collection until that round: 233-339 ms every ~20 s after 10,000 partitions were created. So the
survivors of every automatic full collection are frozen as soon as it ends; each such collection
walks only what was made since the one before.

The first collection walks everything a broker loaded: about a second at 33,000 partitions. The
broker runs it once its logs are loaded and before it registers (``Broker(on_logs_loaded=...)``),
while no coordination session waits on the event loop; the freezer's first round then only
freezes what the start made since (``collect_first=False``): run after registering, that collection
held a restarted broker's event loop long enough to lose its session.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

__all__ = ["FREEZE_INTERVAL_S", "freeze_once", "freeze_survivors"]

log = logging.getLogger(__name__)

#: How often cyclic garbage among frozen objects is looked for (a full collection each time).
FREEZE_INTERVAL_S = 600.0

#: CPython's oldest generation: a collection of it is a full collection.
_OLDEST = 2


def freeze_once() -> float:
    """Unfreeze, collect everything, freeze what survived; the seconds it took."""
    began = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - began


def _freeze_after_full_collection(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` entry: once a full collection has ended, every object left has survived it."""
    if phase == "stop" and info["generation"] == _OLDEST:
        gc.freeze()


async def freeze_survivors(interval_s: float = FREEZE_INTERVAL_S, *, collect_first: bool = True) -> None:
    """Freeze the survivors of a full collection now, after every full collection, and every ``interval_s``.

    With ``collect_first`` False the first round freezes every object there is without a collection
    (a :func:`freeze_once` ran a moment ago; the few cycles made since wait for the next round).
    Run as a task; it never returns, and its cancellation stops the freezing after full collections.
    """
    gc.callbacks.append(_freeze_after_full_collection)
    try:
        if not collect_first:
            gc.freeze()
            await asyncio.sleep(interval_s)
        while True:
            took = freeze_once()
            log.debug("froze %d objects out of automatic collections in %.0f ms", gc.get_freeze_count(), took * 1000)
            await asyncio.sleep(interval_s)
    finally:
        gc.callbacks.remove(_freeze_after_full_collection)
