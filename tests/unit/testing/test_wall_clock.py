"""The wall clock shim: a stepped process sees its wall clock jump and nothing else change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from barnabas.testing.wall_clock import ClockShimUnavailableError, WallClock

#: Prints the process's clocks as JSON per line read from stdin; sleeps on request, as brokers do.
PROBE = r"""
import asyncio, json, sys, time
for line in sys.stdin:
    started = time.monotonic()
    time.sleep(0.05)
    asyncio.run(asyncio.sleep(0.05))
    print(json.dumps({
        "time": time.time(), "time_ns": time.time_ns() / 1e9, "monotonic": time.monotonic(),
        "boottime": time.clock_gettime(time.CLOCK_BOOTTIME), "slept": time.monotonic() - started,
    }), flush=True)
"""


@pytest.fixture
def wall_clock(tmp_path: Path) -> WallClock:
    try:
        return WallClock(tmp_path / "clock", library=None)
    except ClockShimUnavailableError as exc:
        pytest.skip(str(exc))


def test_a_step_moves_only_the_stepped_processes_wall_clock(wall_clock: WallClock) -> None:
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, **wall_clock.env()},
    )  # fmt: skip
    assert probe.stdin is not None and probe.stdout is not None

    def read() -> dict[str, float]:
        probe.stdin.write("\n")  # type: ignore[union-attr]
        probe.stdin.flush()  # type: ignore[union-attr]
        reading: dict[str, float] = json.loads(probe.stdout.readline())  # type: ignore[union-attr]
        return reading

    try:
        before = read()
        assert abs(before["time"] - time.time()) < 1.0
        wall_clock.step(3600)
        ahead = read()
        assert 3599 < ahead["time"] - time.time() < 3601
        assert 3599 < ahead["time_ns"] - time.time() < 3601
        assert ahead["monotonic"] - before["monotonic"] < 60, "the monotonic clock must not jump"
        assert ahead["boottime"] - before["boottime"] < 60, "the boot-time clock must not jump"
        wall_clock.step(-7200)
        behind = read()
        assert -3601 < behind["time"] - time.time() < -3599
        assert behind["monotonic"] >= ahead["monotonic"]
        assert all(0.1 <= r["slept"] < 5 for r in (before, ahead, behind)), "sleeps must last what they were asked"
        wall_clock.reset()
        assert abs(read()["time"] - time.time()) < 1.0
    finally:
        probe.kill()
        probe.wait()


def test_a_process_started_without_it_keeps_the_system_time(wall_clock: WallClock) -> None:
    wall_clock.step(3600)
    seen = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True, check=True
    )
    assert abs(float(seen.stdout) - time.time()) < 5
