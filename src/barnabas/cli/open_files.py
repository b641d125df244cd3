"""A broker holds a file open per partition (its active segment's log) within a budget that is most
of the limit of open files; past it, idle partitions give their descriptors back and reopen on use.
The default soft limit is small, so raise it to the hard limit at start, as servers written in Go
do, and say so."""

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
    log.info("open files limit raised from %d to %d (a descriptor per partition, within a share of it)", soft, hard)
    return hard
