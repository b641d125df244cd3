"""A real Cassandra node for the coordination tests: Maven Central's jars, started with plain ``java``.

Rules this module keeps:

- ``cassandra/build.sh`` resolves ``org.apache.cassandra:cassandra-all`` (version in ``cassandra/pom.xml``)
  and its runtime dependencies into ``cassandra/build/lib`` (gitignored); it is idempotent and a
  no-op once built. Cassandra 5.0 is the first release that runs on Java 17, the only JDK Debian 12
  ships.
- One node per test session (it takes seconds to start and ~1 GB of memory); tests isolate
  themselves with a fresh keyspace per test (``url_for()``).
- The node binds 127.0.0.1 only, on free ports picked here (CQL and storage; JMX stays off), with
  its ``cassandra.yaml``, ``logback.xml``, data, commit log and logs in a pytest temp dir.
  ``paxos_variant: v2`` as the backend requires (coordination.md §6).
- The JVM gets the ``--add-exports``/``--add-opens`` flags of Cassandra 5.0's ``conf/jvm17-server.options``
  (the jars ship no ``conf/``), a small heap, and no JMX.
- Readiness: the CQL port accepts a connection (the native transport opens last, when the node is up),
  polled with a deadline; an early exit fails at once with the log.
- Stopped by pid: SIGTERM then wait (SIGKILL after :data:`STOP_TIMEOUT_S`), always ``wait()`` before
  the ports or data dir are reused. ``kill()`` is a crash (SIGKILL): acknowledged writes survive it
  because the commit log is written before the ack (the OS keeps it when only the process dies).
- When the node cannot be built or started here (no ``java``/``mvn``, Maven Central unreachable, the
  JVM dies), the session fixture *skips* with the reason and the log tail, printed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["CassandraServer", "build_cassandra", "cassandra_server", "free_ports"]

HERE = Path(__file__).resolve().parent / "cassandra"
LIB_DIR = HERE / "build" / "lib"
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


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on right now (held open together so they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def build_cassandra(timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Run ``build.sh`` (a no-op once built) and return the directory of the node's jars.

    Raises:
        RuntimeError: java or mvn is missing, or Maven could not resolve the jars (with its output).
    """
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"'{tool}' is not on PATH")
    try:
        done = subprocess.run(
            ["bash", str(HERE / "build.sh")], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"build.sh did not finish in {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"build.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    if not any(LIB_DIR.glob("cassandra-all-*.jar")):
        raise RuntimeError(f"build.sh left no cassandra-all jar in {LIB_DIR}")
    return LIB_DIR


class CassandraServer:
    """One Cassandra node (CassandraDaemon) with its config, data and log; restartable on the same ports."""

    def __init__(self, base_dir: Path, lib_dir: Path = LIB_DIR) -> None:
        self.dir = base_dir
        self.lib_dir = lib_dir
        self.native_port, self.storage_port = free_ports(2)
        self.log_path = self.dir / "system.log"
        self.stdout_path = self.dir / "stdout.log"
        self.config_path = self.dir / "cassandra.yaml"
        self.logback_path = self.dir / "logback.xml"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in_s: float | None = None
        for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            CASSANDRA_YAML.format(dir=self.dir, storage_port=self.storage_port, native_port=self.native_port)
        )
        self.logback_path.write_text(LOGBACK_XML.format(log=self.log_path))

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

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the JVM without waiting for it to serve CQL."""
        assert not self.alive, "cassandra is already running"
        with open(self.stdout_path, "ab") as out:
            out.write(f"\n==== start {time.strftime('%H:%M:%S')} {' '.join(self.command())}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir
            )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> CassandraServer:
        """Start and wait until the node accepts CQL connections."""
        began = time.monotonic()
        self.spawn()
        self.wait_ready(timeout_s)
        self.started_in_s = time.monotonic() - began
        return self

    def accepts_cql(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.native_port), timeout=1.0):
                return True
        except OSError:
            return False

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Poll the CQL port until it accepts; on timeout or exit, kill and fail with the logs."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                code = self.proc.returncode if self.proc else None
                raise RuntimeError(f"cassandra exited with {code} while starting\n{self.log_tail()}")
            if self.accepts_cql():
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"cassandra did not accept CQL within {timeout_s:.0f} s\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM (Cassandra drains: flushes memtables) and wait; SIGKILL if it lingers."""
        self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and wait: a crash; the commit log is replayed on the next start."""
        self._signal_and_wait(signal.SIGKILL)

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> CassandraServer:
        """Stop if running, then start again on the same ports and data."""
        if self.alive:
            self.stop()
        return self.start(timeout_s)

    def _signal_and_wait(self, sig: signal.Signals) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def rss_bytes(self) -> int | None:
        """The JVM's resident memory now (from /proc), or None when not running."""
        if not self.alive or self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
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


@pytest.fixture(scope="session")
def cassandra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    """One Cassandra node for the whole run; skips, saying why, when it cannot be built or started here."""
    try:
        lib_dir = build_cassandra()
    except RuntimeError as exc:
        reason = f"no Cassandra node for the tests: {exc}"
        print(reason)
        pytest.skip(reason)
    server = CassandraServer(tmp_path_factory.mktemp("cassandra-server"), lib_dir)
    try:
        server.start()
    except RuntimeError as exc:
        reason = f"no Cassandra node for the tests: {exc}"
        print(reason)
        pytest.skip(reason)
    print(f"cassandra node {server.endpoint} (pid {server.pid}) accepted CQL after {server.started_in_s:.1f} s")
    yield server
    server.stop()
