"""A real Cassandra node from Maven Central's jars, started with plain ``java``, as a user of the process harness.

Rules this module keeps:

- ``build_cassandra`` runs a script that resolves ``org.apache.cassandra:cassandra-all`` and its
  runtime dependencies into a lib dir (idempotent). Cassandra 5.0 is the first release that runs on
  Java 17.
- The node binds 127.0.0.1 only, on free ports picked here (CQL and storage; JMX stays off), with
  its ``cassandra.yaml``, ``logback.xml``, data, commit log and logs in the directory given.
  ``paxos_variant: v2`` as the coordination backend requires.
- The JVM gets the ``--add-exports``/``--add-opens`` flags of Cassandra 5.0's ``conf/jvm17-server.options``
  (the jars ship no ``conf/``), a small heap, and no JMX.
- Readiness: the CQL port accepts a connection (the native transport opens last, when the node is up).
- ``kill()`` is a crash (SIGKILL): acknowledged writes survive it because the commit log is written
  before the ack (the OS keeps it when only the process dies).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Self

from ..process import ManagedServer, ServerProcess, free_ports, port_open

__all__ = ["CassandraServer", "build_cassandra"]

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
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{storage_port}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {storage_port}
native_transport_port: {native_port}
start_native_transport: true
data_file_directories: [{dir}/data]
commitlog_directory: {dir}/commitlog
saved_caches_directory: {dir}/saved_caches
hints_directory: {dir}/hints
cdc_raw_directory: {dir}/cdc_raw
commitlog_sync: batch
commitlog_segment_size: 8MiB
paxos_variant: v2
auto_snapshot: false
hinted_handoff_enabled: false
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
"""

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
    """One Cassandra node (CassandraDaemon) with its config, data and log; restartable on the same ports."""

    def __init__(self, base_dir: Path, lib_dir: Path) -> None:
        self.dir = base_dir
        self.lib_dir = lib_dir
        self.native_port, self.storage_port = free_ports(2)
        self.log_path = self.dir / "system.log"
        self.stdout_path = self.dir / "stdout.log"
        self.config_path = self.dir / "cassandra.yaml"
        self.logback_path = self.dir / "logback.xml"
        self.started_in_s: float | None = None
        for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            CASSANDRA_YAML.format(dir=self.dir, storage_port=self.storage_port, native_port=self.native_port)
        )
        self.logback_path.write_text(LOGBACK_XML.format(log=self.log_path))
        self.process = ServerProcess(
            "cassandra", self.command(), log_path=self.stdout_path, ready=port_open("127.0.0.1", self.native_port),
            cwd=self.dir, start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S,
        )  # fmt: skip

    # -- addresses -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.native_port}"

    @property
    def url(self) -> str:
        """The backend URL for keyspace ``barnabas`` and the default namespace."""
        return f"cassandra://{self.endpoint}/barnabas"

    def url_for(self, keyspace: str | None = None, namespace: str | None = None) -> str:
        """A backend URL on a fresh (or the given) keyspace, so tests sharing the node don't collide."""
        url = f"cassandra://{self.endpoint}/{keyspace or 't_' + uuid.uuid4().hex[:16]}"
        return url + (f"?namespace={namespace}" if namespace else "")

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
