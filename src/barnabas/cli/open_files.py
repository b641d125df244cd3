"""A broker holds three files open per partition (its active segment's log, offset index and time
index), so the default soft limit of open files runs out long before its disk does: raise it to the
hard limit at start, as servers written in Go do, and say so."""

from __future__ import annotations

import logging
import resource

__all__ = ["raise_open_files_limit"]

log = logging.getLogger(__name__)


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open files limit from %d to %d: %s", soft, hard, exc)
        return soft
    log.info("open files limit raised from %d to %d (about three per partition are held open)", soft, hard)
    return hard
