"""Apache Kafka 4.x in KRaft mode for ``barnabas bench compare``: one node, or three.

Rules this module keeps:

- Kafka runs from the jars ``bench/kafka-server/build.sh`` resolves from Maven Central, started with
  plain ``java -cp 'lib/*' kafka.Kafka server.properties`` (what ``kafka-server-start.sh`` does,
  with its default heap and G1 flags), never from a package someone installed by hand.
- Every node is a combined broker + controller (``process.roles=broker,controller``); the
  controllers form a static quorum (``controller.quorum.voters``) of all nodes: 1 voter for one
  node, 3 for three. Storage is formatted with ``kafka.tools.StorageTool format`` first.
- Everything binds to 127.0.0.1 on ports picked free here; data lives under the given directory.
- The cluster is ready when Metadata from the first node lists every broker. Only the processes
  started here are signalled (SIGTERM, then SIGKILL after 30 s), by their pids.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from barnabas.testing import free_ports

from ._child import stop_child
from ._settings import BenchError

__all__ = ["KafkaCluster", "find_kafka_lib"]

#: kafka-server-start.sh's defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
_JVM_FLAGS = (
    "-Xmx1g", "-Xms1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
    # The pom binds slf4j to slf4j-simple: warnings and errors only, to stderr.
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)  # fmt: skip
_FORMAT_TIMEOUT_S = 120.0
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0
_LIB_ENV = "BARNABAS_KAFKA_LIB"


def find_kafka_lib(explicit: Path | None = None) -> Path:
    """The directory of Kafka's jars: ``explicit``, $BARNABAS_KAFKA_LIB, or the checkout's bench/kafka-server/build/lib.

    Raises:
        BenchError: no directory there holds kafka_2.13's jar.
    """
    candidates = [explicit] if explicit else []
    if os.environ.get(_LIB_ENV):
        candidates.append(Path(os.environ[_LIB_ENV]))
    # src/barnabas/benchmark/_kafka.py → the checkout root (an editable install), then the working dir.
    candidates += [
        Path(__file__).resolve().parents[3] / "bench/kafka-server/build/lib",
        Path("bench/kafka-server/build/lib"),
    ]
    for candidate in candidates:
        if candidate is not None and any(candidate.glob("kafka_2.13-*.jar")):
            return candidate.resolve()
        if explicit is not None:
            break
    where = explicit or candidates[-2]
    raise BenchError(f"Kafka's jars are not in {where}: run bench/kafka-server/build.sh (make bench does)")


def kafka_version(lib: Path) -> str:
    """The Kafka release of the jars in ``lib`` (from kafka_2.13-<version>.jar)."""
    jar = next(lib.glob("kafka_2.13-*.jar"))
    return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")


class _Node:
    """One Kafka JVM: its ports, directories and process."""

    def __init__(self, node_id: int, base: Path, port: int, controller_port: int) -> None:
        self.node_id = node_id
        self.dir = base / f"kafka-{node_id}"
        self.port = port
        self.controller_port = controller_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.output: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None

    @property
    def properties_path(self) -> Path:
        return self.dir / "server.properties"

    def write_properties(self, voters: str, size: int, settings: dict[str, str]) -> None:
        replication = str(min(3, size))
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **settings,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

    def start(self, lib: Path, java: str) -> None:
        command = [java, *_JVM_FLAGS, "-cp", f"{lib}/*", "kafka.Kafka", str(self.properties_path)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.dir)

        def pump(proc: subprocess.Popen[bytes]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line.decode(errors="replace").rstrip())

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True, name=f"kafka-{self.node_id}")
        self._reader.start()

    def problem(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            last = self.output[-1] if self.output else "no output"
            return f"Kafka node {self.node_id} exited with code {self.proc.returncode}: {last}"
        return None

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_child(self.proc, self._reader, _STOP_TIMEOUT_S)
        self._reader = None


class KafkaCluster:
    """``size`` combined broker + controller Kafka nodes on loopback, formatted and started together."""

    def __init__(self, base: Path, size: int, lib: Path, settings: dict[str, str] | None = None) -> None:
        self.base = base
        self.size = size
        self.lib = lib
        self.settings = settings or {}
        self.version = kafka_version(lib)
        ports = free_ports(2 * size)
        self.nodes = [_Node(i + 1, base, ports[2 * i], ports[2 * i + 1]) for i in range(size)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.nodes if n.proc is not None]

    @property
    def proxy_pids(self) -> list[int]:
        return []

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise BenchError("java is not on PATH (make bench installs it)")
        return java

    def start(self) -> KafkaCluster:
        """Format every node's storage, start the JVMs, and wait until Metadata lists every broker.

        Raises:
            BenchError: formatting failed, a node exited, or the cluster did not form in 2 minutes.
        """
        java = self._java()
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        cluster_id = _kafka_uuid()
        for node in self.nodes:
            node.write_properties(voters, self.size, self.settings)
        # --cluster-id=ID in one word: an id starting with "-" (base64url) would read as an option.
        storage_tool = [java, "-cp", f"{self.lib}/*", "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}"]
        storage_tool.append("--config")
        formats = [
            subprocess.Popen(
                [*storage_tool, str(node.properties_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            for node in self.nodes
        ]
        for node, proc in zip(self.nodes, formats, strict=True):
            try:
                out, _ = proc.communicate(timeout=_FORMAT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise BenchError(f"formatting Kafka node {node.node_id}'s storage took over 2 minutes") from None
            if proc.returncode != 0:
                last = out.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise BenchError(f"formatting Kafka node {node.node_id}'s storage failed: {last[0]}")
        for node in self.nodes:
            node.start(self.lib, java)
        self._wait_formed()
        return self

    def _wait_formed(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        seen = 0
        while time.monotonic() < deadline:
            if problem := self.problem():
                raise BenchError(problem)
            try:
                seen = len(admin.list_topics(timeout=2).brokers)
            except KafkaException:
                seen = 0
            if seen == self.size:
                return
            time.sleep(0.2)
        raise BenchError(f"Kafka: {seen} of {self.size} brokers registered after {_START_TIMEOUT_S:.0f} s")

    def restart(self) -> None:
        """Start every stopped node again on its storage (no formatting) and wait until the cluster formed.

        Raises:
            BenchError: a node exited, or the cluster did not form in 2 minutes.
        """
        java = self._java()
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                node.start(self.lib, java)
        self._wait_formed()

    def kill(self) -> None:
        """SIGKILL every node, as a crash would (nothing flushed, no clean shutdown marker), and reap them."""
        self._end(signal.SIGKILL)

    def problem(self) -> str | None:
        """Why the cluster is not running (a node exited), or None."""
        for node in self.nodes:
            if problem := node.problem():
                return problem
        return None

    def stop(self) -> None:
        """Stop every node (all are signalled first, so they shut down together)."""
        self._end(signal.SIGTERM)

    def _end(self, sig: int) -> None:
        """Send ``sig`` to every running node at once, then reap each (SIGKILL after 30 s)."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(sig)
        for node in self.nodes:
            node.stop()


def _kafka_uuid() -> str:
    """A cluster id in Kafka's form: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
