"""The process's limit of open files, which the log's descriptor budgets are shares of."""

from __future__ import annotations

import resource
from functools import cache

__all__ = ["open_files_limit"]


@cache
def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE, read once (the broker raises it to the hard limit before it opens a log)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft
