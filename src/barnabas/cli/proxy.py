"""`barnabas proxy`: run one proxy node in front of a cluster until SIGINT or SIGTERM, or until a new process
started with ``--takeover`` takes its listening sockets over (a hot restart: ``barnabas.proxy.hot_restart``).

With ``proxy.hot.restart.socket`` set, the node serves hot restarts there once it serves; a second
node started on the same socket without ``--takeover`` is refused. With ``--takeover`` it first asks
the running node for its listening sockets, starts on them, takes over the socket's path, tells the
old node to drain, then joins the group ``proxies`` (with ``coordination.url``). Every failure before
it serves is one line, and the old node serves on.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._options import key_values
from .broker import without_test_data_generators, write_port_file
from .errors import CliError

if TYPE_CHECKING:
    from barnabas.proxy import HandoverServer, Proxy, Takeover

log = logging.getLogger("barnabas.cli")

T = TypeVar("T")


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
    parser.add_argument(
        "--takeover", action="store_true",
        help="hot restart: take the listening sockets over from the proxy serving on proxy.hot.restart.socket "
        "(same listeners and admin.listeners), serve on them, then have that proxy drain its connections and exit",
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

    return int(uvloop.run(_serve(config, args.port_file, args.admin_port_file, takeover=args.takeover)))


async def _serve(
    config: Any, port_file: Path | None, admin_port_file: Path | None = None, *, takeover: bool = False
) -> int:
    from barnabas.proxy import HandoverServer, Proxy

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    on_admin_listening = None if admin_port_file is None else partial(write_port_file, admin_port_file)
    path: Path | None = config.hot_restart_socket
    proxy = _built(lambda: Proxy(config, on_admin_listening=on_admin_listening))  # TLS files are read here
    handover = await _begin_hot_restart(proxy, path, takeover)
    if not await _started(proxy, handover, stopping):
        return 0
    successor: list[int] = []

    def replaced(pid: int) -> None:
        successor.append(pid)
        stopping.set()

    server = None if path is None else HandoverServer(path, proxy.listening, proxy.stop_accepting, replaced)
    try:
        if server is not None:
            _built(server.start)
    except CliError as exc:
        if handover is not None:
            await handover.abandon(str(exc))
        await _stop(proxy, server)
        raise
    if handover is not None:
        await _finish_hot_restart(proxy, handover)
    if port_file is not None:
        try:
            write_port_file(port_file, proxy.bound_port)
        except CliError:
            await _stop(proxy, server)
            raise
    await stopping.wait()
    if successor:
        log.info("hot restart: pid %d serves the listeners now; draining client connections", successor[0])
    else:
        log.info("stopping: draining client connections")
    await _stop(proxy, server)
    return 0


def _built(build: Callable[[], T]) -> T:
    """``build()``, its known failures one line each.

    Raises:
        CliError: a setting is unusable, or a socket cannot be bound.
    """
    from barnabas.config import ConfigError
    from barnabas.proxy import HandoverError

    try:
        return build()
    except (ConfigError, HandoverError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot start: {exc}") from None


async def _begin_hot_restart(proxy: Proxy, path: Path | None, takeover: bool) -> Takeover | None:
    """With ``--takeover``, the running proxy's listening sockets; else make sure no proxy serves on ``path``.

    Raises:
        CliError: no socket is set, its directory is not private, no proxy (or another user's) serves there,
            its listeners differ, or (without ``--takeover``) one does.
    """
    from barnabas.proxy import HandoverError, Takeover, check_directory, refuse_if_served

    if path is None:
        if takeover:
            raise CliError("--takeover: set proxy.hot.restart.socket to the running proxy's hot restart socket")
        return None
    try:
        check_directory(path)
        if takeover:
            return await Takeover.begin(path, proxy.listener_settings())
        refuse_if_served(path)
    except HandoverError as exc:
        raise CliError(str(exc)) from None
    return None


async def _started(proxy: Proxy, handover: Takeover | None, stopping: asyncio.Event) -> bool:
    """Start ``proxy`` (on the sockets handed over, if any); False if a signal came first.

    Raises:
        CliError: it could not start (the process handing its sockets over is told, and serves on).
    """
    starting = asyncio.ensure_future(proxy.start(handover.sockets if handover is not None else None))
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if not starting.done():
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)  # start releases what it opened
        if handover is not None:
            await handover.abandon("the new process was stopped while starting")
        return False
    try:
        _built(starting.result)
    except CliError as exc:
        if handover is not None:
            await handover.abandon(str(exc))
        raise
    return True


async def _finish_hot_restart(proxy: Proxy, handover: Takeover) -> None:
    """This process serves: have the old one stop accepting and drain, then join the group ``proxies``."""
    from barnabas.proxy import HandoverError

    try:
        await handover.finish()
    except HandoverError as exc:
        log.warning("hot restart: %s; serving anyway", exc)
    log.info("hot restart: took over from pid %d", handover.old_pid)
    proxy.join_group_later()


async def _stop(proxy: Proxy, server: HandoverServer | None) -> None:
    if server is not None:
        await server.close()
    await proxy.stop()
