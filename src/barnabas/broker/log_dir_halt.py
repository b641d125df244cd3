"""What a broker does when a write to its log dir fails: it stops, as Kafka does.

Kafka halts (``Exit.halt``, no clean shutdown) once every log dir has failed: a clean shutdown
would write checkpoints and a clean-shutdown marker to the disk that just failed, and leading
partitions on a disk that cannot take writes keeps them unavailable when healthy replicas could
lead. Halting ends the coordination session, so the partitions fail over; acknowledged records
are on the ISR's other replicas. The broker starts again once the disk is fixed (room made,
remounted), recovering its logs as after a crash.

The halt comes ``HALT_GRACE_S`` after the failure, from a thread of its own (Kafka's
LogDirFailureHandler): the request whose write failed is answered KAFKA_STORAGE_ERROR first, as
Kafka answers it, instead of its client seeing the connection drop.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

__all__ = ["HALT_GRACE_S", "halt_on_log_dir_failure"]

logger = logging.getLogger(__name__)

#: The exit code of a broker halted by a failed log dir (Kafka's Exit.halt(1)).
HALT_EXIT_CODE = 1
#: How long the answers in flight (KAFKA_STORAGE_ERROR for the failed write) have to go out.
HALT_GRACE_S = 0.5


def halt_on_log_dir_failure(log_dir: Path, error: BaseException) -> None:
    """Stop the process ``HALT_GRACE_S`` from now (called from any thread): ``log_dir`` failed with ``error``."""
    logger.critical(
        "halting: log dir %s failed (%s); its partitions fail over to replicas on other brokers. "
        "Start the broker again once the disk is fixed.", log_dir, error,
    )  # fmt: skip
    threading.Timer(HALT_GRACE_S, _halt).start()


def _halt() -> None:
    logging.shutdown()
    os._exit(HALT_EXIT_CODE)
