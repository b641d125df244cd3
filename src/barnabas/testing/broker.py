"""A real `barnabas broker` process for tests: started on a port it picks, restartable on the same port.

The broker is the installed ``barnabas broker`` command run by this interpreter, bound to
127.0.0.1 (or ``host``). It is ready when it has written the port it listens on to its port file
(``--port-file``), which it does once it serves; restarts keep that port, so clients that
cached the address reconnect to the same broker. ``barnabas cluster up`` runs its brokers as these,
in their own sessions, and ``cluster down`` adopts them by pid.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .network import NetNode
from .process import POLL_S, ManagedServer, ServerProcess, ServerStartError, admin_port_of, port_file_written

__all__ = ["Broker"]


class Broker(ManagedServer):
    """One broker with its data dir, log file and (once started) port.

    Args:
        data_dir: the broker's log dir; its log, port file and properties file go beside it (DIR.log, ...).
        broker_id: ``broker.id``.
        coordination_url: ``coordination.url``; default an SQLite file beside ``data_dir``.
        properties: broker settings by Kafka's names, written to a properties file.
        extra_args: more ``barnabas broker`` arguments.
        env: environment variables added to this process's.
        port: the port to listen on; 0 (the default) lets the broker pick one on its first start.
        name: the name of its files beside ``data_dir`` (NAME.log, NAME.port, NAME.properties); default
            the data dir's name.
        new_session: run it in a session of its own, so that a terminal's Ctrl-C does not reach it
            and it outlives this process (a detached cluster).
        node: run it inside this node of a private network (partition tests), bound to the node's address.
    """

    def __init__(
        self,
        data_dir: Path,
        broker_id: int = 0,
        *,
        coordination_url: str | None = None,
        properties: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        start_timeout_s: float = 60.0,
        name: str | None = None,
        new_session: bool = False,
        node: NetNode | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.node = node
        self.broker_id = broker_id
        self.coordination_url = coordination_url
        self.properties = dict(properties or {})
        self.extra_args = list(extra_args)
        self.host = node.address if node is not None else host
        self.port = port
        # Beside the data dir, named after it unless ``name`` says otherwise: brokers never share a file.
        files = self.data_dir.with_name(name or self.data_dir.name)
        self.port_file = files.with_name(files.name + ".port")
        #: Where the broker writes its admin endpoint's port (``admin.listeners``), before it joins its cluster.
        self.admin_port_file = files.with_name(files.name + ".admin-port")
        self.properties_file = files.with_name(files.name + ".properties")
        self.process = ServerProcess(
            f"broker {broker_id}",
            [],
            log_path=files.with_name(files.name + ".log"),
            ready=port_file_written(self.port_file),
            env={"PYTHONUNBUFFERED": "1", **(env or {})},
            start_timeout_s=start_timeout_s,
            new_session=new_session,
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        prefix = self.node.exec_prefix if self.node is not None else []
        command = [
            *prefix, sys.executable, "-m", "barnabas", "broker", "--id", str(self.broker_id),
            "--listen", f"{self.host}:{self.port}", "--data-dir", str(self.data_dir),
            "--port-file", str(self.port_file), "--admin-port-file", str(self.admin_port_file),
        ]  # fmt: skip
        if self.coordination_url is not None:
            command += ["--coordination", self.coordination_url]
        if self.properties:
            self.properties_file.parent.mkdir(parents=True, exist_ok=True)
            self.properties_file.write_text("".join(f"{key}={value}\n" for key, value in self.properties.items()))
            command += ["--config", str(self.properties_file)]
        return command + self.extra_args

    def launch(self) -> None:
        """Start the process without waiting; ``wait_ready`` waits (a cluster starts its brokers together)."""
        self.port_file.unlink(missing_ok=True)
        self.admin_port_file.unlink(missing_ok=True)
        self.process.command = self.command()
        self.process.launch()

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until it serves, then take the port it wrote."""
        super().wait_ready(timeout_s)
        self._take_port()

    def poll_ready(self) -> bool:
        """Whether it serves now (taking the port it wrote), without waiting.

        Raises:
            ServerStartError: it has exited.
        """
        if not super().poll_ready():
            return False
        self._take_port()
        return True

    def _take_port(self) -> None:
        self.port = int(self.port_file.read_text().strip())

    @property
    def admin_port(self) -> int:
        """The port of this run's admin endpoint (set ``admin.listeners``, e.g. ``http://127.0.0.1:0``).

        Raises:
            RuntimeError: it has none (not started yet, or no admin listener).
        """
        return admin_port_of(self.admin_port_file, self.process, f"broker {self.broker_id}")

    def wait_admin_port(self, timeout_s: float | None = None) -> int:
        """Wait until the admin endpoint listens (before the broker has joined its cluster); its port.

        Raises:
            ServerStartError: the broker exited first, or the time ran out (it is then killed).
        """
        listening = port_file_written(self.admin_port_file)
        deadline = time.monotonic() + (self.process.start_timeout_s if timeout_s is None else timeout_s)
        name = f"broker {self.broker_id}"
        while not listening(self.process):
            code = self.process.exit_code
            if code is not None:
                raise ServerStartError(f"{name} exited with code {code} while starting:\n{self.tail()}")
            if time.monotonic() >= deadline:
                self.kill()
                raise ServerStartError(f"{name}'s admin endpoint did not listen in time:\n{self.tail()}")
            time.sleep(POLL_S)
        return self.admin_port

    def adopt(self, pid: int) -> bool:
        """Take over this broker's process started by an earlier command (``cluster up --detach``); whether it runs.

        A pid counts as this broker's only while it runs ``barnabas broker`` on this data dir.
        """
        return self.process.adopt(pid, ["broker", "--data-dir", str(self.data_dir)])

    def log_text(self) -> str:
        return self.process.log_text()

    def tail(self, lines: int = 40) -> str:
        return self.process.tail(lines)
