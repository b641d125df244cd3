"""A proxy node's life: read the cluster, listen, relay, keep its view and its peers fresh, drain, stop.

Its security (``security``) is built before anything connects: the client listener's TLS and
SASL as a broker's listener would serve them, and TLS and the proxy's own login towards the brokers.

Start-up reads the cluster's metadata and every broker's API versions through the bootstrap
servers before it listens, so the first client already gets a complete answer; a cluster that
cannot be reached stops the proxy with a one-line reason. The admin endpoint (``admin.listeners``)
starts once the listener is bound, live at once and ready once the node serves (``admin_endpoint``).
Stopping (SIGTERM) fails readiness first, closes the listener, lets every client connection finish
the requests it has sent and end its stream (at most ``proxy.drain.timeout.ms``, ``session``), then
closes what is left and the broker connections.

A hot restart (``hot_restart``) hands every listening socket to a new process, which starts on them
(``start(handed)``) and joins the group ``proxies`` only once this one has left it; this one then stops
accepting (``stop_accepting``: it closes its own copies of the sockets, which stay open in the new
process) and stops as on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping, Sequence

from barnabas.client import BrokerConnectionError
from barnabas.config import ConfigError, ProxyConfig, hostname_ordinal
from barnabas.coordination import CoordinationError, Storage, open_storage
from barnabas.protocol import BufferPool
from barnabas.security import ANONYMOUS
from barnabas.security.tls_accept import TlsHandshake

from .admin_endpoint import ProxyAdmin
from .cluster_view import ClusterView, NoBrokerError
from .hot_restart import Listening, listener_value
from .links import BrokerLinks
from .membership import ProxyMembership
from .nodes import ProxyNode, ProxyNodes, parse_node_address
from .router import Router
from .sasl_gate import SASL_VERSIONS
from .security import proxy_security
from .session import ClientSession
from .store_follower import StoreFollower

__all__ = ["ADMIN_LISTENERS", "CLIENT_LISTENERS", "Proxy"]

log = logging.getLogger(__name__)

#: Failed probes in a row after which another proxy node counts as down.
PROBES_TO_FAIL = 2
#: Bytes of handed-back frame buffers (clients' large requests, brokers' large answers) the proxy keeps for the
#: next ones: about fifty 1 MiB produce batches or fetch answers in flight at once, none in fresh zero-filled memory.
FRAME_BUFFER_POOL_BYTES = 64 * 1024 * 1024
#: The settings naming the listening sockets a hot restart hands over.
CLIENT_LISTENERS = "listeners"
ADMIN_LISTENERS = "admin.listeners"


class Proxy:
    def __init__(self, config: ProxyConfig, *, on_admin_listening: Callable[[int], None] | None = None) -> None:
        self.config = config
        #: TLS and SASL towards clients and towards the brokers; built now, so a bad file stops us here.
        self.security = proxy_security(config)
        #: Large frames' buffers, recycled: client requests the brokers have read, broker answers the clients
        #: have been sent (a fresh buffer costs a page fault per 4 KiB as the bytes land).
        self._frame_buffers = BufferPool(FRAME_BUFFER_POOL_BYTES)
        self.links = BrokerLinks(
            client_id="barnabas-proxy",
            connect_timeout_s=int(config["socket.connection.setup.timeout.ms"]) / 1000,
            request_timeout_s=int(config["request.timeout.ms"]) / 1000,
            tls=self.security.broker_tls,
            login=self.security.broker_login,
            buffers=self._frame_buffers,
        )
        self.view = ClusterView(config.bootstrap, self.links)
        self.nodes: ProxyNodes | None = None
        self.membership: ProxyMembership | None = None
        self.follower: StoreFollower | None = None
        self._storage: Storage | None = None
        self.router: Router | None = None
        self.sessions: set[ClientSession] = set()
        #: One server per listening socket of the client listener (host '' may bind IPv4 and IPv6).
        self._servers: list[asyncio.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        #: The admin endpoint (``admin.listeners``), told its bound port through ``on_admin_listening``.
        self._admin = ProxyAdmin(config, self) if config.admin_listener is not None else None
        self._on_admin_listening = on_admin_listening

    async def start(self, handed: Mapping[str, Sequence[socket.socket]] | None = None) -> tuple[str, int]:
        """Read the cluster and start listening; the advertised (host, port).

        Args:
            handed: listening sockets a hot restart handed over, by the setting naming them (``listener_settings``):
                served instead of binding; the group ``proxies`` is then joined only by ``join_group_later``.

        Raises:
            ConfigError: the cluster cannot be reached, or a setting is unusable.
            OSError: the listener cannot be bound.
        """
        try:
            return await self._start(handed)
        except BaseException:
            await self._release()
            raise

    def listener_settings(self) -> dict[str, str]:
        """Every listener this node binds, by setting, as a hot restart compares them (the configured values)."""
        listener = self.config.listener
        settings = {CLIENT_LISTENERS: listener_value(listener.name, listener.host, listener.port)}
        admin = self.config.admin_listener
        if admin is not None:
            settings[ADMIN_LISTENERS] = listener_value("http", admin.host, admin.port)
        return settings

    def listening(self) -> list[Listening]:
        """Every socket this node listens on, to hand to a new process: the client listener's, the admin endpoint's."""
        settings = self.listener_settings()
        listening = [
            Listening(CLIENT_LISTENERS, settings[CLIENT_LISTENERS], sock.fileno())
            for server in self._servers
            for sock in server.sockets
        ]
        if self._admin is not None:
            admin_fd = self._admin.listening_socket.fileno()
            listening.append(Listening(ADMIN_LISTENERS, settings[ADMIN_LISTENERS], admin_fd))
        return listening

    async def _start(self, handed: Mapping[str, Sequence[socket.socket]] | None) -> tuple[str, int]:
        config = self.config
        try:
            await self.view.refresh()
            versions = [await (await self.links.get(b.address)).api_versions() for b in self.view.brokers.values()]
        except (NoBrokerError, BrokerConnectionError) as exc:
            raise ConfigError(
                f"cannot read the cluster through {', '.join(config['bootstrap.servers'])}: {exc}"
            ) from None
        await self._check_acting_for()
        listener = config.listener
        loop = asyncio.get_running_loop()
        await self._listen(handed)
        bound_port = self.bound_port
        admin_sockets = handed.get(ADMIN_LISTENERS) if handed is not None else None
        self._start_admin(admin_sockets[0] if admin_sockets else None)
        host, port = self._advertised(bound_port)
        self.nodes = await self._find_nodes(host, port, join=handed is None)
        self.router = Router(
            self.view, self.links, self.nodes, config["broker.rack"], int(config["request.timeout.ms"]) / 1000
        )
        self.router.learn_versions(versions)
        if self.security.listener.sasl is not None:
            self.router.advertised.update(SASL_VERSIONS)  # answered by each connection's SASL gate
        for server in self._servers:
            await server.start_serving()
        self._tasks = [loop.create_task(self._refresh_forever(), name="proxy metadata refresh")]
        if self.membership is None:
            self._tasks.append(loop.create_task(self._probe_peers_forever(), name="proxy peer probes"))
        log.info(
            "proxy node %d listening on %s:%d, advertised as %s:%d, in front of %d brokers of cluster %s; "
            "%d proxy nodes",
            self.nodes.me.node_id, listener.host or "*", bound_port, host, port, len(self.view.brokers),
            self.view.cluster_id, len(self.nodes.nodes),
        )  # fmt: skip
        return host, port

    async def _listen(self, handed: Mapping[str, Sequence[socket.socket]] | None) -> None:
        """Bind the client listener, or take the sockets handed over for it; not serving yet."""
        listener = self.config.listener
        loop = asyncio.get_running_loop()
        context = self.security.listener.context

        def new_connection() -> asyncio.BaseProtocol:
            if context is None:
                return self._new_session()
            # On TLS a handshake of its own first, so that a failed one is logged (security/tls_accept.py).
            return TlsHandshake(context, listener.name, self._new_session)

        backlog = int(self.config["socket.listen.backlog.size"])
        if handed is None:
            server = await loop.create_server(
                new_connection, host=listener.host or None, port=listener.port, reuse_address=True,
                start_serving=False, backlog=backlog,
            )  # fmt: skip
            self._servers = [server]
            return
        for sock in handed.get(CLIENT_LISTENERS, ()):
            server = await loop.create_server(new_connection, sock=sock, start_serving=False, backlog=backlog)
            self._servers.append(server)

    async def _check_acting_for(self) -> None:
        """Log in once acting for another principal: brokers that would refuse every client's connection stop
        the proxy now, in one line, rather than fail each client later.

        Raises:
            ConfigError: the brokers do not list the proxy's user in ``sasl.proxy.principals``.
        """
        broker = next(iter(self.view.brokers.values()), None)
        if self.security.broker_login is None or broker is None:
            return
        probe = self.links.sibling()
        probe.act_for(ANONYMOUS.name)
        user = self.security.broker_user
        try:
            await probe.get(broker.address)
        except BrokerConnectionError as exc:
            if "authorization id" not in str(exc):
                raise ConfigError(f"cannot log in to broker {broker.broker_id} as User:{user}: {exc}") from None
            raise ConfigError(
                f"broker.sasl.jaas.config: broker {broker.broker_id} does not let User:{user} act for the proxy's "
                f"clients (add it to the brokers' sasl.proxy.principals): {exc}"
            ) from None
        finally:
            await probe.close()

    @property
    def bound_port(self) -> int:
        """The port the listener is bound to (the one picked when the listener says port 0)."""
        sockets = [sock for server in self._servers for sock in server.sockets]
        if not sockets:
            raise RuntimeError("the proxy is not listening")
        return int(sockets[0].getsockname()[1])

    def _start_admin(self, sock: socket.socket | None) -> None:
        """Serve /healthz, /readyz and /metrics (if ``admin.listeners`` asks; on ``sock`` if handed over), ready
        once the node serves."""
        if self._admin is None:
            return
        port = self._admin.start(sock)
        listener = self.config.admin_listener
        log.info("proxy admin endpoint on http://%s:%d", listener.host if listener and listener.host else "*", port)
        if self._on_admin_listening is not None:
            self._on_admin_listening(port)

    @property
    def admin_port(self) -> int:
        """The admin endpoint's bound port (the one picked when ``admin.listeners`` says port 0)."""
        if self._admin is None:
            raise RuntimeError("the proxy has no admin endpoint")
        return self._admin.port

    async def _find_nodes(self, host: str, port: int, *, join: bool) -> ProxyNodes:
        """The proxy nodes: the static ``proxy.peers``, or the coordination group ``proxies`` (joined now if ``join``,
        else followed, and joined by ``join_group_later``)."""
        config = self.config
        rack = config["broker.rack"]
        url = config["coordination.url"]
        if not url:
            try:
                peers = [parse_node_address(text) for text in config["proxy.peers"]]
            except ValueError as exc:
                raise ConfigError(f"proxy.peers: {exc}") from None
            return ProxyNodes((host, port, rack), peers)
        node_id = int(config["proxy.node.id"])
        if node_id < 0:
            ordinal = hostname_ordinal()
            if ordinal is None:
                raise ConfigError("proxy.node.id: required with coordination.url (the hostname has no ordinal)")
            node_id = ordinal
        nodes = ProxyNodes.alone(ProxyNode(node_id, host, port, rack))
        try:
            self._storage = await open_storage(url)
            self.membership = ProxyMembership(self._storage, nodes, int(config["proxy.session.timeout.ms"]) / 1000)
            await self.membership.start(join=join)
            scram = any(m.startswith("SCRAM-") for m in config.sasl_mechanisms)
            self.follower = StoreFollower(self._storage, self.view, credentials=scram)
            await self.follower.start()
        except CoordinationError as exc:
            raise ConfigError(f"coordination.url: {exc}") from None
        return nodes

    def _new_session(self) -> ClientSession:
        assert self.router is not None
        return ClientSession(
            self.router,
            self.sessions,
            max_frame=int(self.config["socket.request.max.bytes"]),
            max_in_flight=int(self.config["max.in.flight.requests.per.connection"]),
            requests=self._admin.requests if self._admin is not None else None,
            buffers=self._frame_buffers,
            listener=self.security.listener,
            credentials=self.follower.credentials if self.follower is not None else None,
        )

    def _advertised(self, bound_port: int) -> tuple[str, int]:
        advertised = self.config.advertised
        if advertised is not None:
            return advertised.host or socket.getfqdn(), advertised.port
        host = self.config.listener.host
        return (host if host not in ("", "0.0.0.0", "::") else socket.getfqdn()), bound_port

    async def _refresh_forever(self) -> None:
        interval_s = int(self.config["metadata.max.age.ms"]) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.view.refresh()
            except NoBrokerError as exc:
                log.warning("%s", exc)

    async def _probe_peers_forever(self) -> None:
        """Mark the other proxy nodes up or down by whether they accept a connection.

        A node is down after ``PROBES_TO_FAIL`` failed probes in a row (one refused connect is not
        a dead node: it may be starting at the same moment as this one) and up at its first answer.
        """
        assert self.nodes is not None
        nodes = self.nodes
        interval_s = int(self.config["proxy.peer.probe.interval.ms"]) / 1000
        others = [n for n in nodes.nodes if n is not nodes.me]
        failures = dict.fromkeys((n.node_id for n in others), 0)
        while others:
            results = await asyncio.gather(*(_accepts(n.host, n.port, interval_s) for n in others))
            for node, answered in zip(others, results, strict=True):
                failures[node.node_id] = 0 if answered else failures[node.node_id] + 1
            if nodes.set_up(node_id for node_id, failed in failures.items() if failed < PROBES_TO_FAIL):
                log.info("proxy nodes up: %s", ", ".join(str(n.node_id) for n in nodes.up()))
            await asyncio.sleep(interval_s)

    def join_group_later(self) -> None:
        """After a hot restart: join the group ``proxies`` once the process taken over from has left it."""
        if self.membership is not None:
            self.membership.join_later()

    async def stop_accepting(self) -> None:
        """A new process serves the listening sockets now: close this one's copies of them (the sockets stay open,
        so no connection is refused), stop the admin endpoint, and leave the group ``proxies``."""
        for server in self._servers:
            server.close()
        if self._admin is not None:
            self._admin.shutting_down()
            await self._admin.stop()
        if self.membership is not None:
            await self.membership.stop()
            self.membership = None

    async def stop(self) -> None:
        """Stop listening, let clients' requests in flight finish and their connections end (bounded), close
        everything."""
        if self._admin is not None:
            self._admin.shutting_down()  # /readyz fails from now on
        for server in self._servers:
            server.close()
        for session in list(self.sessions):
            session.stop_reading()
        drain_s = int(self.config["proxy.drain.timeout.ms"]) / 1000
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_s):
                for session in list(self.sessions):
                    await session.closed.wait()
        for session in list(self.sessions):
            session.abort()
        await self._release()
        log.info("proxy stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def _release(self) -> None:
        if self._admin is not None:
            await self._admin.stop()
        if self.membership is not None:
            await self.membership.stop()
            self.membership = None
        if self.follower is not None:
            await self.follower.stop()
            self.follower = None
        if self._storage is not None:
            await self._storage.close()
            self._storage = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for server in self._servers:
            server.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await server.wait_closed()
        await self.links.close()


async def _accepts(host: str, port: int, timeout_s: float) -> bool:
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
