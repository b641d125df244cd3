"""Stopping the benchmark's child processes (brokers, Kafka nodes, Tansu, py-spy) the same way."""

from __future__ import annotations

import signal
import subprocess
import threading
from typing import Any


def stop_child(
    proc: subprocess.Popen[Any], reader: threading.Thread | None, timeout_s: float, sig: int = signal.SIGTERM
) -> None:
    """Send ``sig`` if it still runs, SIGKILL after ``timeout_s``, reap it, then join its output reader."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if reader is not None:
        reader.join(timeout=5)
