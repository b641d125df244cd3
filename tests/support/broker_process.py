"""Start, stop and kill a real `barnabas broker` process for tests.

Processes are stopped by pid, never by name. The broker binds 127.0.0.1 port 0 on first start
and keeps the port it got across restarts, so clients that cached it reconnect.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

_LISTENING = re.compile(r"listening on (?P<host>[\d.]+):(?P<port>\d+)")
START_TIMEOUT_S = 30.0


class BrokerProcess:
    """One broker subprocess with its data dir; restartable on the same port."""

    def __init__(
        self,
        data_dir: Path,
        broker_id: int = 0,
        extra_args: list[str] | None = None,
        properties: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.broker_id = broker_id
        self.extra_args = list(extra_args or [])
        self.properties = dict(properties or {})
        self.env = dict(env or {})
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=2000)
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "barnabas",
            "broker",
            "--id",
            str(self.broker_id),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            str(self.data_dir),
        ]
        if self.properties:
            config = self.data_dir.parent / f"server-{self.broker_id}.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
            cmd += ["--config", str(config)]
        return cmd + self.extra_args

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it reports its listening address."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        listening = threading.Event()
        finished = threading.Event()

        def pump(proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line.rstrip("\n"))
                if not listening.is_set() and (m := _LISTENING.search(line)):
                    self.port = int(m["port"])
                    listening.set()
            finished.set()

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening.is_set() and not finished.is_set() and time.monotonic() < deadline:
            listening.wait(0.05)
        if not listening.is_set():
            # The output ended (or timed out) without a "listening" line: let the exit finish.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            self.kill()
            raise RuntimeError("broker did not start:\n" + "\n".join(self.output))
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM the broker and wait for a clean exit; return its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._join_reader()

    def kill(self) -> None:
        """SIGKILL the broker (crash simulation) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._join_reader()

    def pause(self) -> None:
        """SIGSTOP the broker: it keeps its sockets and files but does nothing until resumed."""
        assert self.proc is not None and self.proc.poll() is None, "not running"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused broker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return "\n".join(self.output)

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
