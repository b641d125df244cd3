"""The order tests run in, and how `make test` shares them between its pytest-xdist workers.

Two workers finish together only if the long tests start first: left to xdist's default order
(files with the most tests first), the Spark pipeline's driver-kill test (~2-3 min) started last and
ran alone. So every run takes the longest files first and the unit tests (many short files that fill
the gaps) last. A directory whose files share a costly session server (the Spark session, the
Cassandra node) is one unit of work, so only one worker starts that server.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

#: Node-id prefixes, in the order they run: the longest first. Everything unnamed runs after them,
#: then RUN_LAST; inside a group, the collection order is kept.
RUN_FIRST = (
    "tests/spark/",
    "tests/integration/test_bench_compare.py",
    "tests/contract/",
    "tests/integration/test_statefulset_simulation.py",
    "tests/fault/",
)
RUN_LAST = ("tests/unit/", "tests/fuzz/")
#: Directories whose files share a session-scoped server: one worker runs all of them.
SHARED_SERVER_DIRS = ("tests/spark/", "tests/contract/")


def run_rank(nodeid: str) -> int:
    """Where a test's group runs: its index in RUN_FIRST, then the middle, then RUN_LAST."""
    for rank, prefix in enumerate(RUN_FIRST):
        if nodeid.startswith(prefix):
            return rank
    if nodeid.startswith(RUN_LAST):
        return len(RUN_FIRST) + 1
    return len(RUN_FIRST)


class LongestFirstScheduling(LoadScopeScheduling):
    """xdist's loadfile distribution in collection order, with SHARED_SERVER_DIRS as single units."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return next((directory for directory in SHARED_SERVER_DIRS if path.startswith(directory)), path)
