"""A host crash as a broker's disk sees it: the process dies and writes never flushed are gone.

Nothing is flushed per write by default (Kafka relies on replication, not fsync), so a kernel
crash, a power cut or a VM reset loses the tail of every active segment since its last flush.
Cutting bytes off the end of each partition's newest segment after a ``kill -9`` is that loss.
"""

from __future__ import annotations

from pathlib import Path

#: What a crash takes off the end of each active segment in these tests.
LOST_TAIL_BYTES = 64 * 1024


def cut_active_segment_tails(data_dir: Path, topic: str, lost_bytes: int = LOST_TAIL_BYTES) -> dict[str, int]:
    """Cut ``lost_bytes`` (at most all of it) off the newest segment of each of the topic's partitions.

    Returns:
        Partition dir name -> bytes cut.
    """
    cut = {}
    for partition_dir in sorted(data_dir.glob(f"{topic}-*")):
        segments = sorted(partition_dir.glob("*.log"))
        if not segments:
            continue
        active = segments[-1]
        size = active.stat().st_size
        keep = max(size - lost_bytes, 0)
        with active.open("r+b") as file:
            file.truncate(keep)
        cut[partition_dir.name] = size - keep
    return cut
