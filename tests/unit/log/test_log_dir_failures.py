"""LogDirFailures: a failed write takes its log dir offline once, and the broker hears of it once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from barnabas.log.log_dir_failures import LogDirFailures


def test_a_failure_under_a_log_dir_takes_that_dir_offline_once(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    failures = LogDirFailures(dirs)
    heard: list[tuple[Path, str]] = []
    failures.listen(lambda log_dir, error: heard.append((log_dir, str(error))))
    failures.report(dirs[1] / "topic-0" / "00000000000000000000.log", OSError(28, "No space left on device"))
    failures.report(dirs[1] / "topic-1", OSError(5, "Input/output error"))
    assert heard == [(dirs[1], "[Errno 28] No space left on device")]
    assert list(failures.offline) == [dirs[1]]


def test_a_listener_that_fails_is_logged_and_the_others_still_hear(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failures = LogDirFailures([tmp_path])
    heard: list[Path] = []

    def broken(_: Path, __: BaseException) -> None:
        raise RuntimeError("listener bug")

    failures.listen(broken)
    failures.listen(lambda log_dir, _: heard.append(log_dir))
    with caplog.at_level(logging.ERROR):
        failures.report(tmp_path / "x-0", OSError(28, "full"))
    assert heard == [tmp_path]
    assert "a log dir failure listener failed" in caplog.text
