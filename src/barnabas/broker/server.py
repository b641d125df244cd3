"""The broker process: open coordination and logs, bind the listeners, serve, stop cleanly.

Every listener's TLS context is built when the Broker is made, so a key or certificate that does
not load stops it before anything opens. Start-up order matters: coordination first (cluster id),
then the log dirs (whose lock and meta.properties must agree with the broker id and cluster id),
then the listeners (each advertised endpoint is registered, with its listener name), so a broker
that cannot own its data never accepts a connection, and the admin endpoint (``admin.listeners``:
live from now on, ready once the broker has joined); then registration in the ``brokers``
group with a new broker epoch (waiting for a previous holder of this id to vanish), the metadata
watches, the replica manager and the controller candidacy, and a bounded wait for the controller
to elect anew where this broker led in an earlier incarnation, before it serves. Stopping is a
controlled shutdown (Kafka's): resign as controller, leave the ``brokers`` group so the
controller moves leadership to other in-sync replicas, wait (bounded) until it has, then stop
replicating, close connections, close the logs (clean-shutdown marker), and storage last.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from barnabas.cluster import (
    BrokerEndpoint,
    BrokerInfo,
    BrokerRegistry,
    ClientQuotaStore,
    Controller,
    CredentialStore,
    LeaderRebalance,
    MetadataWatcher,
    ProducerIdAllocator,
    TopicStore,
)
from barnabas.cluster.acls import AclStore
from barnabas.cluster.claims import PendingClaim, check_claim, record_claim
from barnabas.config import BrokerConfig, ConfigError, cleaner_config_for, hostname_ordinal, log_config_for
from barnabas.coordination import (
    CoordinationError,
    KeyExistsError,
    Session,
    Storage,
    open_storage,
    wait_until_lost,
)
from barnabas.log import LogManager, MaintenanceSchedule, read_broker_id, read_cluster_id
from barnabas.security import ListenerSecurity, client_security, listener_security
from barnabas.security.authorizer import authorizer_for
from barnabas.security.tls_accept import TlsHandshake

from .admin_endpoint import BrokerAdmin
from .connection import KafkaConnection, close_idle_connections
from .connection_limits import limits_from_config
from .handlers import build_registry
from .log_cleaner import LogCleanerService
from .log_dir_halt import halt_on_log_dir_failure
from .offsets_topic import OffsetsTopic
from .partition_service import PartitionService
from .registry import ApiRegistry
from .replication import ReplicaManager
from .state import BrokerState, Endpoint, NodeState
from .topic_admin import stored_log_config
from .topic_restore import restore_topics

__all__ = ["Broker"]

log = logging.getLogger(__name__)

#: Seconds between log maintenance passes at most (retention, time-based flush, expiry).
MAX_MAINTENANCE_INTERVAL_S = 1.0
#: The longest log maintenance holds the event loop at a time (retention over 10,000 logs took ~390 ms).
MAINTENANCE_STEP_S = 0.002
#: How long a restarted broker waits, before it serves, for the controller to elect anew where it led.
NEW_ELECTIONS_WAIT_S = 10.0


def resolve_broker_id(config: BrokerConfig) -> int:
    """``broker.id``, else a hostname ordinal (``name-N``), else meta.properties, else 0."""
    if config.broker_id >= 0:
        return config.broker_id
    ordinal = hostname_ordinal()
    if ordinal is not None:
        return ordinal
    for directory in config.log_dirs:
        stored = read_broker_id(directory)
        if stored is not None:
            return stored
    return 0


def _store_lost(claim: PendingClaim | None, logs: LogManager) -> bool:
    """Whether the store has no claim of this broker while its dirs hold data: it lost what it knew.

    A store recreated (or emptied) under brokers that kept their volumes, or one from before
    claims existed: the topics of this broker's logs that the store lacks are restored then.
    """
    return claim is not None and claim.expected_version == 0 and any(d not in logs.fresh_dirs for d in logs.log_dirs)


def _cluster_id_on_disk(log_dirs: Sequence[Path]) -> str | None:
    """The cluster id the log dirs name, if exactly one: the id a store that lost its own takes."""
    found = {cluster_id for directory in log_dirs if (cluster_id := read_cluster_id(directory)) is not None}
    return next(iter(found)) if len(found) == 1 else None


class _Step:
    """A maintenance step's time: done once ``seconds`` have passed since it began."""

    __slots__ = ("_ends", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._ends = time.monotonic() + seconds

    def begin(self) -> None:
        self._ends = time.monotonic() + self._seconds

    def done(self) -> bool:
        return time.monotonic() >= self._ends


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        clock: Callable[[], float] = time.time,
        *,
        on_admin_listening: Callable[[int], None] | None = None,
        on_logs_loaded: Callable[[], object] | None = None,
        replace: bool = False,
    ) -> None:
        """Args: ``on_logs_loaded`` runs once the logs are loaded, before the broker registers: no
        coordination session waits on the event loop yet (the command line's GC freeze runs there)."""
        self.config = config
        self._on_logs_loaded = on_logs_loaded
        #: Start on log dirs other than the claimed ones, which are gone for good (``barnabas broker --replace``).
        self.replace = replace
        #: The claim on these log dirs to write once registered (None: it holds as stored).
        self._pending_claim: PendingClaim | None = None
        #: Every listener, and how each serves (TLS contexts built now: a bad key or certificate stops us here).
        self._listeners = config.listener_setup
        self._security = {security.name: security for security in listener_security(config)}
        self._inter_broker = client_security(config)
        self.clock = clock
        self.broker_id = resolve_broker_id(config)
        self.node: NodeState | None = None
        #: Complete once the broker has joined the cluster, before it serves.
        self.state: BrokerState | None = None
        self._storage: Storage | None = None
        self._logs: LogManager | None = None
        #: The bound listeners by name, in the order of ``listeners``.
        self._servers: dict[str, asyncio.Server] = {}
        self._maintenance: asyncio.Task[None] | None = None
        self._idle_sweep: asyncio.Task[None] | None = None
        self._session: Session | None = None
        self._watcher: MetadataWatcher | None = None
        self._replicas: ReplicaManager | None = None
        self._cleaner: LogCleanerService | None = None
        self._offsets: OffsetsTopic | None = None
        self.controller: Controller | None = None
        self._controller_task: asyncio.Task[None] | None = None
        self._session_keeper: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        #: The admin endpoint (``admin.listeners``), told its bound port through ``on_admin_listening``.
        self._admin: BrokerAdmin | None = None
        self._on_admin_listening = on_admin_listening

    async def start(self, *, listen: bool = True) -> Endpoint:
        """Open everything and start listening; return the advertised endpoint.

        With ``listen=False`` no listener is bound: the broker joins its cluster and its complete
        :attr:`state` is there for handlers driven in memory (tests), advertised as configured.

        Raises:
            ConfigError, LogError, CoordinationError, OSError: the broker cannot start.
        """
        try:
            return await self._start(listen)
        except BaseException:
            await self._release()
            raise

    async def _start(self, listen: bool) -> Endpoint:
        config = self.config
        self._storage = await open_storage(config.coordination_url)
        metastore = self._storage.metastore
        topics = TopicStore(self._storage)
        brokers = BrokerRegistry(metastore)
        cluster_id = await topics.cluster_id(_cluster_id_on_disk(config.log_dirs))
        await topics.load()
        credentials = CredentialStore(self._storage)
        await credentials.load()
        client_quotas = ClientQuotaStore(self._storage)
        await client_quotas.load()
        connection_limits = limits_from_config(config)
        authorizer = authorizer_for(config)
        acls = AclStore(self._storage, authorizer) if authorizer is not None else None
        if acls is not None:
            await acls.load()
        registry = build_registry()
        now_ms = int(self.clock() * 1000)
        try:
            default_log_config = log_config_for(config, {})
            cleaner_config = cleaner_config_for(config)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self._logs = LogManager(
            config.log_dirs,
            default_log_config,
            self.broker_id,
            cluster_id,
            high_watermark_checkpoint_interval_ms=int(config["replica.high.watermark.checkpoint.interval.ms"]),
            schedule=MaintenanceSchedule(
                retention_check_interval_ms=int(config["log.retention.check.interval.ms"]),
                flush_check_interval_ms=int(config["log.flush.scheduler.interval.ms"]),
                producer_expiration_check_interval_ms=int(config["producer.id.expiration.check.interval.ms"]),
                initial_task_delay_ms=int(config["log.initial.task.delay.ms"]),
            ),
            cleaner_config=cleaner_config,
            foreign_paths=getattr(metastore, "local_paths", ()),  # the embedded database may live there
        )
        self._logs.failures.listen(halt_on_log_dir_failure)
        self._pending_claim = await check_claim(
            self._storage, self.broker_id, cluster_id, self._logs.directory_ids, self._logs.fresh_dirs,
            replace=self.replace,
        )  # fmt: skip
        self._cleaner = LogCleanerService(
            self._logs, backoff_ms=cleaner_config.backoff_ms, clock_ms=lambda: int(self.clock() * 1000)
        )
        restored = await restore_topics(topics, self._logs) if _store_lost(self._pending_claim, self._logs) else None
        self._logs.load_all(now_ms, {name: stored_log_config(config, topic) for name, topic in topics.topics.items()})
        if self._on_logs_loaded is not None:
            self._on_logs_loaded()
        inter_broker = self._listeners.inter_broker_listener
        node = NodeState(
            config=config,
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            storage=self._storage,
            topics=topics,
            logs=self._logs,
            producer_ids=ProducerIdAllocator(self._storage, self.broker_id),
            advertised=Endpoint(inter_broker.host, inter_broker.port),
            brokers=brokers,
            credentials=credentials,
            client_quotas=client_quotas,
            connection_limits=connection_limits,
            acls=acls,
            clock=self.clock,
            rack=config["broker.rack"],
            inter_broker=self._inter_broker,
        )
        if restored is not None:
            node.kept_topics = restored.unrestorable
            await node.producer_ids.ensure_beyond(self._logs.highest_producer_id())
        self.node = node
        loop = asyncio.get_running_loop()
        if listen:
            await self._bind(registry)
        node.endpoints = self._advertised_endpoints()
        (inter_broker_endpoint,) = (e for e in node.endpoints if e.listener == inter_broker.name)
        node.advertised = Endpoint(inter_broker_endpoint.host, inter_broker_endpoint.port)
        self._start_admin()
        await self._join_cluster(node, registry)
        for server in self._servers.values():
            await server.start_serving()
        self._maintenance = loop.create_task(self._maintain(), name="log maintenance")
        self._idle_sweep = loop.create_task(
            close_idle_connections(node.connections, int(config["connections.max.idle.ms"])), name="idle connections"
        )
        if listen:
            for listener, endpoint in zip(self._listeners.listeners, node.endpoints, strict=True):
                log.info(
                    "broker %d (cluster %s) listening on %s://%s:%d (%s), advertised as %s:%d",
                    self.broker_id, cluster_id, listener.name, listener.host or "*", self.bound_ports[listener.name],
                    listener.protocol.value, endpoint.host, endpoint.port,
                )  # fmt: skip
            log.info("broker %d: inter-broker listener %s, %d partitions in %s", self.broker_id, inter_broker.name,
                     len(list(self._logs.partitions())), ", ".join(map(str, config.log_dirs)))  # fmt: skip
        else:
            log.info("broker %d (cluster %s) started without a listener", self.broker_id, cluster_id)
        for key, reason in sorted(config.ignored.items()):
            log.info("ignoring Kafka setting %s: %s", key, reason)
        return node.advertised

    async def _bind(self, registry: ApiRegistry) -> None:
        """Bind every listener (serving starts once the broker has joined), TLS ones with their context."""
        loop = asyncio.get_running_loop()
        for listener in self._listeners.listeners:
            security = self._security[listener.name]
            self._servers[listener.name] = await loop.create_server(
                self._connections(registry, security, listener.name),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                start_serving=False,
                backlog=int(self.config["socket.listen.backlog.size"]),
            )

    def _connections(
        self, registry: ApiRegistry, security: ListenerSecurity, listener: str
    ) -> Callable[[], asyncio.BaseProtocol]:
        """What a listener makes of each connection it accepts: a Kafka connection, after a TLS handshake
        of its own on a TLS listener (``tls_accept``: so that a failed one is logged and counted)."""
        context = security.context
        if context is None:
            return lambda: KafkaConnection(self._serving_state(), registry, security)

        def handshake() -> TlsHandshake:
            state = self._serving_state()
            return TlsHandshake(
                context,
                listener,
                lambda: KafkaConnection(state, registry, security),
                lambda name: state.node.metrics.authenticated(name, success=False, reauthentication=False),
            )

        return handshake

    def _serving_state(self) -> BrokerState:
        """The complete state a new connection's handlers use (the listener serves only once it exists)."""
        if self.state is None:
            raise RuntimeError("the broker serves before it has joined the cluster")
        return self.state

    async def _join_cluster(self, state: NodeState, registry: ApiRegistry) -> None:
        """Register, build the services, start watching and replicating, and stand for controller."""
        assert self._storage is not None
        metastore = self._storage.metastore
        ttl_s = int(self.config["broker.session.timeout.ms"]) / 1000
        self._session = await metastore.open_session(ttl_s)
        assert self._logs is not None
        clean = all(self._logs.clean_shutdown.values())
        info = BrokerInfo(
            self.broker_id, state.advertised.host, state.advertised.port, state.rack, clean=clean,
            endpoints=state.endpoints,
        )  # fmt: skip
        try:
            registered = await state.brokers.register(self._session, info)
        except KeyExistsError:
            raise ConfigError(
                f"broker.id {self.broker_id} is registered by another live broker; is it running already?"
            ) from None
        if self._pending_claim is not None:  # the only live broker with this id: the dirs are its data now
            await record_claim(self._storage, self._pending_claim)
        state.broker_epoch = registered.epoch
        log.info("broker %d registered with broker epoch %d (%s start)", self.broker_id, registered.epoch,
                 "clean" if clean else "unclean")  # fmt: skip
        replicas = ReplicaManager(state)
        partitions = PartitionService(state, replicas)
        self._offsets = OffsetsTopic(state, partitions)
        self._offsets.start()
        replicas.leadership_listeners.append(self._offsets.on_leadership)
        self.controller = Controller(
            metastore,
            state.topics,
            state.brokers,
            self.broker_id,
            unclean=lambda topic: _unclean_enabled(state, topic.config),
            rebalance=_leader_rebalance(self.config),
        )
        controller = self.controller
        offsets = self._offsets

        def on_change() -> None:
            replicas.poke()
            controller.poke()
            offsets.topics_changed()

        self._watcher = MetadataWatcher(
            metastore,
            state.topics,
            state.brokers,
            on_change,
            state.credentials,
            acls=state.acls,
            client_quotas=state.client_quotas,
            cordons=state.cordons,
        )
        await self._watcher.refresh_all()
        self._replicas = replicas
        self.state = BrokerState(
            node=state,
            registry=registry,
            replicas=replicas,
            partitions=partitions,
            watcher=self._watcher,
            controller=controller,
            offsets_topic=offsets,
        )
        replicas.start()
        state.changed_here.append(replicas.reconcile_now)
        self._watcher.start()
        self._stand_for_controller()
        self._session_keeper = asyncio.get_running_loop().create_task(
            self._keep_registered(state, info, ttl_s), name="session keeper"
        )
        await self._await_new_elections(replicas)

    async def _await_new_elections(self, replicas: ReplicaManager) -> None:
        """Before serving, let the controller elect anew where this broker led in an earlier incarnation.

        Until it has, those partitions have no acting leader (this broker does not take back what it
        led before a restart); waiting here, bounded, makes a restarted broker serve them as soon
        as it listens, as a single-broker cluster's clients expect.
        """
        stale = replicas.led_by_an_earlier_incarnation()
        if not stale:
            return
        log.info("waiting for new leader elections of %d partitions this broker led before", len(stale))
        left = await replicas.wait_until_none(replicas.led_by_an_earlier_incarnation, NEW_ELECTIONS_WAIT_S)
        if left:
            log.warning("%d partitions still wait for a new leader election; serving anyway", len(left))

    async def _keep_registered(self, state: NodeState, info: BrokerInfo, ttl_s: float) -> None:
        """When the session is lost (expired during a long outage), register again with a new one.

        ZooKeeper-mode Kafka does the same on session expiry: the broker was declared dead and its
        replicas left the ISR; re-registering lets the controller and leaders take it back. Until
        then the broker is ``unregistered``, which lets the replica manager depose it (NodeState).
        """
        assert self._storage is not None and self.controller is not None
        metastore = self._storage.metastore
        while True:
            session = self._session
            assert session is not None
            await wait_until_lost(session)
            log.error("broker %d lost its coordination session; registering again", self.broker_id)
            state.unregistered = True
            await _cancel(self._controller_task)
            while True:
                try:
                    self._session = await metastore.open_session(ttl_s)
                    # Clean: this process lost nothing it wrote, unlike a restart after a crash.
                    registered = await state.brokers.register(self._session, dataclasses.replace(info, clean=True))
                    break
                except CoordinationError as exc:
                    log.warning("registering again failed (%s); retrying", exc)
                    await asyncio.sleep(1.0)
            # A new incarnation: leaderships of the old one wait for the controller to elect anew.
            state.broker_epoch = registered.epoch
            state.unregistered = state.deposed = False
            log.info("broker %d registered again with broker epoch %d", self.broker_id, registered.epoch)
            if self._replicas is not None:
                self._replicas.poke()
            self._stand_for_controller()

    def _stand_for_controller(self) -> None:
        """Run for controller with the current session (again after a new one)."""
        assert self.controller is not None and self._session is not None
        self._controller_task = asyncio.get_running_loop().create_task(
            self.controller.run(self._session), name="controller candidacy"
        )

    def _advertised_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        """Each listener's advertised.listeners entry, else its bound address (this host's name for a wildcard)."""
        endpoints = []
        bound = self.bound_ports if self._servers else {}
        for listener in self._listeners.listeners:
            if listener.advertised is not None:
                host, port = listener.advertised.host or socket.getfqdn(), listener.advertised.port
            else:
                host = listener.host if listener.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
                port = bound.get(listener.name, listener.port)
            endpoints.append(BrokerEndpoint(listener.name, host, port, listener.protocol.value))
        return tuple(endpoints)

    async def _maintain(self) -> None:
        config = self.config
        interval_ms = min(
            config["log.retention.check.interval.ms"],
            config["producer.id.expiration.check.interval.ms"],
            config["log.flush.scheduler.interval.ms"],
        )
        interval_s = min(max(interval_ms / 1000, 0.05), MAX_MAINTENANCE_INTERVAL_S)
        while True:
            await asyncio.sleep(interval_s)
            assert self._logs is not None
            try:
                step = _Step(MAINTENANCE_STEP_S)
                for _ in self._logs.maintenance(int(self.clock() * 1000), step_done=step.done):
                    await asyncio.sleep(0)  # requests go on between steps: thousands of logs take a while
                    step.begin()
                if self._cleaner is not None:
                    self._cleaner.poke(int(self.clock() * 1000))
            except Exception:
                log.exception("log maintenance failed; will retry")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    @property
    def bound_port(self) -> int:
        """The port the first listener is bound to (the one picked when the listener says port 0)."""
        return next(iter(self.bound_ports.values()))

    @property
    def bound_ports(self) -> dict[str, int]:
        """Each listener's bound port, by listener name, in the order of ``listeners``."""
        if not self._servers or not all(server.sockets for server in self._servers.values()):
            raise RuntimeError("the broker is not listening")
        return {name: int(server.sockets[0].getsockname()[1]) for name, server in self._servers.items()}

    def _start_admin(self) -> None:
        """Serve /healthz, /readyz and /metrics (if ``admin.listeners`` asks), ready once the broker has joined."""
        if self.config.admin_listener is None:
            return
        name = f"broker {self.broker_id} admin"
        self._admin = BrokerAdmin(self.config, lambda: self.state, lambda: self._session, name)
        port = self._admin.start()
        log.info("broker %d admin endpoint on http://%s:%d", self.broker_id, self.config.admin_listener.host or "*",
                 port)  # fmt: skip
        if self._on_admin_listening is not None:
            self._on_admin_listening(port)

    @property
    def admin_port(self) -> int:
        """The admin endpoint's bound port (the one picked when ``admin.listeners`` says port 0)."""
        if self._admin is None:
            raise RuntimeError("the broker has no admin endpoint")
        return self._admin.port

    async def stop(self) -> None:
        """Controlled shutdown, then stop accepting, close connections and logs, release storage."""
        if self._admin is not None:
            self._admin.shutting_down()  # /readyz fails from now on
        await self._controlled_shutdown()
        for server in self._servers.values():
            server.close()
        if self.node is not None:
            for connection in list(self.node.connections):
                connection.close()
            self.node.fetch_waiters.notify_all()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                for server in self._servers.values():
                    await server.wait_closed()
        await self._release()
        log.info("broker %d stopped cleanly", self.broker_id)
        self._stopped.set()

    async def _controlled_shutdown(self) -> None:
        """Hand controller and partition leadership to others before going (bounded wait)."""
        state, replicas = self.node, self._replicas
        if state is None or self._session is None or replicas is None:
            return
        await _cancel(self._session_keeper)  # stop standing, then step down
        await _cancel(self._controller_task)
        self._session_keeper = self._controller_task = None
        session = self._session  # the keeper may have replaced it
        try:
            if self.controller is not None:
                await self.controller.resign()
            await state.brokers.deregister(session, self.broker_id)
        except CoordinationError as exc:
            log.warning("controlled shutdown could not reach coordination (%s); stopping anyway", exc)
            return
        if not self.config["controlled.shutdown.enable"]:
            return
        wait_s = int(self.config["controlled.shutdown.max.wait.ms"]) / 1000
        left = await replicas.wait_until_none(replicas.leading_with_others_in_sync, wait_s)
        if left:
            log.warning("controlled shutdown: still leading %d partitions after the wait", len(left))

    async def _release(self) -> None:
        if self._admin is not None:  # first: it reads what is released below
            await self._admin.stop()
            self._admin = None
        await _cancel(self._session_keeper)
        await _cancel(self._controller_task)
        self._session_keeper = self._controller_task = None
        if self._watcher is not None:
            await self._watcher.stop()
            self._watcher = None
        if self._offsets is not None:
            await self._offsets.close()
            self._offsets = None
        if self._replicas is not None:
            await self._replicas.stop()
            self._replicas = None
        if self._session is not None:
            with contextlib.suppress(CoordinationError):
                await self._session.close()
            self._session = None
        await _cancel(self._maintenance)
        self._maintenance = None
        await _cancel(self._idle_sweep)
        self._idle_sweep = None
        if self._cleaner is not None:
            await self._cleaner.close()
            self._cleaner = None
        if self._logs is not None:
            self._logs.close()
            self._logs = None
        if self._storage is not None:
            await self._storage.close()
            self._storage = None


async def _cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has finished."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _leader_rebalance(config: BrokerConfig) -> LeaderRebalance | None:
    if not config["auto.leader.rebalance.enable"]:
        return None
    return LeaderRebalance(
        interval_s=float(config["leader.imbalance.check.interval.seconds"]),
        threshold_percent=int(config["leader.imbalance.per.broker.percentage"]),
    )


def _unclean_enabled(state: NodeState, overrides: dict[str, str]) -> bool:
    value = overrides.get("unclean.leader.election.enable")
    if value is None:
        return bool(state.config["unclean.leader.election.enable"])
    return value.strip().lower() == "true"
