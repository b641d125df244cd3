"""A broker subprocess for the benchmark: its own data dir, port 0, stopped by its pid.

Rules this module keeps:

- The broker runs as ``python -m barnabas broker`` with this interpreter, exactly as a user
  would start it, and is ready once it logs "listening on HOST:PORT".
- Its output is drained by a thread (so it never blocks on a full pipe) and kept for the error
  message if it fails.
- Only the process this module started is ever signalled: SIGTERM, then SIGKILL if it hangs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from ._child import stop_child
from ._settings import BenchError

__all__ = ["BrokerProcess"]

_LISTENING = re.compile(r"listening on (?P<host>[\w.:-]+):(?P<port>\d+)")
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


class BrokerProcess:
    """One ``barnabas broker`` child process."""

    def __init__(
        self, data_dir: Path, settings: tuple[str, ...] = (), broker_id: int = 0, coordination: str | None = None
    ) -> None:
        self.data_dir = data_dir
        self.settings = settings
        self.broker_id = broker_id
        #: A coordination URL shared by the brokers of one cluster; None for the embedded default.
        self.coordination = coordination
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=200)
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it listens.

        Raises:
            BenchError: it exited or did not listen within a minute.
        """
        command = [
            sys.executable, "-m", "barnabas", "broker", "--id", str(self.broker_id), "--listen", "127.0.0.1:0",
            "--data-dir", str(self.data_dir),
        ]  # fmt: skip
        if self.coordination is not None:
            command += ["--coordination", self.coordination]
        for item in self.settings:
            command += ["--set", item]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        ready = threading.Event()

        def pump(proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line.rstrip("\n"))
                if not ready.is_set() and (match := _LISTENING.search(line)):
                    self.port = int(match["port"])
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True, name="broker output")
        self._reader.start()
        if not ready.wait(_START_TIMEOUT_S) or self.proc.poll() is not None or not self.port:
            last = self.output[-1] if self.output else "no output"
            self.stop()
            raise BenchError(f"the broker did not start: {last}")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def last_lines(self, count: int = 5) -> list[str]:
        return list(self.output)[-count:]

    def stop(self) -> int | None:
        """SIGTERM (then SIGKILL after 30 s) and reap; the exit code, or None if never started."""
        if self.proc is None:
            return None
        stop_child(self.proc, self._reader, _STOP_TIMEOUT_S)
        self._reader = None
        return self.proc.returncode
