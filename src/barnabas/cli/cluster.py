"""`barnabas cluster`: start a local cluster of broker processes, stop it, and show its state.

Rules this module keeps:

- Each broker is a separate ``python -m barnabas broker`` process with this interpreter, exactly as a
  user would start it: ``--id i --listen HOST:PORT --data-dir DIR/broker-i --coordination URL``, output
  appended to ``DIR/broker-i.log``. All of them share one coordination URL (by default the embedded
  SQLite file ``DIR/coordination.db``), which is how they find each other.
- A broker is up once its log says "listening on HOST:PORT" and that port accepts a connection; the
  check that Metadata lists every broker is best effort and only warns.
- ``DIR/cluster.json`` records the pids, ports and bootstrap string of a running cluster, in the
  foreground too, so ``cluster down`` can stop it even if ``cluster up`` itself was killed.
- Only processes this command started, or recorded in ``cluster.json`` and still running
  ``barnabas broker`` on that data dir (checked in /proc, so a reused pid is left alone; Linux only),
  are ever signalled, by pid: SIGTERM, then SIGKILL after a timeout.
- Brokers run in their own sessions: a Ctrl-C in the terminal reaches ``cluster up``, which stops them in
  order, and a ``--detach``-ed cluster outlives the command that started it.
- stdout carries only results (the bootstrap string, the status); progress and warnings go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from . import log_dirs
from ._client import add_connection, connect_admin, kafka_error
from .errors import CliError
from .topics import INTERNAL_TOPICS

DEFAULT_DATA_DIR = "./barnabas-cluster"
DEFAULT_BASE_PORT = 9092
STATE_FILE = "cluster.json"
STATE_VERSION = 1
_LISTENING = re.compile(
    r"listening on (?P<host>[\w.:*-]+):(?P<port>\d+)(?:, advertised as (?P<ahost>[\w.:-]+):(?P<aport>\d+))?"
)
_WILDCARDS = ("", "*", "0.0.0.0", "::")
_POLL_S = 0.1
_LOG_TAIL_LINES = 12


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "cluster",
        help="run a local multi-broker cluster and show cluster state",
        description="Start N broker processes on this host that share one coordination backend, stop them, "
        "or show a cluster's brokers, controller and partitions.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="start N brokers and stay in the foreground until Ctrl-C (or --detach)",
        description="Start N `barnabas broker` processes (ids 0..N-1, broker i on BASE_PORT+i, data in "
        "DIR/broker-i, output in DIR/broker-i.log) sharing one coordination URL, wait until each listens, "
        "print the bootstrap string on stdout, then stay in the foreground until SIGINT or SIGTERM and stop "
        "them all. With --detach, record them in DIR/cluster.json and return; `cluster down` stops them.",
    )
    up.add_argument("--brokers", "-n", type=int, required=True, metavar="N", help="number of brokers")
    up.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        metavar="DIR",
        help=f"cluster directory (default {DEFAULT_DATA_DIR})",
    )
    up.add_argument(
        "--coordination",
        metavar="URL",
        help="coordination URL shared by every broker (default sqlite:///DIR/coordination.db)",
    )
    up.add_argument("--host", default="127.0.0.1", help="address every broker listens on (default 127.0.0.1)")
    up.add_argument(
        "--base-port",
        type=int,
        default=DEFAULT_BASE_PORT,
        metavar="P",
        help=f"broker i listens on P+i; 0 picks free ports (default {DEFAULT_BASE_PORT})",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker setting passed to every broker (repeatable)",
    )
    up.add_argument("--rack-per-broker", action="store_true", help="broker.rack=rack-i for broker i")
    up.add_argument("--detach", action="store_true", help="write DIR/cluster.json and return once the brokers are up")
    up.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for the brokers to listen (default 60)",
    )
    up.add_argument(
        "--metadata-wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for Metadata to list every broker, then only warn (default 10; 0 skips the check)",
    )
    up.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="SIGKILL a broker that has not stopped after this (default 30)",
    )
    up.set_defaults(run=_up)

    down = actions.add_parser(
        "down",
        help="stop the brokers recorded in DIR/cluster.json",
        description="Stop the cluster recorded in DIR/cluster.json: SIGTERM every broker still running there, "
        "SIGKILL after --stop-timeout, then remove the file.",
    )
    down.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        metavar="DIR",
        help=f"cluster directory (default {DEFAULT_DATA_DIR})",
    )
    down.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="SIGKILL a broker that has not stopped after this (default 30)",
    )
    down.set_defaults(run=_down)

    status = actions.add_parser(
        "status",
        help="brokers, controller and partition replication state",
        description="Describe the cluster (brokers, controller, cluster id) and every partition's leader, "
        "replicas and ISR; count under-replicated (ISR smaller than replicas) and offline (no leader) partitions.",
    )
    add_connection(status)
    shown = status.add_mutually_exclusive_group()
    shown.add_argument(
        "--under-replicated", action="store_true", help="list only under-replicated and offline partitions"
    )
    shown.add_argument("--internal", action="store_true", help="list internal topics' partitions too")
    status.add_argument("--json", action="store_true", help="print the status as JSON (every partition)")
    status.set_defaults(run=_status)
    log_dirs.add_action(actions)


# --- processes -------------------------------------------------------------------------------


@dataclass
class _Broker:
    """One broker process of the cluster, started here or read back from cluster.json."""

    broker_id: int
    data_dir: Path
    log_path: Path
    host: str
    port: int
    pid: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0
    advertised: tuple[str, int] | None = None
    ready: bool = False

    @property
    def endpoint(self) -> str:
        host, port = self.advertised or (self.host, self.port)
        return f"{host}:{port}"

    def exit_code(self) -> int | None:
        """The exit code if the process has ended, else None."""
        if self.proc is not None:
            return self.proc.poll()
        return None if _running_broker(self.pid, self.data_dir) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.broker_id, "pid": self.pid, "host": self.host, "port": self.port, "endpoint": self.endpoint,
            "data_dir": str(self.data_dir), "log": str(self.log_path),
        }  # fmt: skip

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> _Broker:
        return cls(
            broker_id=int(document["id"]), data_dir=Path(document["data_dir"]), log_path=Path(document["log"]),
            host=str(document["host"]), port=int(document["port"]), pid=int(document["pid"]),
        )  # fmt: skip


@dataclass
class _Stopper:
    """Turns SIGINT and SIGTERM into an event while installed; restores the old handlers after."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None
    _previous: dict[int, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Stopper]:
        def handler(signum: int, _frame: Any) -> None:
            self.signum = signum
            self.event.set()

        for which in (signal.SIGINT, signal.SIGTERM):
            self._previous[which] = signal.signal(which, handler)
        try:
            yield self
        finally:
            for which_int, previous in self._previous.items():
                signal.signal(which_int, previous)

    @property
    def stopping(self) -> bool:
        return self.event.is_set()


def _process_args(pid: int) -> list[str] | None:
    """The command line of a running process (not a zombie), or None if there is none with this pid."""
    if pid <= 0:
        return None
    proc = Path("/proc") / str(pid)
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    if state in ("Z", "X"):  # exited, waiting for its parent to reap it
        return None
    return [arg.decode(errors="replace") for arg in argv]


def _running_broker(pid: int, data_dir: Path) -> bool:
    """Whether ``pid`` is alive and still a ``barnabas broker`` on ``data_dir`` (not a reused pid)."""
    args = _process_args(pid)
    return args is not None and "broker" in args and str(data_dir) in args


def _running_supervisor(pid: int) -> bool:
    """Whether ``pid`` is alive and still a ``barnabas cluster up`` process."""
    args = _process_args(pid)
    return args is not None and "cluster" in args and "up" in args


def _log_tail(broker: _Broker) -> list[str]:
    """The last lines this run of the broker wrote to its log."""
    try:
        with broker.log_path.open("rb") as log:
            log.seek(max(broker.log_offset, broker.log_path.stat().st_size - 16384))
            text = log.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-_LOG_TAIL_LINES:]


def _scan_log(broker: _Broker) -> bool:
    """Whether this run of the broker logged "listening on", taking the port and advertised address it names."""
    try:
        with broker.log_path.open("rb") as log:
            log.seek(broker.log_offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return False
    match = _LISTENING.search(text)
    if match is None:
        return False
    broker.port = int(match["port"])
    if match["ahost"]:
        broker.advertised = (match["ahost"], int(match["aport"]))
    return True


def _accepts(host: str, port: int) -> bool:
    target = "127.0.0.1" if host in _WILDCARDS else host
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        return False


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _stop_brokers(brokers: Sequence[_Broker], timeout: float, console: Console) -> None:
    """SIGTERM every broker still running, wait up to ``timeout`` for all, SIGKILL the rest, reap children."""
    running = [b for b in brokers if b.pid and b.exit_code() is None]
    for broker in running:
        _signal(broker.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running and time.monotonic() < deadline:
        running = [b for b in running if b.exit_code() is None]
        if running:
            time.sleep(_POLL_S)
    for broker in running:
        console.print(f"broker {broker.broker_id} (pid {broker.pid}) did not stop in {timeout:g} s: SIGKILL")
        _signal(broker.pid, signal.SIGKILL)
    for broker in brokers:
        if broker.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                broker.proc.wait(timeout=10)


# --- cluster.json ----------------------------------------------------------------------------


def _state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _write_state(data_dir: Path, document: dict[str, Any]) -> None:
    path = _state_path(data_dir)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(document, indent=2) + "\n")
    partial.replace(path)


def _read_state(data_dir: Path) -> dict[str, Any] | None:
    path = _state_path(data_dir)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CliError(f"{path}: cannot read: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
        raise CliError(f"{path}: not a cluster state file of version {STATE_VERSION}")
    return document


def _state_document(args: argparse.Namespace, coordination: str, brokers: Sequence[_Broker]) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "data_dir": str(args.data_dir),
        "coordination": coordination,
        "bootstrap": ",".join(b.endpoint for b in brokers),
        "detached": bool(args.detach),
        "supervisor_pid": None if args.detach else os.getpid(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "brokers": [b.to_json() for b in brokers],
    }


# --- up --------------------------------------------------------------------------------------


def _settings(items: Sequence[str]) -> list[str]:
    for item in items:
        key, sep, _value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set {item!r}: expected KEY=VALUE")
    return list(items)


def _check_up_args(args: argparse.Namespace) -> None:
    if args.brokers < 1:
        raise CliError("--brokers must be positive")
    if args.base_port < 0 or args.base_port + args.brokers - 1 > 65535:
        raise CliError(
            f"--base-port {args.base_port}: ports {args.base_port}..{args.base_port + args.brokers - 1} are not valid"
        )
    if args.timeout <= 0 or args.stop_timeout <= 0 or args.metadata_wait < 0:
        raise CliError("--timeout and --stop-timeout must be positive, --metadata-wait not negative")


def _broker_command(args: argparse.Namespace, broker: _Broker, coordination: str, settings: Sequence[str]) -> list[str]:
    command = [
        sys.executable, "-m", "barnabas", "broker", "--id", str(broker.broker_id),
        "--listen", f"{broker.host}:{broker.port}", "--data-dir", str(broker.data_dir),
        "--coordination", coordination,
    ]  # fmt: skip
    for item in settings:
        command += ["--set", item]
    if args.rack_per_broker:
        command += ["--set", f"broker.rack=rack-{broker.broker_id}"]
    return command


def _spawn(command: list[str], broker: _Broker) -> None:
    broker.data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with broker.log_path.open("ab") as log:
        broker.log_offset = log.tell()
        header = f"--- barnabas cluster up {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(command)}\n"
        log.write(header.encode())
        log.flush()
        broker.log_offset = log.tell()
        broker.proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    broker.pid = broker.proc.pid


def _startup_failure(broker: _Broker, code: int, console: Console) -> CliError:
    tail = _log_tail(broker)
    for line in tail:
        console.print(f"  broker {broker.broker_id} | {line}", markup=False, highlight=False)
    last = tail[-1] if tail else "no output"
    return CliError(f"broker {broker.broker_id} exited with code {code} during startup (log {broker.log_path}): {last}")


def _wait_listening(brokers: Sequence[_Broker], deadline: float, stopper: _Stopper, console: Console) -> None:
    """Wait until every broker has logged that it listens and accepts a connection.

    Raises:
        CliError: a broker exited, the deadline passed, or a signal asked to stop.
    """
    with console.status(f"starting {len(brokers)} brokers") as status:
        while True:
            if stopper.stopping:
                raise CliError("interrupted while starting", exit_code=130)
            for broker in brokers:
                if broker.ready:
                    continue
                code = broker.exit_code()
                if code is not None:
                    raise _startup_failure(broker, code, console)
                if _scan_log(broker) and _accepts(broker.host, broker.port):
                    broker.ready = True
                    console.print(f"broker {broker.broker_id} listening on {broker.endpoint} (pid {broker.pid})")
            waiting = [b for b in brokers if not b.ready]
            if not waiting:
                return
            ids = ", ".join(str(b.broker_id) for b in waiting)
            if time.monotonic() > deadline:
                tail = _log_tail(waiting[0])
                raise CliError(
                    f"brokers {ids} not listening after the timeout (log {waiting[0].log_path}): "
                    f"{tail[-1] if tail else 'no output'}"
                )
            status.update(f"starting brokers: waiting for {ids}")
            time.sleep(_POLL_S)


def _wait_metadata(brokers: Sequence[_Broker], wait_s: float, stopper: _Stopper, console: Console) -> None:
    """Best effort: wait until Metadata lists every broker; warn if it does not in ``wait_s``."""
    if wait_s <= 0:
        return
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    expected = {b.broker_id for b in brokers}
    bootstrap = ",".join(b.endpoint for b in brokers)
    admin: Any = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + wait_s
    seen: set[int] = set()
    problem = ""
    with console.status("waiting for Metadata to list every broker"):
        while not stopper.stopping and time.monotonic() < deadline:
            try:
                metadata = admin.list_topics(timeout=max(0.5, min(2.0, deadline - time.monotonic())))
                seen = set(metadata.brokers)
                problem = ""
            except KafkaException as exc:
                problem = kafka_error(exc).args[0]
            if seen >= expected:
                console.print(f"Metadata lists all {len(expected)} brokers")
                return
            time.sleep(0.25)
    if stopper.stopping:
        return
    listed = ", ".join(map(str, sorted(seen))) or "none"
    console.print(
        f"warning: after {wait_s:g} s Metadata lists brokers {listed} of {len(expected)}"
        + (f" ({problem})" if problem else "")
        + "; the brokers listen, but may not see each other yet",
        markup=False,
    )


def _up(args: argparse.Namespace) -> int:
    _check_up_args(args)
    settings = _settings(args.set)
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    args.data_dir = args.data_dir.resolve()
    try:
        args.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--data-dir {args.data_dir}: {exc.strerror or exc}") from None
    previous = _read_state(args.data_dir)
    if previous is not None:
        alive = [b for b in map(_Broker.from_json, previous["brokers"]) if _running_broker(b.pid, b.data_dir)]
        if alive:
            pids = ", ".join(str(b.pid) for b in alive)
            raise CliError(
                f"a cluster is already running from {args.data_dir} (pids {pids}); "
                f"stop it with: barnabas cluster down --data-dir {args.data_dir}"
            )
        _state_path(args.data_dir).unlink(missing_ok=True)
    coordination = args.coordination or f"sqlite://{args.data_dir / 'coordination.db'}"
    brokers = [
        _Broker(
            broker_id=i,
            data_dir=args.data_dir / f"broker-{i}",
            log_path=args.data_dir / f"broker-{i}.log",
            host=args.host,
            port=args.base_port + i if args.base_port else 0,
        )
        for i in range(args.brokers)
    ]
    stopper = _Stopper()
    handed_over = wrote_state = False
    with stopper.installed():
        try:
            for broker in brokers:
                try:
                    _spawn(_broker_command(args, broker, coordination, settings), broker)
                except OSError as exc:
                    raise CliError(f"cannot start broker {broker.broker_id}: {exc}") from None
            _wait_listening(brokers, time.monotonic() + args.timeout, stopper, console)
            _wait_metadata(brokers, args.metadata_wait, stopper, console)
            if stopper.stopping:
                raise CliError("interrupted while starting", exit_code=130)
            for broker in brokers:
                if (code := broker.exit_code()) is not None:
                    raise _startup_failure(broker, code, console)
            _write_state(args.data_dir, _state_document(args, coordination, brokers))
            wrote_state = True
            print(",".join(b.endpoint for b in brokers), flush=True)
            if args.detach:
                handed_over = True
                console.print(
                    f"{len(brokers)} brokers running in the background; "
                    f"stop them with: barnabas cluster down --data-dir {args.data_dir}"
                )
                return 0
            console.print(f"{len(brokers)} brokers running; Ctrl-C stops them (logs in {args.data_dir})")
            return _supervise(brokers, stopper, console)
        finally:
            if not handed_over:
                _shut_down(args, brokers, wrote_state, console)


def _supervise(brokers: Sequence[_Broker], stopper: _Stopper, console: Console) -> int:
    """Wait for SIGINT or SIGTERM, reporting brokers that exit on their own; 1 if every broker exited."""
    reported: set[int] = set()
    while not stopper.event.wait(0.5):
        for broker in brokers:
            if broker.broker_id not in reported and (code := broker.exit_code()) is not None:
                reported.add(broker.broker_id)
                tail = _log_tail(broker)
                console.print(
                    f"warning: broker {broker.broker_id} (pid {broker.pid}) exited with code {code}: "
                    f"{tail[-1] if tail else 'no output'} (log {broker.log_path})",
                    markup=False,
                )
        if len(reported) == len(brokers):
            raise CliError("every broker exited")
    name = signal.Signals(stopper.signum).name if stopper.signum else "signal"
    console.print(f"{name}: stopping {len(brokers)} brokers")
    return 0


def _shut_down(args: argparse.Namespace, brokers: Sequence[_Broker], wrote_state: bool, console: Console) -> None:
    # A second Ctrl-C must not cut the shutdown short: it is bounded by --stop-timeout and SIGKILL.
    with _ignoring_signals():
        _stop_brokers([b for b in brokers if b.proc is not None], args.stop_timeout, console)
        if wrote_state:
            _state_path(args.data_dir).unlink(missing_ok=True)


@contextlib.contextmanager
def _ignoring_signals() -> Iterator[None]:
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --- down ------------------------------------------------------------------------------------


def _down(args: argparse.Namespace) -> int:
    if args.stop_timeout <= 0:
        raise CliError("--stop-timeout must be positive")
    data_dir = args.data_dir.resolve()
    state = _read_state(data_dir)
    if state is None:
        raise CliError(f"no {STATE_FILE} in {data_dir}: no cluster was started there with `barnabas cluster up`")
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    brokers = [_Broker.from_json(document) for document in state["brokers"]]
    running = [b for b in brokers if _running_broker(b.pid, b.data_dir)]
    supervisor = state.get("supervisor_pid")
    if isinstance(supervisor, int) and supervisor != os.getpid() and _running_supervisor(supervisor):
        # A foreground `cluster up` owns them: let it stop its brokers in order.
        console.print(f"asking `cluster up` (pid {supervisor}) to stop its brokers")
        _signal(supervisor, signal.SIGTERM)
        _wait_gone(lambda: _running_supervisor(supervisor), args.stop_timeout + 15)
    with _ignoring_signals():
        _stop_brokers(running, args.stop_timeout, console)
    left = [b for b in brokers if _running_broker(b.pid, b.data_dir)]
    if left:
        raise CliError("still running: " + ", ".join(f"broker {b.broker_id} (pid {b.pid})" for b in left))
    _state_path(data_dir).unlink(missing_ok=True)
    print(f"stopped brokers: {', '.join(str(b.broker_id) for b in running)}" if running else "no broker was running")
    return 0


def _wait_gone(alive: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive() and time.monotonic() < deadline:
        time.sleep(_POLL_S)


# --- status ----------------------------------------------------------------------------------


def _status(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = connect_admin(args)
    try:
        metadata = admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        raise kafka_error(exc) from None
    report = _report(admin, metadata, args.timeout)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report, sys.stdout, shown=_shown_partitions(args))
    return 0


def _shown_partitions(args: argparse.Namespace) -> Callable[[dict[str, Any]], bool]:
    """Which partitions the table lists: problems only, every one, or (default) those of non-internal topics."""
    if args.under_replicated:
        return lambda p: len(p["isr"]) < len(p["replicas"]) or p["leader"] == -1
    if args.internal:
        return lambda p: True
    return lambda p: p["topic"] not in INTERNAL_TOPICS


def _report(admin: Any, metadata: Any, timeout: float) -> dict[str, Any]:
    """The cluster's state as plain data: DescribeCluster where it answers, Metadata otherwise."""
    from confluent_kafka import KafkaException

    cluster_id = metadata.cluster_id
    controller_id = metadata.controller_id
    brokers = {b.id: {"id": b.id, "host": b.host, "port": b.port, "rack": None} for b in metadata.brokers.values()}
    try:
        described = admin.describe_cluster(request_timeout=timeout).result(timeout)
    except (KafkaException, TimeoutError) as exc:
        print(f"warning: DescribeCluster failed, racks unknown: {exc}", file=sys.stderr)
    else:
        cluster_id = described.cluster_id or cluster_id
        if described.controller is not None:
            controller_id = described.controller.id
        for node in described.nodes:
            brokers[node.id] = {"id": node.id, "host": node.host, "port": node.port, "rack": node.rack or None}
    partitions = []
    for name in sorted(metadata.topics):
        topic = metadata.topics[name]
        for index, partition in sorted(topic.partitions.items()):
            partitions.append({
                "topic": name, "partition": index, "leader": partition.leader, "replicas": list(partition.replicas),
                "isr": list(partition.isrs), "error": partition.error.str() if partition.error else None,
            })  # fmt: skip
    under_replicated = sum(1 for p in partitions if len(p["isr"]) < len(p["replicas"]))
    offline = sum(1 for p in partitions if p["leader"] == -1)
    return {
        "cluster_id": cluster_id,
        "controller_id": controller_id if controller_id is not None and controller_id >= 0 else None,
        "brokers": [
            {**broker, "controller": broker_id == controller_id} for broker_id, broker in sorted(brokers.items())
        ],
        "topics": len(metadata.topics),
        "partitions": partitions,
        "under_replicated_partitions": under_replicated,
        "offline_partitions": offline,
    }


def _print_report(report: dict[str, Any], out: TextIO, shown: Callable[[dict[str, Any]], bool]) -> None:
    console = Console(file=out, highlight=False, width=max(100, Console(file=out).width))
    controller = report["controller_id"]
    console.print(
        f"cluster {report['cluster_id'] or '(no id)'}: {len(report['brokers'])} brokers, "
        f"controller {controller if controller is not None else 'none'}"
    )
    brokers = Table(title="brokers", title_justify="left")
    for column in ("id", "endpoint", "rack", ""):
        brokers.add_column(column)
    for broker in report["brokers"]:
        brokers.add_row(
            str(broker["id"]), f"{broker['host']}:{broker['port']}", broker["rack"] or "-",
            "controller" if broker["controller"] else "",
        )  # fmt: skip
    console.print(brokers)
    listed = [p for p in report["partitions"] if shown(p)]
    if listed:
        partitions = Table(title="partitions", title_justify="left")
        for column in ("topic", "partition", "leader", "replicas", "isr"):
            partitions.add_column(column)
        for p in listed:
            partitions.add_row(
                p["topic"], str(p["partition"]), str(p["leader"]) if p["leader"] != -1 else "none (offline)",
                ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
            )  # fmt: skip
        console.print(partitions)
    console.print(
        f"{len(report['partitions'])} partitions in {report['topics']} topics: "
        f"{report['under_replicated_partitions']} under-replicated, {report['offline_partitions']} offline"
    )
