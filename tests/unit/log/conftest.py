"""Fixtures for the log tests: logs opened on real files under tmp_path, closed afterwards."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from barnabas.log import LogConfig, PartitionLog

from .batches import T0

OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


@pytest.fixture
def open_log(log_dir: Path) -> Iterator[OpenLog]:
    """Open a PartitionLog (default dir ``orders-0``, time T0); every one opened is closed at teardown."""
    opened: list[PartitionLog] = []

    def _open(
        config: LogConfig | None = None, *, now_ms: int = T0, directory: Path | None = None, **kwargs: object
    ) -> PartitionLog:
        log = PartitionLog.open(directory or log_dir, config or LogConfig(), now_ms, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log.closed:
            log.close()


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """Every fsync from now on: (the calling thread's name, the path synced)."""
    synced: list[tuple[str, Path]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append((threading.current_thread().name, Path(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return synced


def crash(log: PartitionLog) -> None:
    """Drop a log as a killed process would: descriptors closed, nothing flushed or snapshotted."""
    for segment in log.segments:
        segment.close()
    log._closed = True
