"""The broker process and signals: SIGUSR1 dumps its asyncio tasks and it goes on; `barnabas shutdown` stops it.

`barnabas shutdown` is the Kubernetes preStop hook: SIGTERM (the broker's controlled shutdown), then
wait until the broker has exited or, with ``--admin-url``, stopped serving. It signals only a
barnabas broker or proxy, and says in one line why it will not.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.broker_process import BrokerProcess

ADMIN = {"admin.listeners": "http://127.0.0.1:0"}


def test_sigusr1_logs_every_task_and_the_broker_goes_on(broker: BrokerProcess) -> None:
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while "SIGUSR1:" not in broker.log_text():
        assert time.monotonic() < deadline, "no task dump within 30 s:\n" + broker.log_text()
        time.sleep(0.05)
    dump = broker.log_text().split("SIGUSR1:", 1)[1]
    assert "log maintenance" in dump and "_maintain" in dump  # a task's name and the line it waits on
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert list(metadata.brokers) == [0]


def shutdown(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "barnabas", "shutdown", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


def test_shutdown_waits_for_the_brokers_controlled_shutdown(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Waiting on the admin endpoint it returns once the broker stopped serving; the broker then exits cleanly."""
    broker = broker_factory(properties=ADMIN).start()
    pid = broker.process.pid
    assert pid is not None
    done = shutdown("--pid", str(pid), "--admin-url", f"http://127.0.0.1:{broker.admin_port}", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"broker process {pid} stopped( serving)? in [0-9.]+ s(; it closes its logs)?\n", done.stdout)
    with pytest.raises(ConnectionRefusedError):  # its listeners closed before its admin endpoint
        socket.create_connection((broker.host, broker.port), timeout=5).close()
    assert broker.process.wait_exit(30) == 0
    assert "stopped cleanly" in broker.log_text()


def test_shutdown_without_an_admin_endpoint_waits_for_the_exit(broker: BrokerProcess) -> None:
    pid = broker.process.pid
    done = shutdown("--pid", str(pid), "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"broker process {pid} stopped in [0-9.]+ s\n", done.stdout)
    assert broker.process.exit_code == 0 and "stopped cleanly" in broker.log_text()


def test_shutdown_signals_nothing_but_a_barnabas_broker_or_proxy() -> None:
    me = shutdown("--pid", str(os.getpid()))
    assert me.returncode == 1
    assert me.stderr.startswith(f"barnabas shutdown: process {os.getpid()} is not a barnabas broker or proxy: ")
    assert me.stderr.count("\n") == 1
    gone = subprocess.Popen(["true"])
    gone.wait()
    missing = shutdown("--pid", str(gone.pid))
    assert (missing.returncode, missing.stderr) == (1, f"barnabas shutdown: no process {gone.pid}\n")
