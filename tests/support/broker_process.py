"""The tests' broker: barnabas.testing's Broker, with the names the tests use.

Processes are stopped by pid, never by name. The broker binds 127.0.0.1 port 0 on first start
and keeps the port it got across restarts, so clients that cached it reconnect.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from barnabas.testing import AdoptedProcess, Broker
from barnabas.testing.network import NetNode


class LogLines:
    """A broker's log as lines, from a mark on: ``clear()`` moves the mark to the end."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._mark = 0

    def clear(self) -> None:
        self._mark = len(self._broker.log_text())

    def __iter__(self) -> Iterator[str]:
        return iter(self._broker.log_text()[self._mark :].splitlines())


class BrokerProcess(Broker):
    """One broker subprocess with its data dir; restartable on the same port."""

    def __init__(
        self,
        data_dir: Path,
        broker_id: int = 0,
        extra_args: list[str] | None = None,
        properties: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        *,
        name: str | None = None,
        node: NetNode | None = None,
    ) -> None:
        super().__init__(
            data_dir, broker_id, properties=properties, extra_args=extra_args or [], env=env, name=name, node=node
        )
        self.output = LogLines(self)

    @property
    def proc(self) -> subprocess.Popen[bytes] | AdoptedProcess | None:
        return self.process.proc
