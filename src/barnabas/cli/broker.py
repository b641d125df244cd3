"""`barnabas broker`: run one broker until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

from ._options import key_values
from .errors import CliError
from .open_files import raise_open_files_limit

log = logging.getLogger("barnabas.cli")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "broker",
        help="run a broker",
        description="Run one broker. Settings use Kafka's names: --config server.properties, then "
        "BARNABAS_* environment variables (BARNABAS_LOG_RETENTION_MS for log.retention.ms), then flags.",
    )
    parser.add_argument("--config", type=Path, help="a server.properties file")
    parser.add_argument("--id", type=int, help="broker.id")
    parser.add_argument("--listen", metavar="HOST:PORT", help="listeners=PLAINTEXT://HOST:PORT (port 0 picks one)")
    parser.add_argument("--advertise", metavar="HOST:PORT", help="advertised.listeners=PLAINTEXT://HOST:PORT")
    parser.add_argument("--data-dir", metavar="DIR", help="log.dirs=DIR")
    parser.add_argument("--coordination", metavar="URL", help="coordination.url, e.g. sqlite:///path/to/db")
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="any other setting, e.g. --set num.partitions=3 (repeatable)",
    )
    parser.add_argument(
        "--replace", action="store_true",
        help="the log dirs this broker id claimed are gone for good: take these (new) dirs instead, and "
        "replicate its partitions again (without it, a broker on dirs other than its own refuses to start)",
    )  # fmt: skip
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--port-file", type=Path, metavar="FILE",
        help="once serving, write the listening port here (for --listen HOST:0; written whole, by a rename)",
    )  # fmt: skip
    parser.add_argument(
        "--admin-port-file", type=Path, metavar="FILE",
        help="once the admin endpoint (admin.listeners) listens, write its port here, before joining the cluster",
    )  # fmt: skip
    parser.set_defaults(run=run)


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    overrides = key_values(args.set, "--set")
    if args.id is not None:
        overrides["broker.id"] = str(args.id)
    if args.listen:
        overrides["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.advertise:
        overrides["advertised.listeners"] = f"PLAINTEXT://{args.advertise}"
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    if args.coordination:
        overrides["coordination.url"] = args.coordination
    return overrides


def without_test_data_generators() -> None:
    """Keep hypothesis out of the broker process, before kio (the protocol schemas) is imported.

    kio registers hypothesis strategies for its types whenever hypothesis can be imported: about
    0.15 s of imports on every start wherever test dependencies are installed (the test harness
    starts brokers there, and counts its start time in tenths of a second), for data a broker
    never generates.
    """
    if "kio" not in sys.modules:
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    without_test_data_generators()
    from barnabas.config import ConfigError, load_broker_config

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_broker_config(args.config, _overrides(args))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    raise_open_files_limit()
    import uvloop

    return int(uvloop.run(_serve(config, args.port_file, args.admin_port_file, replace=args.replace)))


def write_port_file(path: Path, port: int) -> None:
    """Write the port so that a reader never sees a partial file: a temporary file, then a rename."""
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(f"{port}\n")
        partial.replace(path)
    except OSError as exc:
        raise CliError(f"--port-file {path}: {exc.strerror or exc}") from None


async def _serve(
    config: Any, port_file: Path | None = None, admin_port_file: Path | None = None, *, replace: bool = False
) -> int:
    from barnabas.broker import Broker
    from barnabas.cluster.claims import ClaimRefusedError
    from barnabas.cluster.stored_values import CorruptValueError
    from barnabas.config import ConfigError
    from barnabas.coordination import CoordinationError
    from barnabas.gc_freezer import freeze_once, freeze_survivors
    from barnabas.log.errors import LogError

    # Signals are handled from the start: a SIGTERM right after the "listening" line (or while
    # starting, which can wait for an old registration to expire) stops the broker cleanly.
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)
    try:
        on_admin_listening = None if admin_port_file is None else partial(write_port_file, admin_port_file)
        # The logs' objects leave the automatic full collections before the broker registers: the
        # first collection walks all of them, and afterwards it would hold the new session's renewals.
        broker = Broker(config, on_admin_listening=on_admin_listening, on_logs_loaded=freeze_once, replace=replace)
        starting = asyncio.ensure_future(broker.start())
        signalled = asyncio.ensure_future(stopping.wait())
        await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stopping before the start completed")
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)  # start releases what it opened
            return 0
        signalled.cancel()
        starting.result()
    except (ConfigError, LogError, CoordinationError, ClaimRefusedError, CorruptValueError) as exc:
        raise CliError(str(exc)) from None  # a value the start needs (cluster id, epoch counter) does not read
    except OSError as exc:
        raise CliError(f"cannot start: {exc}") from None
    if port_file is not None:
        try:
            write_port_file(port_file, broker.bound_port)
        except CliError:
            await broker.stop()
            raise
    # Frozen once the logs were loaded: freeze what the start made since, without walking it all again.
    freezer = asyncio.ensure_future(freeze_survivors(collect_first=False))
    await stopping.wait()
    log.info("stopping")
    freezer.cancel()
    await broker.stop()
    return 0


def _dump_tasks() -> None:
    """SIGUSR1: log every asyncio task's stack (where a stuck connection or request waits)."""
    import io

    tasks = asyncio.all_tasks()
    out = io.StringIO()
    for task in tasks:
        print(f"--- {task.get_name()}: {task!r}"[:300], file=out)
        task.print_stack(limit=12, file=out)
    log.warning("SIGUSR1: %d asyncio tasks\n%s", len(tasks), out.getvalue())
