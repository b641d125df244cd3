"""`barnabas proxy`: run one proxy node in front of a cluster until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from functools import partial
from pathlib import Path
from typing import Any

from ._options import key_values
from .broker import without_test_data_generators, write_port_file
from .errors import CliError

log = logging.getLogger("barnabas.cli")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "proxy",
        help="run a Kafka proxy node in front of a cluster",
        description="Run one proxy node: clients bootstrap from it and see the proxy nodes as the cluster's "
        "brokers. Settings: --config proxy.properties (Kafka's names: listeners, advertised.listeners, "
        "bootstrap.servers, broker.rack, proxy.peers, request.timeout.ms, ...), then flags.",
    )
    parser.add_argument("--config", type=Path, help="a proxy.properties file")
    parser.add_argument("--listen", metavar="HOST:PORT", help="listeners=PLAINTEXT://HOST:PORT (port 0 picks one)")
    parser.add_argument("--bootstrap", metavar="HOST:PORT[,...]", help="bootstrap.servers: brokers of the cluster")
    parser.add_argument("--advertise", metavar="HOST:PORT", help="advertised.listeners=PLAINTEXT://HOST:PORT")
    parser.add_argument("--rack", metavar="RACK", help="broker.rack: this proxy node's rack")
    parser.add_argument(
        "--peers", metavar="HOST:PORT[@RACK],...",
        help="proxy.peers: every proxy node's advertised address (this one may be included)",
    )  # fmt: skip
    parser.add_argument(
        "--coordination", metavar="URL",
        help="coordination.url: find the other proxy nodes in this store's group 'proxies' instead of --peers",
    )  # fmt: skip
    parser.add_argument("--node-id", type=int, metavar="N", help="proxy.node.id: this node's id in that group")
    parser.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], help="any other setting (repeatable)"
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--port-file", type=Path, metavar="FILE",
        help="once serving, write the listening port here (for --listen HOST:0; written whole, by a rename)",
    )  # fmt: skip
    parser.add_argument(
        "--admin-port-file", type=Path, metavar="FILE",
        help="once the admin endpoint (admin.listeners) listens, write its port here",
    )  # fmt: skip
    parser.set_defaults(run=run)


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    overrides = key_values(args.set, "--set")
    flags = {
        "listeners": f"PLAINTEXT://{args.listen}" if args.listen else None,
        "advertised.listeners": f"PLAINTEXT://{args.advertise}" if args.advertise else None,
        "bootstrap.servers": args.bootstrap,
        "broker.rack": args.rack,
        "proxy.peers": args.peers,
        "coordination.url": args.coordination,
        "proxy.node.id": None if args.node_id is None else str(args.node_id),
    }
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return overrides


def run(args: argparse.Namespace) -> int:
    without_test_data_generators()
    from barnabas.config import ConfigError, load_proxy_config

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_proxy_config(args.config, _overrides(args))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    import uvloop

    return int(uvloop.run(_serve(config, args.port_file, args.admin_port_file)))


async def _serve(config: Any, port_file: Path | None, admin_port_file: Path | None = None) -> int:
    from barnabas.config import ConfigError
    from barnabas.proxy import Proxy

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    on_admin_listening = None if admin_port_file is None else partial(write_port_file, admin_port_file)
    try:
        proxy = Proxy(config, on_admin_listening=on_admin_listening)  # TLS files are read here
        starting = asyncio.ensure_future(proxy.start())
        signalled = asyncio.ensure_future(stopping.wait())
        await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)  # start releases what it opened
            return 0
        signalled.cancel()
        starting.result()
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot start: {exc}") from None
    if port_file is not None:
        try:
            write_port_file(port_file, proxy.bound_port)
        except CliError:
            await proxy.stop()
            raise
    await stopping.wait()
    log.info("stopping: draining client connections")
    await proxy.stop()
    return 0
