"""`barnabas cluster`: start a local cluster of broker processes, stop it, and show its state.

Rules this module keeps:

- Each broker is a barnabas.testing Broker, the process harness the tests and the benchmarks use: a
  separate ``python -m barnabas broker`` process with this interpreter, exactly as a user would start
  it: ``--id i --listen HOST:PORT --data-dir DIR/broker-i --port-file DIR/broker-i.port --coordination
  URL``, output appended to ``DIR/broker-i.log``. All of them share one coordination URL (by default the
  embedded SQLite file ``DIR/coordination.db``), which is how they find each other.
- A broker is up once it has written its port file, which it does once it serves; the check that
  Metadata lists every broker is best effort and only warns.
- ``DIR/cluster.json`` records the pids, ports and bootstrap string of a running cluster, in the
  foreground too, so ``cluster down`` can stop it even if ``cluster up`` itself was killed.
- Only processes this command started, or recorded in ``cluster.json`` and still running
  ``barnabas broker`` on that data dir (adopted by the harness, which checks /proc, so a reused pid is
  left alone; Linux only), are ever signalled, by pid: SIGTERM, then SIGKILL after a timeout.
- Brokers run in their own sessions: a Ctrl-C in the terminal reaches ``cluster up``, which stops them in
  order, and a ``--detach``-ed cluster outlives the command that started it.
- stdout carries only results (the bootstrap string, the status); progress and warnings go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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

from barnabas.testing import AdoptedProcess, Broker, ServerStartError

from . import cordon, decommission, log_dirs, unregister
from ._client import add_connection, connect_admin, kafka_error
from .errors import CliError
from .topics import INTERNAL_TOPICS

DEFAULT_DATA_DIR = "./barnabas-cluster"
DEFAULT_BASE_PORT = 9092
STATE_FILE = "cluster.json"
STATE_VERSION = 1
_WILDCARDS = ("", "0.0.0.0", "::")
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
        description="Describe the cluster (brokers, controller, cluster id, cordoned brokers) and every "
        "partition's leader, replicas and ISR; count under-replicated (ISR smaller than replicas) and offline (no "
        "leader) partitions.",
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
    decommission.add_action(actions)
    cordon.add_actions(actions)
    unregister.add_action(actions)


# --- processes -------------------------------------------------------------------------------


class _Member(Broker):
    """A broker of the cluster: the harness's Broker in its own session, and the address it gives clients."""

    def __init__(self, args: argparse.Namespace, broker_id: int, coordination: str, settings: Sequence[str]) -> None:
        if args.rack_per_broker:
            settings = [*settings, f"broker.rack=rack-{broker_id}"]
        super().__init__(
            args.data_dir / f"broker-{broker_id}", broker_id, coordination_url=coordination,
            extra_args=[arg for item in settings for arg in ("--set", item)], host=args.host,
            port=args.base_port + broker_id if args.base_port else 0, new_session=True,
        )  # fmt: skip
        self.settings = list(settings)
        self.endpoint = self.bootstrap


def _adopted(document: dict[str, Any]) -> Broker:
    """A broker recorded in cluster.json, adopted by its pid (it runs only if that pid still runs it)."""
    broker = Broker(
        Path(document["data_dir"]), int(document["id"]), host=str(document["host"]), port=int(document["port"])
    )
    broker.adopt(int(document["pid"]))
    return broker


def _broker_json(broker: _Member) -> dict[str, Any]:
    return {
        "id": broker.broker_id, "pid": broker.pid, "host": broker.host, "port": broker.port,
        "endpoint": broker.endpoint, "data_dir": str(broker.data_dir), "log": str(broker.process.log_path),
    }  # fmt: skip


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


def _log_tail(broker: Broker) -> list[str]:
    """The last lines this run of the broker wrote to its log."""
    lines = broker.process.tail(_LOG_TAIL_LINES * 2, this_run=True).splitlines()
    return [line for line in lines if line.strip()][-_LOG_TAIL_LINES:]


def _advertised(broker: _Member) -> str:
    """The address the broker gives clients, worked out as it does (``barnabas.broker.Broker._advertised_endpoint``).

    That is advertised.listeners where set (by ``--set`` or ``BARNABAS_ADVERTISED_LISTENERS``), else the
    address it listens on, with this host's name for a wildcard. The port file holds only the port.
    """
    from barnabas.config import load_broker_config

    overrides = {key.strip(): value for key, _, value in (item.partition("=") for item in broker.settings)}
    overrides["listeners"] = f"PLAINTEXT://{broker.host}:{broker.port}"
    config = load_broker_config(None, overrides)
    if config["advertised.listeners"]:
        advertised = config.advertised_listeners[0]
        return f"{advertised.host or socket.getfqdn()}:{advertised.port}"
    return f"{socket.getfqdn() if broker.host in _WILDCARDS else broker.host}:{broker.port}"


def _stop_brokers(brokers: Sequence[Broker], timeout: float, console: Console) -> None:
    """The stop signal to every broker still running, then wait up to ``timeout`` for all, SIGKILL the rest."""
    running = [b for b in brokers if b.running]
    for broker in running:
        broker.process.terminate()
    deadline = time.monotonic() + timeout
    for broker in running:
        if broker.process.wait_exit(deadline - time.monotonic()) is None:
            console.print(f"broker {broker.broker_id} (pid {broker.pid}) did not stop in {timeout:g} s: SIGKILL")
            broker.kill()


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


def _state_document(args: argparse.Namespace, coordination: str, brokers: Sequence[_Member]) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "data_dir": str(args.data_dir),
        "coordination": coordination,
        "bootstrap": ",".join(b.endpoint for b in brokers),
        "detached": bool(args.detach),
        "supervisor_pid": None if args.detach else os.getpid(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "brokers": [_broker_json(b) for b in brokers],
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


def _launch(broker: Broker) -> None:
    """Start the broker without waiting, after a line in its log that says which run follows."""
    header = f"--- barnabas cluster up {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(broker.command())}\n"
    try:
        with broker.process.log_path.open("a") as log:
            log.write(header)
        broker.launch()
    except OSError as exc:
        raise CliError(f"cannot start broker {broker.broker_id}: {exc}") from None


def _startup_failure(broker: Broker, console: Console) -> CliError:
    tail = _log_tail(broker)
    for line in tail:
        console.print(f"  broker {broker.broker_id} | {line}", markup=False, highlight=False)
    last = tail[-1] if tail else "no output"
    return CliError(
        f"broker {broker.broker_id} exited with code {broker.process.exit_code} during startup "
        f"(log {broker.process.log_path}): {last}"
    )


def _serves(broker: _Member, console: Console) -> bool:
    """Whether the broker serves now (it has written its port file), taking the address it gives clients.

    Raises:
        CliError: it exited.
    """
    try:
        if not broker.poll_ready():
            return False
    except ServerStartError:
        raise _startup_failure(broker, console) from None
    broker.endpoint = _advertised(broker)
    console.print(f"broker {broker.broker_id} listening on {broker.endpoint} (pid {broker.pid})")
    return True


def _wait_listening(brokers: Sequence[_Member], deadline: float, stopper: _Stopper, console: Console) -> None:
    """Wait until every broker serves.

    Raises:
        CliError: a broker exited, the deadline passed, or a signal asked to stop.
    """
    waiting = list(brokers)
    with console.status(f"starting {len(brokers)} brokers") as status:
        while True:
            if stopper.stopping:
                raise CliError("interrupted while starting", exit_code=130)
            waiting = [b for b in waiting if not _serves(b, console)]
            if not waiting:
                return
            ids = ", ".join(str(b.broker_id) for b in waiting)
            if time.monotonic() > deadline:
                tail = _log_tail(waiting[0])
                raise CliError(
                    f"brokers {ids} not listening after the timeout (log {waiting[0].process.log_path}): "
                    f"{tail[-1] if tail else 'no output'}"
                )
            status.update(f"starting brokers: waiting for {ids}")
            time.sleep(_POLL_S)


def _wait_metadata(brokers: Sequence[_Member], wait_s: float, stopper: _Stopper, console: Console) -> None:
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
        alive = [b for b in map(_adopted, previous["brokers"]) if b.running]
        if alive:
            pids = ", ".join(str(b.pid) for b in alive)
            raise CliError(
                f"a cluster is already running from {args.data_dir} (pids {pids}); "
                f"stop it with: barnabas cluster down --data-dir {args.data_dir}"
            )
        _state_path(args.data_dir).unlink(missing_ok=True)
    coordination = args.coordination or f"sqlite://{args.data_dir / 'coordination.db'}"
    brokers = [_Member(args, i, coordination, settings) for i in range(args.brokers)]
    stopper = _Stopper()
    handed_over = wrote_state = False
    with stopper.installed():
        try:
            for broker in brokers:
                _launch(broker)
            _wait_listening(brokers, time.monotonic() + args.timeout, stopper, console)
            _wait_metadata(brokers, args.metadata_wait, stopper, console)
            if stopper.stopping:
                raise CliError("interrupted while starting", exit_code=130)
            for broker in brokers:
                if not broker.running:
                    raise _startup_failure(broker, console)
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


def _supervise(brokers: Sequence[_Member], stopper: _Stopper, console: Console) -> int:
    """Wait for SIGINT or SIGTERM, reporting brokers that exit on their own; 1 if every broker exited."""
    reported: set[int] = set()
    while not stopper.event.wait(0.5):
        for broker in brokers:
            if broker.broker_id not in reported and (code := broker.process.exit_code) is not None:
                reported.add(broker.broker_id)
                tail = _log_tail(broker)
                console.print(
                    f"warning: broker {broker.broker_id} (pid {broker.pid}) exited with code {code}: "
                    f"{tail[-1] if tail else 'no output'} (log {broker.process.log_path})",
                    markup=False,
                )
        if len(reported) == len(brokers):
            raise CliError("every broker exited")
    name = signal.Signals(stopper.signum).name if stopper.signum else "signal"
    console.print(f"{name}: stopping {len(brokers)} brokers")
    return 0


def _shut_down(args: argparse.Namespace, brokers: Sequence[_Member], wrote_state: bool, console: Console) -> None:
    # A second Ctrl-C must not cut the shutdown short: it is bounded by --stop-timeout and SIGKILL.
    with _ignoring_signals():
        _stop_brokers(brokers, args.stop_timeout, console)
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
    brokers = [_adopted(document) for document in state["brokers"]]
    running = [b for b in brokers if b.running]
    supervisor_pid = state.get("supervisor_pid")
    if isinstance(supervisor_pid, int) and supervisor_pid != os.getpid():
        supervisor = AdoptedProcess(supervisor_pid, ["cluster", "up"])
        if supervisor.poll() is None:
            # A foreground `cluster up` owns them: let it stop its brokers in order.
            console.print(f"asking `cluster up` (pid {supervisor_pid}) to stop its brokers")
            supervisor.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                supervisor.wait(args.stop_timeout + 15)
    with _ignoring_signals():
        _stop_brokers(running, args.stop_timeout, console)
    left = [b for b in brokers if b.running]
    if left:
        raise CliError("still running: " + ", ".join(f"broker {b.broker_id} (pid {b.pid})" for b in left))
    _state_path(data_dir).unlink(missing_ok=True)
    print(f"stopped brokers: {', '.join(str(b.broker_id) for b in running)}" if running else "no broker was running")
    return 0


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
    cordoned = cordon.cordoned_brokers(admin, brokers, timeout)
    return {
        "cluster_id": cluster_id,
        "controller_id": controller_id if controller_id is not None and controller_id >= 0 else None,
        "brokers": [
            {**broker, "controller": broker_id == controller_id, "cordoned": broker_id in cordoned}
            for broker_id, broker in sorted(brokers.items())
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
        roles = [role for role in ("controller", "cordoned") if broker[role]]
        brokers.add_row(
            str(broker["id"]), f"{broker['host']}:{broker['port']}", broker["rack"] or "-", ", ".join(roles),
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
