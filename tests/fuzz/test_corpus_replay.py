"""The short CI pass of the fuzz targets: every committed corpus file through every target, no atheris.

The replay (``tests/fuzz/replay.py``) runs once, in a child process under an address-space limit, so
an input that makes native code abort on a refused allocation fails these tests instead of ending the
test run; each target's verdict is then one test. Add a corpus file: docs/testing.md, "Fuzzing".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.run import CORPUS, corpus_files
from tests.fuzz.targets import NAMES

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def replayed() -> dict[str, Any]:
    child = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.replay"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    verdicts: dict[str, Any] = {line["target"]: line for line in lines if "target" in line}
    started = [line for line in lines if "started" in line]
    if child.returncode not in (0, 1) or len(verdicts) != len(NAMES):
        last = started[-1] if started else {}
        verdicts["died"] = f"the replay died (exit {child.returncode}) on {last}: {child.stderr.strip()[-600:]}"
    return verdicts


def test_every_target_has_a_corpus() -> None:
    assert sorted(path.name for path in CORPUS.iterdir() if path.is_dir()) == sorted(NAMES)
    assert all(corpus_files(CORPUS / name) for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_corpora_replay_clean(replayed: dict[str, Any], name: str) -> None:
    assert "died" not in replayed, replayed["died"]
    verdict = replayed[name]
    assert verdict["inputs"] > 0
    assert not verdict["failures"], "\n".join(verdict["failures"])
