"""A wall clock one process can be stepped on: the clock jumps an NTP step or an operator makes, for one broker.

On one host every process shares the system clock, so a jump of one broker's clock is made inside
it: processes started with :meth:`WallClock.env` load a small preload library
(``wall_clock_shim.c``, compiled here with the system's C compiler on first use) that adds the
offset this object writes to a file to ``CLOCK_REALTIME``; the monotonic and boot-time clocks stay
true, as they do through a real step. The shim reads the offset again every 10 ms, so
:meth:`step` returns once its processes can have seen it.

``ClockShimUnavailableError`` says why a shim cannot be built (no C compiler, the build failed), so
a test can skip with the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from importlib import resources
from pathlib import Path

__all__ = ["ClockShimUnavailableError", "WallClock", "shim_library"]

SHIM_SOURCE = "wall_clock_shim.c"
OFFSET_ENV = "WALL_CLOCK_SHIM_OFFSET_FILE"
#: How long the shim goes on with an offset it has read (REREAD_NS in the C source).
SHIM_REREAD_S = 0.010


class ClockShimUnavailableError(RuntimeError):
    """The preload library that steps a process's wall clock cannot be built here."""


def shim_library(cache_dir: Path | None = None) -> Path:
    """The compiled shim, built once per source version into ``cache_dir`` (the temp dir by default)."""
    source = resources.files("barnabas.testing").joinpath(SHIM_SOURCE).read_bytes()
    directory = cache_dir or Path(tempfile.gettempdir()) / "barnabas-wall-clock"
    library = directory / f"wall_clock_{hashlib.sha256(source).hexdigest()[:16]}.so"
    if library.exists():
        return library
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise ClockShimUnavailableError("no C compiler (cc or gcc) to build the wall clock shim")
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as work:
        source_path, built = Path(work) / SHIM_SOURCE, Path(work) / library.name
        source_path.write_bytes(source)
        compiled = subprocess.run(
            [compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source_path), "-ldl"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if compiled.returncode != 0:
            raise ClockShimUnavailableError(f"the wall clock shim did not build: {compiled.stderr.strip()}")
        built.replace(library)  # atomic: a concurrent builder finds either nothing or the whole library
    return library


class WallClock:
    """The wall clock of the processes started with :meth:`env`: true until :meth:`step` moves it."""

    def __init__(self, directory: Path, library: Path | None = None) -> None:
        self._library = library or shim_library()
        directory.mkdir(parents=True, exist_ok=True)
        self._offset_file = directory / "wall-clock-offset"
        self.offset_s = 0.0
        self._store(0.0)  # no process follows it yet: nothing to wait for

    def env(self) -> dict[str, str]:
        """What a process's environment needs for its wall clock to follow this one."""
        preload = " ".join(filter(None, [str(self._library), os.environ.get("LD_PRELOAD", "")]))
        return {"LD_PRELOAD": preload, OFFSET_ENV: str(self._offset_file)}

    def step(self, seconds: float) -> None:
        """Jump the clock by ``seconds`` (back if negative) from where it stands; every process has it on return."""
        self._store(self.offset_s + seconds)
        time.sleep(SHIM_REREAD_S * 1.5)  # the shim's re-read period: after it, no process holds the old offset

    def reset(self) -> None:
        """Put the clock back on the system's time; every process has it on return."""
        self.step(-self.offset_s)

    def _store(self, offset_s: float) -> None:
        staged = self._offset_file.with_suffix(".new")
        staged.write_text(f"{round(offset_s * 1e9)}\n")
        staged.replace(self._offset_file)  # the shim reads the whole file or the old one, never half
        self.offset_s = offset_s
