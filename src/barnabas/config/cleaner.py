"""The log cleaner's broker settings (``log.cleaner.*``) as the log layer's CleanerConfig.

Rules this module keeps: Kafka's names and defaults (``config/broker.py`` defines them); the
topic-level compaction settings are resolved per topic by ``log_config_for`` instead.
"""

from __future__ import annotations

from barnabas.log import CleanerConfig

from .broker import BrokerConfig

__all__ = ["cleaner_config_for"]


def cleaner_config_for(broker: BrokerConfig) -> CleanerConfig:
    """The cleaner settings of this broker (Kafka's LogCleaner.cleanerConfig).

    Raises:
        ValueError: a combination the cleaner cannot work with.
    """
    return CleanerConfig(
        enable=bool(broker["log.cleaner.enable"]),
        dedupe_buffer_size=int(broker["log.cleaner.dedupe.buffer.size"]),
        dedupe_buffer_load_factor=float(broker["log.cleaner.io.buffer.load.factor"]),
        io_buffer_size=int(broker["log.cleaner.io.buffer.size"]),
        backoff_ms=int(broker["log.cleaner.backoff.ms"]),
    )
