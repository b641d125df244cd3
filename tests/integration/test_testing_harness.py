"""barnabas.testing's process harness on small real processes, and its Broker's port file and restarts."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from barnabas.testing import Broker, BrokerCluster, ServerProcess, ServerStartError, line_logged, port_open

pytestmark = pytest.mark.timeout(120)

SERVER = """
import signal, socket, sys, time
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print("serving on", listener.getsockname()[1], flush=True)
while True:
    time.sleep(0.05)
"""


def server(tmp_path: Path, *args: str, ready: object = None, start_timeout_s: float = 30.0) -> ServerProcess:
    return ServerProcess(
        "toy", [sys.executable, "-c", SERVER, *args], log_path=tmp_path / "toy.log",
        ready=ready or line_logged(r"serving on \d+"), start_timeout_s=start_timeout_s, stop_timeout_s=2,
    )  # fmt: skip


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def reaches_state(pid: int, states: tuple[str, ...], timeout_s: float = 10.0) -> str:
    """The process's state once it is one of ``states`` (a signal takes effect when it is delivered)."""
    deadline = time.monotonic() + timeout_s
    while (state := process_state(pid)) not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


def test_a_server_is_ready_once_its_line_is_logged_and_stops_on_sigterm(tmp_path: Path) -> None:
    toy = server(tmp_path).start()
    assert toy.running and "serving on" in toy.log_text(this_run=True)
    assert toy.stop() == 3, "SIGTERM reached it and its handler's exit code came back"
    assert not toy.running


def test_a_server_that_ignores_sigterm_is_killed_after_the_stop_timeout(tmp_path: Path) -> None:
    toy = server(tmp_path, "--ignore-term").start()
    assert toy.stop() == -9


def test_pause_stops_the_process_and_resume_continues_it(tmp_path: Path) -> None:
    toy = server(tmp_path).start()
    assert toy.pid is not None
    toy.pause()
    assert reaches_state(toy.pid, ("T",)) == "T"
    toy.resume()
    assert reaches_state(toy.pid, ("S", "R")) in ("S", "R")
    toy.pause()
    assert toy.stop() == 3, "a paused server is resumed so that it can act on SIGTERM"


def test_a_server_that_exits_while_starting_is_an_error_with_its_log(tmp_path: Path) -> None:
    dying = ServerProcess(
        "dying", [sys.executable, "-c", "print('cannot bind: address in use'); raise SystemExit(7)"],
        log_path=tmp_path / "dying.log", ready=line_logged("never"),
    )  # fmt: skip
    with pytest.raises(ServerStartError, match=r"dying exited with code 7 while starting:\ncannot bind"):
        dying.start()


def test_a_server_never_ready_is_killed_at_the_deadline(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    toy = server(tmp_path, ready=port_open("127.0.0.1", port), start_timeout_s=1)
    with pytest.raises(ServerStartError, match="toy was not ready in time"):
        toy.start()
    assert not toy.running


def test_every_run_appends_to_one_log_and_a_restart_is_a_new_run(tmp_path: Path) -> None:
    toy = server(tmp_path).start()
    toy.restart()
    assert toy.log_text().count("serving on") == 2
    assert toy.log_text(this_run=True).count("serving on") == 1
    toy.stop()


def test_servers_started_together_are_watched_without_blocking(tmp_path: Path) -> None:
    toys = [server(tmp_path / str(i)) for i in range(2)]
    for toy in toys:
        toy.launch()
    waiting = list(toys)
    deadline = time.monotonic() + 30
    while (waiting := [toy for toy in waiting if not toy.poll_ready()]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert waiting == []
    for toy in toys:
        toy.terminate()
    assert [toy.wait_exit(5) for toy in toys] == [3, 3]
    assert [toy.exit_code for toy in toys] == [3, 3]


def test_a_tail_of_this_run_leaves_out_earlier_runs(tmp_path: Path) -> None:
    toy = server(tmp_path)
    toy.log_path.write_text("an earlier run\n")
    toy.start()
    assert "an earlier run" in toy.tail()
    assert toy.tail(this_run=True).startswith("serving on")
    toy.stop()


def test_an_adopted_process_is_stopped_by_pid_unless_its_pid_runs_something_else(tmp_path: Path) -> None:
    toy = server(tmp_path).start()
    assert toy.pid is not None
    stranger = ServerProcess("stranger", [], log_path=tmp_path / "stranger.log", ready=lambda _: True)
    assert not stranger.adopt(toy.pid, ["some other program"])
    assert stranger.stop() == 0 and toy.running, "a pid running another command is never signalled"
    adopter = ServerProcess("adopter", [], log_path=tmp_path / "adopter.log", ready=lambda _: True, stop_timeout_s=5)
    assert adopter.adopt(toy.pid, [SERVER]) and adopter.running
    assert adopter.stop() == 0, "not its child: the exit code is unknown"
    assert not adopter.running
    assert toy.stop() == 3, "SIGTERM reached it through the adopter"


def test_a_broker_writes_its_port_file_and_restarts_on_the_same_port(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "data").start()
    try:
        port = broker.port
        assert port > 0 and broker.port_file.read_text() == f"{port}\n"
        assert f"listening on PLAINTEXT://127.0.0.1:{port}" in broker.log_text()
        broker.kill()
        broker.start()
        assert broker.port == port
    finally:
        broker.stop()


def test_a_port_file_that_cannot_be_written_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "barnabas", "broker", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
         "--port-file", str(tmp_path / "missing" / "port")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"barnabas broker: --port-file {tmp_path / 'missing' / 'port'}: No such file or directory", last
    assert "Traceback" not in done.stderr


def test_a_cluster_that_does_not_come_up_leaves_no_broker_running(tmp_path: Path) -> None:
    """start() raised, so its caller has no cluster to stop: start() itself must kill what it launched."""
    cluster = BrokerCluster(tmp_path, 2)
    cluster.brokers[1].properties["no.such.setting"] = "1"  # broker 1 exits at once; broker 0 serves
    with pytest.raises(ServerStartError, match="broker 1"):
        cluster.start()
    assert cluster.brokers[0].pid is not None, "broker 0 was launched"
    assert not cluster.brokers[0].running and not cluster.brokers[1].running
