"""How far a block raises this process's peak resident memory (Linux: VmHWM, reset through clear_refs).

Native code (cramjam's codecs) allocates outside Python's allocator, where tracemalloc sees nothing;
the kernel's high-water mark sees every page touched. Writing ``5`` to ``/proc/self/clear_refs``
resets it to the current RSS (Linux 4.0+), so the growth measured is the block's alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PeakMemory", "measure_peak"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@dataclass(slots=True)
class PeakMemory:
    #: Bytes the peak RSS rose above the RSS at the start of the block; set when the block ends.
    growth: int = 0


def _status_bytes(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


@contextlib.contextmanager
def measure_peak() -> Iterator[PeakMemory]:
    """``with measure_peak() as peak: ...``, then ``peak.growth`` (also when the block raised)."""
    _CLEAR_REFS.write_text("5")
    peak = PeakMemory()
    before = _status_bytes("VmRSS")
    try:
        yield peak
    finally:
        peak.growth = _status_bytes("VmHWM") - before
