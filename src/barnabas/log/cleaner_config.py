"""Broker-wide settings of the log cleaner, with Kafka's names and defaults (CleanerConfig.java).

Rules this module keeps:

- Topic-level compaction settings (``cleanup.policy``, ``delete.retention.ms``,
  ``min.compaction.lag.ms`` ...) live in :class:`~barnabas.log.config.LogConfig`; this is only
  what Kafka configures per broker under ``log.cleaner.*``.
- One cleaner runs at a time per log manager (Kafka's ``log.cleaner.threads`` = 1), so the whole
  dedupe buffer belongs to it.
- ``log.cleaner.dedupe.buffer.size`` bounds the memory of the offset map, as in Kafka. A Python
  dict entry (key of at most 16 bytes, int offset, slot) costs about 120 bytes where Kafka's
  SkimpyOffsetMap needs 24, so the same setting maps about a fifth as many keys per pass; a log
  with more distinct keys in its dirty section takes more passes, never more memory.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAP_ENTRY_BYTES", "CleanerConfig"]

_INT32_MAX = (1 << 31) - 1
#: Measured cost of one offset map entry in CPython (tracemalloc over a million entries).
MAP_ENTRY_BYTES = 120


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """How the log cleaner sizes its buffers and how often it looks for work."""

    #: log.cleaner.enable: whether compacted logs are cleaned at all.
    enable: bool = True
    #: log.cleaner.dedupe.buffer.size: memory for the key -> latest offset map of one pass.
    dedupe_buffer_size: int = 128 * 1024 * 1024
    #: log.cleaner.io.buffer.load.factor: how full the map may get before a pass stops mapping.
    dedupe_buffer_load_factor: float = 0.9
    #: log.cleaner.io.buffer.size: bytes read from a segment at once (Kafka splits it into a
    #: read and a write buffer; here it is the read size).
    io_buffer_size: int = 512 * 1024
    #: log.cleaner.backoff.ms: how long to wait after finding no log to clean.
    backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        if self.dedupe_buffer_size < 1:
            raise ValueError(f"log.cleaner.dedupe.buffer.size={self.dedupe_buffer_size} must be positive")
        if not 0 < self.dedupe_buffer_load_factor <= 1:
            raise ValueError(f"log.cleaner.io.buffer.load.factor={self.dedupe_buffer_load_factor} is out of (0, 1]")
        if not 0 < self.io_buffer_size <= _INT32_MAX:
            raise ValueError(f"log.cleaner.io.buffer.size={self.io_buffer_size} is out of range")
        if self.backoff_ms < 0:
            raise ValueError(f"log.cleaner.backoff.ms={self.backoff_ms} is negative")

    @property
    def max_map_entries(self) -> int:
        """Keys one cleaning pass may map: slots x load factor, as Kafka's SkimpyOffsetMap allows."""
        slots = min(self.dedupe_buffer_size, _INT32_MAX) // MAP_ENTRY_BYTES
        return max(int(slots * self.dedupe_buffer_load_factor), 1)
