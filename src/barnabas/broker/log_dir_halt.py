"""What a broker does when a write to its log dir fails: it stops at once, as Kafka does.

Kafka halts (``Exit.halt``, no clean shutdown) once every log dir has failed: a clean shutdown
would write checkpoints and a clean-shutdown marker to the disk that just failed, and leading
partitions on a disk that cannot take writes keeps them unavailable when healthy replicas could
lead. Halting ends the coordination session, so the partitions fail over; acknowledged records
are on the ISR's other replicas. The broker starts again once the disk is fixed (room made,
remounted), recovering its logs as after a crash.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["halt_on_log_dir_failure"]

logger = logging.getLogger(__name__)

#: The exit code of a broker halted by a failed log dir (Kafka's Exit.halt(1)).
HALT_EXIT_CODE = 1


def halt_on_log_dir_failure(log_dir: Path, error: BaseException) -> None:
    """Stop the process now (from any thread): ``log_dir`` failed with ``error``."""
    logger.critical(
        "halting: log dir %s failed (%s); its partitions fail over to replicas on other brokers. "
        "Start the broker again once the disk is fixed.", log_dir, error,
    )  # fmt: skip
    logging.shutdown()
    os._exit(HALT_EXIT_CODE)
