"""The fuzz targets, one module per surface; ``load(name)`` imports only the one asked for.

Each module defines ``TARGET``, a :class:`tests.fuzz.harness.Target`.
"""

from __future__ import annotations

import importlib

from tests.fuzz.harness import Target

__all__ = ["NAMES", "load"]

#: Target name -> what it fuzzes (the module's TARGET.doc says more).
NAMES = (
    "frames",
    "requests",
    "produce",
    "record_batch",
    "compaction",
    "coordination",
    "proxy_rewrite",
    "proxy_split",
)


def load(name: str) -> Target:
    """The target called ``name``.

    Raises:
        KeyError: there is none.
    """
    if name not in NAMES:
        raise KeyError(f"no fuzz target {name!r}; the targets are {', '.join(NAMES)}")
    target: Target = importlib.import_module(f"{__name__}.{name}").TARGET
    return target
