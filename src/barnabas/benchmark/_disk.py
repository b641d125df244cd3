"""The disk's write bandwidth under the benchmark's data dir: plain writes, and writes with fsync.

Rules this module keeps:

- Both measurements write 1 MiB blocks of random bytes to a new file in ``directory`` for
  ``seconds`` (or until ``max_bytes``), then delete it.
- *Plain* writes never fsync: what a broker that leaves flushing to the kernel (Kafka's and
  barnabas' default) pays per byte, the page cache included. *fsync* writes call ``os.fsync``
  every ``fsync_every`` bytes and once at the end, and the time includes that last fsync: what
  the device sustains.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

__all__ = ["measure_disk"]

_BLOCK = 1 << 20
MB = 1_000_000


def _write(path: Path, seconds: float, max_bytes: int, fsync_every: int | None) -> dict[str, Any]:
    block = os.urandom(_BLOCK)
    written = since_sync = 0
    syncs: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.monotonic()
        deadline = start + seconds
        while written < max_bytes and time.monotonic() < deadline:
            written += os.write(fd, block)
            since_sync += _BLOCK
            if fsync_every is not None and since_sync >= fsync_every:
                began = time.monotonic()
                os.fsync(fd)
                syncs.append(time.monotonic() - began)
                since_sync = 0
        if fsync_every is not None and since_sync:
            began = time.monotonic()
            os.fsync(fd)
            syncs.append(time.monotonic() - began)
        elapsed = time.monotonic() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    out: dict[str, Any] = {"bytes": written, "seconds": round(elapsed, 3), "mb_per_s": round(written / elapsed / MB, 1)}
    if syncs:
        out["fsync_every_bytes"] = fsync_every
        out["fsync_ms"] = {"median": round(statistics.median(syncs) * 1000, 2), "max": round(max(syncs) * 1000, 2)}
    return out


def measure_disk(
    directory: Path, seconds: float = 3.0, max_bytes: int = 2 << 30, fsync_every: int = 8 << 20
) -> dict[str, Any]:
    """Plain and fsync'd write bandwidth of the filesystem holding ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "directory": str(directory),
        "block_bytes": _BLOCK,
        "plain": _write(directory / "disk-probe-plain", seconds, max_bytes, None),
        "fsync": _write(directory / "disk-probe-fsync", seconds, max_bytes, fsync_every),
    }
