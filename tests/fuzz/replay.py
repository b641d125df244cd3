"""Replay the committed corpora: ``python -m tests.fuzz.replay [TARGET ...]``, one JSON line per event.

Every target gets every file of every corpus (its own first), so an input found once, by whichever
target, stays a test for all of them. An input fails as it fails a fuzzing run: an exception the
target lets out, more than ``SLOW_S`` seconds, or memory beyond an address-space limit of
``EXTRA_MB`` over what the process maps once the targets are loaded; native code that aborts on a
refused allocation takes the process down, and the last ``started`` line names the input. One
more, which only a replay can afford to check: an input of a few KB that raises the process's peak
resident memory by more than ``PEAK_MB`` (a decompression bomb a decoder expanded, which the
address-space limit lets through), measured on Linux from VmHWM, reset before each input.

Lines: ``{"started": target, "input": path}`` before each input, then per target
``{"target": name, "inputs": n, "failures": [...], "seconds": s}``. ``tests/fuzz/test_corpus_replay.py``
runs this in a child process in the unit run.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

from tests.fuzz.run import CORPUS, corpus_files, limit_address_space
from tests.fuzz.targets import NAMES, load

#: The longest one input may take here (a fuzzing run allows --timeout, 10 s).
SLOW_S = 2.0
#: Address space the replay may map beyond what the process maps when it starts replaying.
EXTRA_MB = 2048
#: How far one input may raise peak RSS: the decoders' default bound on what a batch may decompress
#: to (protocol.MAX_RECORDS_BYTES, 64 MiB) and some room, well under what an 8 KB bomb expands to.
PEAK_MB = 100

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb(field: str) -> float:
    line = next(line for line in _STATUS.read_text().splitlines() if line.startswith(f"{field}:"))
    return int(line.split()[1]) / 1024


def _reset_peak() -> float | None:
    """Reset VmHWM to the current RSS and return that RSS in MiB; None where Linux's clear_refs is missing."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return None
    return _status_mb("VmRSS")


def replay(names: list[str]) -> bool:
    """Replay every corpus through each target of ``names``, printing as it goes; True if all passed."""
    targets = {name: load(name) for name in names}
    limit_address_space(EXTRA_MB)
    clean = True
    for name, target in targets.items():
        inputs = corpus_files(CORPUS / name) + [
            path for other in NAMES if other != name for path in corpus_files(CORPUS / other)
        ]
        failures = []
        started = time.perf_counter()
        for path in inputs:
            where = str(path.relative_to(CORPUS))
            print(json.dumps({"started": name, "input": where}), flush=True)
            rss = _reset_peak()
            begun = time.perf_counter()
            try:
                target.run(path.read_bytes()[: target.max_len])
            except BaseException as exc:  # every escape is a finding, reported by name
                failures.append(f"{where}: {exc!r}\n{traceback.format_exc(limit=-3)}")
                continue
            if time.perf_counter() - begun > SLOW_S:
                failures.append(f"{where}: took {time.perf_counter() - begun:.1f} s")
            if rss is not None and (grown := _status_mb("VmHWM") - rss) > PEAK_MB:
                failures.append(f"{where}: raised peak memory by {grown:.0f} MiB")
        seconds = round(time.perf_counter() - started, 2)
        print(json.dumps({"target": name, "inputs": len(inputs), "failures": failures, "seconds": seconds}))
        clean = clean and not failures
    return clean


if __name__ == "__main__":
    sys.exit(0 if replay(sys.argv[1:] or list(NAMES)) else 1)
