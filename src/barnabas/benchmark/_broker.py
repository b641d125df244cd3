"""A broker subprocess for the benchmark: barnabas.testing's Broker, with errors as BenchError.

The broker runs as ``python -m barnabas broker`` with this interpreter, exactly as a user would
start it, on its own data dir and a port it picks; it is signalled by its pid only (SIGTERM, then
SIGKILL if it hangs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from barnabas.testing import AdoptedProcess, Broker, ServerStartError

from ._settings import BenchError

__all__ = ["BrokerProcess"]


class BrokerProcess:
    """One ``barnabas broker`` child process; ``settings`` are KEY=VALUE broker settings."""

    def __init__(
        self, data_dir: Path, settings: tuple[str, ...] = (), broker_id: int = 0, coordination: str | None = None
    ) -> None:
        self.data_dir = data_dir
        self.broker_id = broker_id
        extra = [arg for item in settings for arg in ("--set", item)]
        self._broker = Broker(data_dir, broker_id, coordination_url=coordination, extra_args=extra)

    @property
    def bootstrap(self) -> str:
        return self._broker.bootstrap

    @property
    def proc(self) -> subprocess.Popen[bytes] | AdoptedProcess | None:
        return self._broker.process.proc

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> BrokerProcess:
        """Start the broker and wait until it serves.

        Raises:
            BenchError: it exited or did not serve within a minute.
        """
        try:
            self._broker.start()
        except ServerStartError as exc:
            last = str(exc).strip().splitlines()[-1]
            raise BenchError(f"the broker did not start: {last}") from None
        return self

    def alive(self) -> bool:
        return self._broker.running

    def last_lines(self, count: int = 5) -> list[str]:
        return self._broker.tail(count).splitlines()

    def stop(self) -> int | None:
        """SIGTERM (then SIGKILL after 30 s) and reap; the exit code, or None if never started."""
        if self.proc is None:
            return None
        return self._broker.stop()
