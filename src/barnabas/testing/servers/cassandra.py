"""A real Cassandra node from Maven Central's jars, started with plain ``java``, as a user of the process harness.

Rules this module keeps:

- ``build_cassandra`` runs a script that resolves ``org.apache.cassandra:cassandra-all`` and its
  runtime dependencies into a lib dir (idempotent). Cassandra 5.0 is the first release that runs on
  Java 17.
- The node binds one loopback address (127.0.0.1 unless a ring gives it another), on free ports
  picked here (CQL and storage; JMX stays off), with its ``cassandra.yaml``, ``logback.xml``, data,
  commit log and logs in the directory given. ``paxos_variant: v2`` as the coordination backend requires.
- The JVM gets the ``--add-exports``/``--add-opens`` flags of Cassandra 5.0's ``conf/jvm17-server.options``
  (the jars ship no ``conf/``), a small heap, and no JMX.
- Readiness: the CQL port accepts a connection (the native transport opens last, when the node is up).
  A ring (``CassandraRing``: three nodes on 127.0.0.1-3, one port pair, every node a seed with its
  own token, so none bootstraps and all start at once) is ready when every node's log says gossip
  found every other one up: only then does a QUORUM find its replicas.
- ``kill()`` is a crash (SIGKILL): acknowledged writes survive it because the commit log is written
  before the ack (the OS keeps it when only the process dies). A node syncs its commit log to disk
  before each ack (``batch``) unless it is not ``durable`` (``periodic``, every 10 s, as PostgreSQL
  test servers run with ``fsync=off``): a ring is not, since on this shared 2-core machine syncs took
  over a second each, and a Paxos round waits for several on two nodes.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from ..process import ManagedServer, ServerGroup, ServerProcess, free_ports, port_open

__all__ = ["CassandraRing", "CassandraServer", "build_cassandra"]

BUILD_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
HEAP = ("-Xms512m", "-Xmx1g")

# From Cassandra 5.0's conf/jvm17-server.options ("JPMS" section) and conf/jvm-server.options.
JVM17_FLAGS = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    "-Djava.net.preferIPv4Stack=true",
    "-Xss256k",
    "-XX:+UseG1GC",
    "-XX:+HeapDumpOnOutOfMemoryError",
    "-XX:+ExitOnOutOfMemoryError",
)

# Start fast on one node: no waiting for gossip, for the superuser setup or for the shutdown
# announcement (defaults 2 s each).
FAST_START_FLAGS = (
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.superuser_setup_delay_ms=0",
    "-Dcassandra.shutdown_announce_in_ms=0",
    "-Dcassandra-foreground=yes",
)

CASSANDRA_YAML = """\
cluster_name: barnabas-test
num_tokens: 1
initial_token: {token}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seeds}"
listen_address: {host}
rpc_address: {host}
storage_port: {storage_port}
native_transport_port: {native_port}
start_native_transport: true
data_file_directories: [{dir}/data]
commitlog_directory: {dir}/commitlog
saved_caches_directory: {dir}/saved_caches
hints_directory: {dir}/hints
cdc_raw_directory: {dir}/cdc_raw
{commitlog_sync}
commitlog_segment_size: 8MiB
paxos_variant: v2
auto_snapshot: false
hinted_handoff_enabled: false
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
"""

COMMITLOG_SYNC = "commitlog_sync: batch"
COMMITLOG_PERIODIC = "commitlog_sync: periodic\ncommitlog_sync_period: 10000ms"

LOGBACK_XML = """\
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def build_cassandra(script: Path, lib_dir: Path, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Run ``script`` (a Maven resolve of cassandra-all into ``lib_dir``; a no-op once built); ``lib_dir``.

    Raises:
        RuntimeError: java or mvn is missing, or Maven could not resolve the jars (with its output).
    """
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"'{tool}' is not on PATH")
    try:
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"build.sh did not finish in {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"build.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    if not any(lib_dir.glob("cassandra-all-*.jar")):
        raise RuntimeError(f"build.sh left no cassandra-all jar in {lib_dir}")
    return lib_dir


class CassandraServer(ManagedServer):
    """One Cassandra node (CassandraDaemon) with its config, data and log; restartable on the same ports.

    Alone by default (its own seed, in ``base_dir``); a member of a ring (``CassandraRing``) gets its
    loopback address, the ring's ports and seeds, and its token.
    """

    def __init__(
        self,
        base_dir: Path,
        lib_dir: Path,
        *,
        host: str = "127.0.0.1",
        ports: tuple[int, int] | None = None,
        seeds: Sequence[str] | None = None,
        token: int = 0,
        name: str = "cassandra",
        durable: bool = True,
    ) -> None:
        self.dir = base_dir
        self.lib_dir = lib_dir
        self.host = host
        self.native_port, self.storage_port = ports or free_ports(2, host)
        self.log_path = self.dir / "system.log"
        self.stdout_path = self.dir / "stdout.log"
        self.config_path = self.dir / "cassandra.yaml"
        self.logback_path = self.dir / "logback.xml"
        self.started_in_s: float | None = None
        for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            CASSANDRA_YAML.format(
                dir=self.dir, host=host, token=token, storage_port=self.storage_port, native_port=self.native_port,
                seeds=",".join(seeds or [f"{host}:{self.storage_port}"]),
                commitlog_sync=COMMITLOG_SYNC if durable else COMMITLOG_PERIODIC,
            )
        )  # fmt: skip
        self.logback_path.write_text(LOGBACK_XML.format(log=self.log_path))
        self.process = ServerProcess(
            name, self.command(), log_path=self.stdout_path, ready=port_open(host, self.native_port),
            cwd=self.dir, start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S,
        )  # fmt: skip

    # -- addresses -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.native_port}"

    @property
    def url(self) -> str:
        """The backend URL for keyspace ``barnabas`` and the default namespace."""
        return f"cassandra://{self.endpoint}/barnabas"

    def url_for(self, keyspace: str | None = None, namespace: str | None = None) -> str:
        """A backend URL on a fresh (or the given) keyspace, so tests sharing the node don't collide."""
        url = f"cassandra://{self.endpoint}/{keyspace or 't_' + uuid.uuid4().hex[:16]}"
        return url + (f"?namespace={namespace}" if namespace else "")

    @property
    def gossip_address(self) -> str:
        """How other nodes' logs name this one (``/127.0.0.2:7000``)."""
        return f"/{self.host}:{self.storage_port}"

    def log_size(self) -> int:
        """Where the node's log ends now: a mark for ``logged_since``."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def logged_since(self, mark: int) -> str:
        """The node's log from ``mark`` (a ``log_size()``) on."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(mark)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # -- lifecycle -------------------------------------------------------------------------

    def command(self) -> list[str]:
        jamm = sorted(self.lib_dir.glob("jamm-*.jar"))
        return [
            "java",
            *HEAP,
            *JVM17_FLAGS,
            *(f"-javaagent:{jar}" for jar in jamm[:1]),  # memtable sizing, as cassandra-env.sh adds it
            *FAST_START_FLAGS,
            f"-Dcassandra.config=file://{self.config_path}",
            f"-Dlogback.configurationFile={self.logback_path}",
            f"-Dcassandra.logdir={self.dir}",
            f"-Dcassandra.storagedir={self.dir}",
            "-cp",
            f"{self.lib_dir}/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def start(self, timeout_s: float | None = None) -> Self:
        """Start and wait until the node accepts CQL connections (``started_in_s`` says how long that took)."""
        began = time.monotonic()
        super().start(timeout_s)
        self.started_in_s = time.monotonic() - began
        return self

    def rss_bytes(self) -> int | None:
        """The JVM's resident memory now (from /proc), or None when not running."""
        if not self.running or self.pid is None:
            return None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def log_tail(self, lines: int = 60) -> str:
        parts = []
        for path in (self.stdout_path, self.log_path):
            try:
                text = path.read_text(errors="replace").splitlines()
            except OSError:
                parts.append(f"(no log at {path})")
                continue
            parts.append(f"---- {path} (last {lines} lines) ----\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)


class CassandraRing(ServerGroup[CassandraServer]):
    """``size`` nodes on 127.0.0.1, 127.0.0.2, ... sharing one CQL and one storage port; members can be
    killed, paused and restarted. The driver takes one native port for all hosts: hence an address each.
    Not ``durable`` unless asked (see the module's rules)."""

    def __init__(self, base_dir: Path, lib_dir: Path, size: int = 3, *, durable: bool = False) -> None:
        hosts = [f"127.0.0.{i + 1}" for i in range(size)]
        native, storage = _ports_free_on(hosts, 2)
        seeds = [f"{host}:{storage}" for host in hosts]
        step = 2**64 // size
        self.members = [
            CassandraServer(
                base_dir / f"n{i + 1}",
                lib_dir,
                host=host,
                ports=(native, storage),
                seeds=seeds,
                token=-(2**63) + i * step,
                name=f"cassandra n{i + 1}",
                durable=durable,
            )
            for i, host in enumerate(hosts)
        ]

    @property
    def native_port(self) -> int:
        return self.members[0].native_port

    def url_for(self, keyspace: str | None = None, replication_factor: int | None = None) -> str:
        """A backend URL naming every node, on a fresh (or the given) keyspace replicated to every node."""
        hosts = ",".join(member.host for member in self.members)
        factor = replication_factor or len(self.members)
        keyspace = keyspace or "t_" + uuid.uuid4().hex[:16]
        return f"cassandra://{hosts}:{self.native_port}/{keyspace}?replication_factor={factor}"

    def start(self, timeout_s: float | None = None) -> Self:
        """Launch every node at once and wait until each serves CQL and gossip has joined them all."""
        marks = self._marks()
        super().start(timeout_s)
        try:
            self.wait_joined(self.members, marks, timeout_s)
        except Exception:
            self.stop()
            raise
        return self

    def restart(self, member: CassandraServer, timeout_s: float | None = None) -> None:
        """Start ``member`` again (stopping it first if it runs) and wait until the ring has it back."""
        marks = self._marks()
        member.restart(timeout_s)
        self.wait_joined([member], marks, timeout_s)

    def wait_joined(
        self, joined: Sequence[CassandraServer], marks: dict[int, int], timeout_s: float | None = None
    ) -> None:
        """Wait until, in the logs since ``marks``, each of ``joined`` saw every live node up, and they it.

        Raises:
            RuntimeError: gossip did not join them in time (with the logs' tails).
        """
        deadline = time.monotonic() + (timeout_s or START_TIMEOUT_S)
        while not self._joined(joined, marks):
            if time.monotonic() > deadline:
                raise RuntimeError(f"gossip did not join the ring in time\n{self.log_tails()}")
            time.sleep(0.1)

    def _joined(self, joined: Sequence[CassandraServer], marks: dict[int, int]) -> bool:
        live = [member for member in self.members if member.running]
        logs = {id(member): member.logged_since(marks[id(member)]) for member in live}
        return all(
            f"{b.gossip_address} is now UP" in logs[id(a)] and f"{a.gossip_address} is now UP" in logs[id(b)]
            for b in joined
            for a in live
            if a is not b
        )

    def _marks(self) -> dict[int, int]:
        return {id(member): member.log_size() for member in self.members}


def _ports_free_on(hosts: Sequence[str], count: int, attempts: int = 20) -> tuple[int, ...]:
    """``count`` ports that none of ``hosts`` has in use now."""
    for _ in range(attempts):
        ports = free_ports(count, hosts[0])
        if all(_bindable(host, port) for host in hosts[1:] for port in ports):
            return tuple(ports)
    raise RuntimeError(f"found no {count} ports free on all of {list(hosts)}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
