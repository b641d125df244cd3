"""A small disk that fills up: a tmpfs of a given size mounted on a directory, for full-disk tests.

``fill`` writes a filler file until only the given number of bytes is left, ``make_room`` removes
it, ``close`` unmounts (lazily, so a file a killed process left open cannot keep the mount).
Mounting needs root (CAP_SYS_ADMIN); ``DiskUnavailableError`` says why it failed, so a test can skip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["DiskUnavailableError", "SmallDisk"]

FILLER = ".filler"
CHUNK = 1 << 20


class DiskUnavailableError(RuntimeError):
    """This machine cannot mount a small disk here (not root, or mounts refused)."""


class SmallDisk:
    """A tmpfs of ``size_bytes`` on ``path`` (created if missing)."""

    def __init__(self, path: Path, size_bytes: int) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            raise DiskUnavailableError("mounting a tmpfs needs root")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(self.path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DiskUnavailableError(f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}")
        self.mounted = True

    @property
    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def fill(self, leave_bytes: int) -> None:
        """Write a filler file until at most ``leave_bytes`` (and at least 0) stay free."""
        with (self.path / FILLER).open("ab", buffering=0) as filler:
            while (free := self.free_bytes) > leave_bytes:
                try:
                    filler.write(b"\0" * min(CHUNK, free - leave_bytes))
                except OSError:  # full already: another writer took the rest
                    break

    def make_room(self) -> None:
        """Remove the filler: the space ``fill`` took is free again."""
        (self.path / FILLER).unlink(missing_ok=True)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
            self.mounted = False

    def __enter__(self) -> SmallDisk:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
