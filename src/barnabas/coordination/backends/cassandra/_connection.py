"""The URL, the driver's cluster and session, the asyncio bridge, and the error table.

Rules this module keeps:

- ``cassandra://[user:password@]host[,host][:port]/keyspace[?replication_factor=1&namespace=barnabas]``.
  The keyspace (created with SimpleStrategy when missing) holds table ``kv``; the namespace is its
  partition, so several clusters can share a keyspace.
- cassandra-driver is thread-based: requests go out with ``execute_async`` and its callbacks, fired
  on the driver's threads, complete asyncio futures through ``call_soon_threadsafe``. The calls
  that block (connect, prepare, set_keyspace, shutdown) run in a worker thread. The event loop
  never blocks.
- Consistency QUORUM, serial consistency SERIAL. Reads that must see LWT state (every read of the
  backend's API) run at SERIAL; a watcher's polls, which are only hints, at QUORUM. No paging: a
  SERIAL read is one consistent snapshot only within one page.
- Servers older than 4.0 are refused (Paxos v1 linearizability bug CASSANDRA-12126); 4.1 and newer
  must run ``paxos_variant: v2``.
- A node that stops answering but keeps its connections open (a hung process, a paused VM) is
  found by the driver's heartbeat: a connection that received nothing for HEARTBEAT_S is sent one,
  and one unanswered after HEARTBEAT_TIMEOUT_S more marks the node down, out of every query plan,
  while a quorum of the others serves. The driver's defaults (30 s and 30 s) outlast any session:
  with one node of a 3-node ring paused, requests kept going to it and every broker's session ran
  out (tests/fault/test_coordination_server_faults.py). Until then, a read (and a lease renewal,
  which renewing twice does not change) unanswered after SPECULATE_S goes to another node as well.
- Driver exceptions become coordination errors in :func:`translate` and nowhere else. A write
  timeout of a CAS round, or CAS_WRITE_UNKNOWN, is an unknown outcome: UnavailableError, and the
  caller re-reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import cassandra
from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.connection import ConnectionException
from cassandra.policies import (
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    HostStateListener,
    TokenAwarePolicy,
)
from cassandra.protocol import ErrorMessage
from cassandra.query import BatchStatement, BatchType, dict_factory

from ...errors import CoordinationError, UnavailableError, UnsupportedBackendError
from . import _cql as cql
from ._schema import create_schema

__all__ = ["Connection", "Row", "Target", "parse_url", "translate"]

log = logging.getLogger(__name__)

Row = dict[str, Any]

DEFAULT_PORT = 9042
DEFAULT_NAMESPACE = "barnabas"
#: Client-side bound on one request (the server's own timeouts are shorter: 2 s write, 1 s CAS contention).
REQUEST_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
#: Heartbeat a connection that received nothing for this long; a node that does not answer the
#: heartbeat within HEARTBEAT_TIMEOUT_S is marked down: a hung node is left out within about 4 s,
#: inside the brokers' 9 s session (renewed every 3 s). At 1.5 s, the healthy but busy nodes of a
#: 3-node ring on this loaded 2-core machine, one node paused, missed heartbeats and were marked down
#: too, and every request failed until they were back.
HEARTBEAT_S = 1.0
HEARTBEAT_TIMEOUT_S = 3.0
#: A statement that may run twice and is unanswered this long is sent to the next node too (twice at most).
SPECULATE_S = 0.5
_KEYSPACE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")


@dataclass(frozen=True, slots=True)
class Target:
    """What a ``cassandra://`` URL names."""

    hosts: tuple[str, ...]
    port: int
    keyspace: str
    namespace: str
    replication_factor: int
    username: str | None = None
    password: str | None = None


def parse_url(url: str) -> Target:
    """Split a ``cassandra://`` URL into its parts.

    Raises:
        ValueError: no host or keyspace, an invalid keyspace name, mixed ports, or an unknown parameter.
    """
    parts = urlsplit(url)
    if parts.scheme != "cassandra":
        raise ValueError(f"not a cassandra:// URL: {url!r}")
    netloc = parts.netloc
    username = password = None
    if "@" in netloc:
        credentials, netloc = netloc.rsplit("@", 1)
        username, _, secret = credentials.partition(":")
        username, password = unquote(username), unquote(secret)
    hosts: list[str] = []
    ports: set[int] = set()
    for piece in filter(None, netloc.split(",")):
        host, _, port = piece.partition(":")
        hosts.append(host)
        if port:
            ports.add(int(port))
    if not hosts or not all(hosts):
        raise ValueError(f"cassandra URL {url!r} names no host")
    if len(ports) > 1:
        raise ValueError(f"cassandra URL {url!r}: all hosts must use one native port")
    keyspace = parts.path.strip("/")
    if not _KEYSPACE.fullmatch(keyspace):
        raise ValueError(f"cassandra URL {url!r}: the path must be a keyspace name ({_KEYSPACE.pattern})")
    query = {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(query) - {"replication_factor", "namespace"}
    if unknown:
        raise ValueError(f"cassandra URL {url!r}: unknown parameters {sorted(unknown)}")
    factor = int(query.get("replication_factor", "1"))
    namespace = query.get("namespace", DEFAULT_NAMESPACE)
    if factor < 1 or not namespace:
        raise ValueError(f"cassandra URL {url!r}: replication_factor must be >= 1 and namespace non-empty")
    return Target(tuple(hosts), ports.pop() if ports else DEFAULT_PORT, keyspace, namespace, factor, username, password)


#: The driver exceptions meaning "cannot be served now; a write may or may not have applied".
_UNAVAILABLE = (
    cassandra.Unavailable,
    cassandra.Timeout,  # ReadTimeout, WriteTimeout (WriteType.CAS: the Paxos round's outcome is unknown)
    cassandra.CoordinationFailure,  # ReadFailure, WriteFailure
    cassandra.OperationTimedOut,  # the client-side request timeout
    NoHostAvailable,
    ConnectionException,
)


@contextlib.contextmanager
def translate(what: str) -> Iterator[None]:
    """Raise the driver's exceptions as coordination errors (the one place that maps them).

    Raises:
        UnavailableError: the cluster cannot be reached or did not answer in time; a write's
            outcome is unknown.
        CoordinationError: the server refused the request (bad schema, permissions).
    """
    try:
        yield
    except _UNAVAILABLE as exc:
        raise UnavailableError(f"cassandra: {what}: {exc}") from exc
    except (cassandra.RequestValidationException, cassandra.AuthenticationFailed) as exc:
        raise CoordinationError(f"cassandra: {what}: {exc}") from exc
    except ErrorMessage as exc:
        # Overloaded, bootstrapping, server errors, and codes the driver does not know
        # (CAS_WRITE_UNKNOWN, 0x1700, arrives as a bare ErrorMessage): retryable, outcome unknown.
        raise UnavailableError(f"cassandra: {what}: {exc}") from exc


def _complete(future: asyncio.Future[list[Row]], rows: list[Row] | None, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(list(rows or ()))


class _HostDownListener(HostStateListener):  # type: ignore[misc]
    """Calls back on the event loop when the driver marks a node down (its connections broke)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback

    def on_down(self, host: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(self._callback)

    def on_up(self, host: Any) -> None:
        pass

    def on_add(self, host: Any) -> None:
        pass

    def on_remove(self, host: Any) -> None:
        pass


class Connection:
    """One driver Cluster and Session on a keyspace, with the backend's statements prepared."""

    def __init__(self, target: Target, cluster: Any, session: Any, prepared: dict[str, Any]) -> None:
        self.target = target
        self._cluster = cluster
        self._session = session
        self._prepared = prepared
        self._closed = False

    @classmethod
    async def open(cls, target: Target) -> Connection:
        """Connect, check the server, create the keyspace and table if missing, and prepare.

        Raises:
            UnavailableError: no host could be reached.
            UnsupportedBackendError: the server is older than 4.0 or runs Paxos v1.
        """
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
            consistency_level=ConsistencyLevel.QUORUM,
            serial_consistency_level=ConsistencyLevel.SERIAL,
            request_timeout=REQUEST_TIMEOUT_S,
            row_factory=dict_factory,
            speculative_execution_policy=ConstantSpeculativeExecutionPolicy(SPECULATE_S, 2),
        )
        auth = PlainTextAuthProvider(target.username, target.password) if target.username else None
        cluster = Cluster(
            list(target.hosts),
            port=target.port,
            auth_provider=auth,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            # Back within a second of a restarted node (the default waits up to 10 minutes).
            reconnection_policy=ExponentialReconnectionPolicy(0.1, 1.0),
            connect_timeout=CONNECT_TIMEOUT_S,
            idle_heartbeat_interval=HEARTBEAT_S,
            idle_heartbeat_timeout=HEARTBEAT_TIMEOUT_S,
        )
        try:
            with translate("connect"):
                session = await asyncio.to_thread(cluster.connect)
            session.default_fetch_size = None
            connection = cls(target, cluster, session, {})
            await connection._check_server()
            await create_schema(connection)
            await connection.execute(cql.INIT_REV, (target.namespace,))
        except BaseException:
            await asyncio.to_thread(cluster.shutdown)
            raise
        return connection

    async def _check_server(self) -> None:
        (row,) = await self.execute(cql.SELECT_RELEASE_VERSION, prepared=False)
        release = str(row["release_version"])
        major_minor = tuple(int(n) for n in re.findall(r"\d+", release)[:2])
        if major_minor < (4, 0):
            raise UnsupportedBackendError(
                f"Cassandra {release} runs Paxos v1 with CASSANDRA-12126 unfixed; barnabas needs 4.0 or newer"
            )
        if major_minor >= (4, 1):
            rows = await self.execute(cql.SELECT_PAXOS_VARIANT, prepared=False)
            variant = rows[0]["value"] if rows else None
            if variant != "v2":
                raise UnsupportedBackendError(
                    f"Cassandra {release} runs paxos_variant {variant}; barnabas needs 'paxos_variant: v2'"
                )

    async def prepare(self) -> None:
        """Use the keyspace and prepare every statement of the backend.

        Raises:
            CoordinationError: a node refused (a keyspace or table it has not heard of yet, for one).
        """
        with translate("prepare"):
            await asyncio.to_thread(self._use_keyspace_and_prepare)

    async def wait_for_schema_agreement(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until every live node has the same schema; whether they do."""
        if timeout_s <= 0:
            return False
        agreed = await asyncio.to_thread(
            self._cluster.control_connection.wait_for_schema_agreement, wait_time=timeout_s
        )
        return bool(agreed)

    def _use_keyspace_and_prepare(self) -> None:
        """Blocking: run in a worker thread."""
        self._session.set_keyspace(self.target.keyspace)
        for statement in cql.PREPARED:
            self._prepared[statement] = self._session.prepare(statement)

    @property
    def closed(self) -> bool:
        return self._closed

    def on_host_down(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on this event loop whenever the driver marks a node down."""
        self._cluster.register_listener(_HostDownListener(asyncio.get_running_loop(), callback))

    def _statement(self, cql_text: str, params: Sequence[Any], serial: bool) -> Any:
        bound = self._prepared[cql_text].bind(params)
        if serial:
            bound.consistency_level = ConsistencyLevel.SERIAL
        bound.is_idempotent = cql_text.startswith("SELECT")  # reads may run twice (speculatively)
        return bound

    async def execute(
        self,
        statement: str | Any,
        params: Sequence[Any] = (),
        *,
        serial: bool = False,
        prepared: bool = True,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> list[Row]:
        """Run one statement (a prepared one by its CQL text, or a batch) and return its rows.

        Raises:
            UnavailableError: see :func:`translate`; also when the connection is closed.
        """
        if self._closed:
            raise UnavailableError("the cassandra metastore is closed")
        if isinstance(statement, str) and prepared:
            statement = self._statement(statement, params, serial)
            params = ()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Row]] = loop.create_future()

        def done(rows: list[Row] | None, exc: BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while the request was out
                loop.call_soon_threadsafe(_complete, future, rows, exc)

        with translate(_describe(statement)):
            response = self._session.execute_async(statement, params or None, timeout=timeout_s)
            response.add_callbacks(lambda rows: done(rows, None), lambda exc: done(None, exc))
            return await future

    def batch(self, *, idempotent: bool = False) -> Batch:
        """A conditional batch on the namespace's partition; ``idempotent``: applying it twice is applying it once."""
        return Batch(self, idempotent=idempotent)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._cluster.shutdown)


class Batch:
    """Statements applied together by one Paxos round (all on one partition)."""

    def __init__(self, connection: Connection, *, idempotent: bool = False) -> None:
        self._connection = connection
        self._batch = BatchStatement(
            batch_type=BatchType.LOGGED,
            consistency_level=ConsistencyLevel.QUORUM,
            serial_consistency_level=ConsistencyLevel.SERIAL,
        )
        self._batch.is_idempotent = idempotent  # speculative execution sends only idempotent statements
        self.size = 0

    def add(self, cql_text: str, params: Sequence[Any]) -> None:
        self._batch.add(self._connection._prepared[cql_text], tuple(params))
        self.size += 1

    async def apply(self, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[bool, list[Row]]:
        """Send the batch; return whether it applied and, if not, the conditioned rows as they are."""
        rows = await self._connection.execute(self._batch, timeout_s=timeout_s)
        applied = bool(rows and rows[0].get("[applied]"))
        return applied, [] if applied else rows


def _describe(statement: Any) -> str:
    if isinstance(statement, BatchStatement):
        return "conditional batch"
    text = getattr(getattr(statement, "prepared_statement", None), "query_string", None) or str(statement)
    return text.split(" WHERE ")[0][:80]
