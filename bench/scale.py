"""Scale: many partitions on one broker and on a 3-broker cluster, many connections on one broker,
and the recovery of a crashed broker with many gigabytes of logs; barnabas beside Apache Kafka.

Real ``barnabas broker`` processes on the embedded SQLite store and, in the same run, one Apache
Kafka 4.x node (KRaft, broker and controller in one JVM, started as ``bench compare`` starts it, with
the same settings), measured from outside as a client and an operator see them:

1. Partitions on one broker (``--partitions``, 10,000 by default, as topics of 100 partitions,
   replication factor 1): the time to create them, and until every one is led; a Metadata request
   for every topic (median of 5, confluent-kafka's ``list_topics``) right then and 30 s later, the
   broker's RSS, the clean stop itself (SIGTERM until the process has exited), and the time from
   start to every partition led again after that clean stop and after a crash (SIGKILL).
2. Connections on one broker (``--connections``, 10,000): the time to open that many client
   connections, each sending ApiVersions and reading the answer; the broker's RSS with them open;
   a Metadata request of another client meanwhile.
3. Recovery (``--recovery-gb``, 10): that many gigabytes produced (acks=1, 100 KB records) to a
   10-partition topic, the broker killed (SIGKILL) and started again: the time until every
   partition is led and its high watermark is back where the acknowledged records put it.
4. Partitions on a 3-broker cluster (``--cluster-partitions``, 100,000 by default, replication
   factor ``--cluster-replication-factor``, 1 by default, spread by the controller): creation time
   (until every partition is led, and with replicas every ISR whole), Metadata time, each broker's
   RSS and CPU at rest over ``AT_REST_S`` (its followers' fetches, the controller's checks), the
   controller failover time (SIGKILL the controller; until another broker answers as controller),
   the descriptors each survivor holds, the killed broker's restart until every partition is led
   again, then another broker's clean stop and its restart until every partition is led. barnabas
   only (Kafka needs a descriptor per partition and then some: more than a 20,000 limit allows).

Part 1 runs on a fresh ext4 filesystem per system (an image file on a loop device, with a journal
when the filesystem under ``--work-dir`` has one) when this runs as root with ``mkfs.ext4``: creating
tens of thousands of files on ext4 costs several times more in the minutes after as many were deleted
(the allocator skips recently freed inodes one by one), so on a shared filesystem each system's figure
depended on what ran before it (the same build created 10,000 partitions in 20 s and in 69 s).
``--shared-fs`` turns it off.

Parts 1-3 run on every system of ``--systems`` (barnabas,kafka); the report puts them side by side
with barnabas ÷ Kafka. Writes ``bench/results/scale.json`` and ``scale.md``; a run of some parts
(``--only``) keeps the other parts of the report already there, each section saying when it ran
(``measured_at``):

    python bench/scale.py [--systems barnabas,kafka] [--partitions 10000] [--connections 10000]
        [--recovery-gb 10] [--cluster-partitions 100000] [--only partitions,connections,recovery,cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from barnabas.benchmark._connection_probe import rss_kib  # noqa: E402
from barnabas.benchmark._kafka import KafkaCluster, find_kafka_lib  # noqa: E402
from barnabas.benchmark._system import environment  # noqa: E402
from barnabas.testing import FAST_FAILOVER, Broker, BrokerCluster  # noqa: E402

PARTITIONS_PER_TOPIC = 100
#: How long after the creation the second Metadata measure waits: both systems settle their new partitions.
METADATA_SETTLE_S = 30
TOPICS_PER_REQUEST = 20
#: ApiVersions v0, correlation id 1, client id "scale": a complete request frame.
_API_VERSIONS_BODY = struct.pack(">hhih", 18, 0, 1, 5) + b"scale"
API_VERSIONS = struct.pack(">i", len(_API_VERSIONS_BODY)) + _API_VERSIONS_BODY
BROKER_SETTINGS = {
    "log.index.size.max.bytes": "65536",  # many partitions: small preallocated indexes
    "num.partitions": "1",
}
#: Open files for this process and the brokers it starts: Kafka holds about three per partition (log, offset
#: and time index of the active segment) and one per connection, as its sizing guides ask of a broker host;
#: barnabas holds one per partition up to a share of its limit, and reopens idle ones past it.
OPEN_FILES = 1 << 20
SYSTEMS = ("barnabas", "kafka")
RECOVERY_PARTITIONS = 10
RECOVERY_RECORD_BYTES = 100_000


class KafkaBroker:
    """One Kafka node (KRaft: broker and controller in one JVM) with the Broker methods this script uses."""

    def __init__(self, base: Path) -> None:
        self.cluster = KafkaCluster(base, 1, find_kafka_lib(), dict(BROKER_SETTINGS))

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def pid(self) -> int | None:
        return next(iter(self.cluster.pids), None)

    def start(self) -> KafkaBroker:
        """Format and start it the first time; later, start it again on its storage."""
        if self.cluster.pids:  # it ran before: its storage is formatted
            self.cluster.restart()
        else:
            self.cluster.start()
        return self

    def stop(self) -> int:
        """Stop it (SIGKILL after 30 s); its exit code."""
        self.cluster.stop()
        proc = self.cluster.nodes[0].proc
        return 0 if proc is None else proc.wait()

    def kill(self) -> None:
        self.cluster.kill()


def single_broker(system: str, directory: Path) -> Broker | KafkaBroker:
    """One broker of ``system`` with its data under ``directory``, not started yet."""
    if system == "kafka":
        return KafkaBroker(directory)
    broker = Broker(directory / "broker", 0, properties=BROKER_SETTINGS, start_timeout_s=900)
    broker.process.stop_timeout_s = 300  # the clean stop is measured: it must not be cut short
    return broker


#: Size of each fresh filesystem's image (sparse: only what the brokers write takes disk space).
FRESH_FS_BYTES = 16 << 30


def has_journal(directory: Path) -> bool:
    """Whether the ext4 filesystem holding ``directory`` journals (jbd2 lists each journaled device)."""
    source = subprocess.run(
        ["findmnt", "-n", "-o", "SOURCE", "--target", str(directory)], capture_output=True, text=True, check=False
    ).stdout.strip()
    jbd2 = Path("/proc/fs/jbd2")
    return jbd2.is_dir() and any(entry.name.startswith(Path(source).name + "-") for entry in jbd2.iterdir())


@contextlib.contextmanager
def fresh_filesystem(directory: Path, wanted: bool) -> Iterator[tuple[Path, str]]:
    """``directory`` on a fresh ext4 image mounted there (root and mkfs.ext4), else as it is; and which."""
    directory.mkdir(parents=True, exist_ok=True)
    if not wanted or os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        yield directory, "shared"
        return
    journal = has_journal(directory.parent)
    image = directory.with_name(directory.name + ".img")
    with image.open("wb") as sparse:
        sparse.truncate(FRESH_FS_BYTES)
    features = [] if journal else ["-O", "^has_journal"]
    subprocess.run(["mkfs.ext4", "-q", "-F", *features, str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(directory)], check=True)
    try:
        yield directory, "fresh ext4" + ("" if journal else " without a journal, as the host's")
    finally:
        subprocess.run(["umount", str(directory)], check=False)
        image.unlink(missing_ok=True)


def allow_open_files(wanted: int = OPEN_FILES) -> int:
    """Raise RLIMIT_NOFILE (the hard limit too when root) for this process and its children; the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = min(wanted, int(Path("/proc/sys/fs/nr_open").read_text()))
    for limits in ((ceiling, ceiling), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            return limits[0]
        except (ValueError, OSError):
            continue
    return soft


def rss_mb(pid: int | None) -> float:
    """Resident memory of ``pid`` in MB (VmRSS)."""
    if pid is None:
        return 0.0
    return round(rss_kib(Path(f"/proc/{pid}/status").read_text()) / 1024, 1)


def open_files(pid: int | None) -> int:
    """How many descriptors the process holds."""
    return len(os.listdir(f"/proc/{pid}/fd")) if pid else 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cores_at_rest(pids: list[int], seconds: float) -> list[float]:
    """Each process's CPU over ``seconds`` of nothing asked of it, in cores."""
    before = [cpu_seconds(pid) for pid in pids]
    time.sleep(seconds)
    return [round((cpu_seconds(pid) - was) / seconds, 3) for pid, was in zip(pids, before, strict=True)]


def timed(action: Callable[[], object]) -> float:
    began = time.monotonic()
    action()
    return round(time.monotonic() - began, 2)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120_000})


def create_topics(bootstrap: str, partitions: int, prefix: str, replication_factor: int = 1) -> list[str]:
    """Create ``partitions`` partitions as topics of 100; their names."""
    client = admin(bootstrap)
    names = [f"{prefix}-{i:05d}" for i in range(max(1, partitions // PARTITIONS_PER_TOPIC))]
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        chunk = [
            NewTopic(n, PARTITIONS_PER_TOPIC, replication_factor) for n in names[start : start + TOPICS_PER_REQUEST]
        ]
        for future in client.create_topics(chunk, request_timeout=300).values():
            future.result(timeout=600)
    return names


def metadata_seconds(bootstrap: str, rounds: int = 5) -> float:
    """Median time of a Metadata request for every topic, as confluent-kafka's list_topics sends it."""
    client = admin(bootstrap)
    client.list_topics(timeout=120)  # connected and warm
    times = []
    for _ in range(rounds):
        began = time.monotonic()
        client.list_topics(timeout=120)
        times.append(time.monotonic() - began)
    return round(statistics.median(times), 4)


def all_led(bootstrap: str, partitions: int, exclude: int | None = None, in_sync: int = 1) -> bool:
    """Whether at least ``partitions`` partitions are led (not by ``exclude``), each with ``in_sync`` in its ISR."""
    try:
        md = admin(bootstrap).list_topics(timeout=30)
    except Exception:
        return False
    led = sum(
        1
        for topic in md.topics.values()
        for p in topic.partitions.values()
        if p.leader >= 0 and p.leader != exclude and len(p.isrs) >= in_sync
    )  # fmt: skip
    return led >= partitions


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def stopped_cleanly(broker: Broker | KafkaBroker) -> None:
    """SIGTERM and wait for the exit; a broker that had to be killed did not stop cleanly."""
    code = broker.stop()
    if code == -signal.SIGKILL:
        raise RuntimeError(f"the {type(broker).__name__} did not stop within its stop timeout and was killed")


def one_broker_partitions(broker: Broker | KafkaBroker, partitions: int) -> dict[str, Any]:
    broker.start()
    try:
        result: dict[str, Any] = {"partitions": partitions}
        began = time.monotonic()
        result["create_s"] = timed(lambda: create_topics(broker.bootstrap, partitions, "scale"))
        wait_until(lambda: all_led(broker.bootstrap, partitions), 600, "every partition led")
        result["created_and_led_s"] = round(time.monotonic() - began, 2)  # Kafka answers before its logs exist
        result["metadata_s"] = metadata_seconds(broker.bootstrap)
        time.sleep(METADATA_SETTLE_S)  # what the measure is: the same request once the broker has settled
        result["metadata_settled_s"] = metadata_seconds(broker.bootstrap)
        result["rss_mb"] = rss_mb(broker.pid)

        def clean_stop() -> None:
            result["clean_stop_s"] = timed(lambda: stopped_cleanly(broker))

        for kind, stop in (("clean", clean_stop), ("unclean", broker.kill)):
            stop()
            began = time.monotonic()
            broker.start()
            result[f"{kind}_restart_ready_s"] = round(time.monotonic() - began, 2)
            wait_until(lambda: all_led(broker.bootstrap, partitions), 900, "every partition led after a restart")
            result[f"{kind}_restart_all_led_s"] = round(time.monotonic() - began, 2)
        return result
    finally:
        broker.kill()


def one_broker_connections(broker: Broker | KafkaBroker, connections: int) -> dict[str, Any]:
    broker.start()
    sockets: list[socket.socket] = []
    try:
        idle_rss = rss_mb(broker.pid)
        began = time.monotonic()
        answered = open_connections(port_of(broker.bootstrap), connections, sockets)
        opened_s = round(time.monotonic() - began, 2)
        with_connections = rss_mb(broker.pid)
        result = {
            "connections": connections,
            "answered": answered,
            "open_and_answer_s": opened_s,
            "rss_idle_mb": idle_rss,
            "rss_with_connections_mb": with_connections,
            "kib_per_connection": round((with_connections - idle_rss) * 1024 / max(answered, 1), 1),
            "metadata_meanwhile_s": metadata_seconds(broker.bootstrap),
        }
        return result
    finally:
        for sock in sockets:
            sock.close()
        broker.kill()


def recovery_after_crash(broker: Broker | KafkaBroker, gigabytes: float) -> dict[str, Any]:
    """Fill a topic with ``gigabytes``, kill -9 the broker, and time its return to every acknowledged record."""
    broker.start()
    try:
        topic = "recovery"
        client = admin(broker.bootstrap)  # kept: a destroyed client fails its futures
        for future in client.create_topics([NewTopic(topic, RECOVERY_PARTITIONS, 1)]).values():
            future.result(timeout=120)
        wait_until(lambda: all_led(broker.bootstrap, RECOVERY_PARTITIONS), 120, "the recovery topic led")
        began = time.monotonic()
        acknowledged = produce_bytes(broker.bootstrap, topic, int(gigabytes * 1e9))
        produce_s = time.monotonic() - began
        broker.kill()
        began = time.monotonic()
        broker.start()
        ready_s = round(time.monotonic() - began, 2)
        wait_until(lambda: high_watermarks(broker.bootstrap, topic) == acknowledged, 1800, "every record back")
        return {
            "gigabytes": gigabytes,
            "records": sum(acknowledged),
            "produce_mb_per_s": round(sum(acknowledged) * RECOVERY_RECORD_BYTES / 1e6 / produce_s, 1),
            "ready_s": ready_s,
            "every_record_back_s": round(time.monotonic() - began, 2),
        }
    finally:
        broker.kill()


def produce_bytes(bootstrap: str, topic: str, total: int) -> list[int]:
    """Produce ``total`` bytes of random 100 KB records round-robin over the partitions; acknowledged per partition."""
    acknowledged = [0] * RECOVERY_PARTITIONS
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acknowledged[message.partition()] += 1
        else:
            failures.append(str(error))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000, "log_level": 0,
         "queue.buffering.max.kbytes": 1_048_576, "message.max.bytes": 1_000_000}
    )  # fmt: skip
    value = os.urandom(RECOVERY_RECORD_BYTES)
    for i in range(total // RECOVERY_RECORD_BYTES):
        while True:
            try:
                producer.produce(topic, value, partition=i % RECOVERY_PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(300)
    del producer  # gone before the broker is killed: no reconnect noise
    if left or failures:
        raise RuntimeError(f"produce failed: {left} unsent, {failures[:3]}")
    return acknowledged


def high_watermarks(bootstrap: str, topic: str) -> list[int] | None:
    """Each partition's high watermark, or None while the broker cannot say."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-recovery", "log_level": 0})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(RECOVERY_PARTITIONS)
        ]
    except Exception:
        return None
    finally:
        consumer.close()


def port_of(bootstrap: str) -> int:
    return int(bootstrap.rsplit(":", 1)[1])


def open_connections(port: int, count: int, sockets: list[socket.socket]) -> int:
    """Open ``count`` connections sending ApiVersions, 500 at a time; how many were answered."""
    answered = 0
    for start in range(0, count, 500):
        wave = []
        selector = selectors.DefaultSelector()
        for _ in range(min(500, count - start)):
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.sendall(API_VERSIONS)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            wave.append(sock)
        pending = set(wave)
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock.recv(65536):
                    answered += 1
                    pending.discard(sock)
                    selector.unregister(sock)
        selector.close()
        sockets.extend(wave)
    return answered


#: Seconds the cluster is left alone to measure its CPU at rest.
AT_REST_S = 30.0


def cluster_partitions(base: Path, partitions: int, replication_factor: int = 1) -> dict[str, Any]:
    settings = {**BROKER_SETTINGS, "broker.session.timeout.ms": FAST_FAILOVER["broker.session.timeout.ms"]}
    cluster = BrokerCluster(base / "cluster", 3, properties=settings, start_timeout_s=900).start()
    try:
        result: dict[str, Any] = {"partitions": partitions, "brokers": 3, "replication_factor": replication_factor}
        bootstrap = cluster.bootstrap
        result["create_s"] = timed(lambda: create_topics(bootstrap, partitions, "cscale", replication_factor))
        result["all_in_sync_s"] = timed(
            lambda: wait_until(
                lambda: all_led(bootstrap, partitions, in_sync=replication_factor), 1800, "every partition in sync"
            )
        )
        result["metadata_s"] = metadata_seconds(bootstrap)
        result["rss_mb"] = [rss_mb(b.pid) for b in cluster.brokers]
        result["cores_at_rest"] = cores_at_rest([b.pid for b in cluster.brokers if b.pid is not None], AT_REST_S)
        controller = cluster.controller()
        held = sum(
            1 for t in cluster.metadata(60).topics.values() for p in t.partitions.values() if p.leader == controller
        )  # fmt: skip
        began = time.monotonic()
        cluster.brokers[controller].kill()
        survivors = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != controller)

        def restart_until_all_led(broker: Broker) -> None:
            broker.start(900)  # a kill -9 leaves tens of thousands of logs to recover first
            wait_until(
                lambda: all_led(bootstrap, partitions, in_sync=replication_factor),
                1800,
                "every partition led (and in sync) after a restart",
            )

        def new_controller() -> bool:
            try:
                md = admin(survivors).list_topics(timeout=10)
            except Exception:
                return False
            return md.controller_id not in (-1, controller)

        wait_until(new_controller, 300, "a new controller")
        result["controller_failover_s"] = round(time.monotonic() - began, 2)
        result["victim_held_partitions"] = held
        result["open_files"] = [open_files(b.pid) for b in cluster.brokers if b.broker_id != controller]
        result["unclean_restart_all_led_s"] = timed(lambda: restart_until_all_led(cluster.brokers[controller]))
        other = cluster.brokers[(controller + 1) % 3]
        result["clean_stop_s"] = timed(lambda: stopped_cleanly(other))
        result["clean_restart_all_led_s"] = timed(lambda: restart_until_all_led(other))
        return result
    finally:
        cluster.stop()


#: The rows set side by side: (label, section, key, unit, scale to that unit).
COMPARED = (
    ("idle RSS", "connections", "rss_idle_mb", "MB", 1),
    ("{partitions} partitions created and all led", "partitions", "created_and_led_s", "s", 1),
    ("RSS with {partitions} partitions", "partitions", "rss_mb", "MB", 1),
    ("clean stop (SIGTERM) with {partitions} partitions", "partitions", "clean_stop_s", "s", 1),
    ("all led after a clean restart ({partitions} partitions)", "partitions", "clean_restart_all_led_s", "s", 1),
    ("all led after kill -9 ({partitions} partitions)", "partitions", "unclean_restart_all_led_s", "s", 1),
    ("Metadata for {partitions} partitions", "partitions", "metadata_s", "ms", 1000),
    ("Metadata for {partitions} partitions, 30 s later", "partitions", "metadata_settled_s", "ms", 1000),
    ("memory per connection ({connections} open)", "connections", "kib_per_connection", "KiB", 1),
    ("every record back after kill -9 with {gigabytes} GB of logs", "recovery", "every_record_back_s", "s", 1),
)  # fmt: skip


def compared_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """barnabas beside Kafka for each COMPARED measure both ran, with barnabas ÷ Kafka."""
    rows = []
    for label, section, key, unit, scale in COMPARED:
        values = {}
        for system in SYSTEMS:
            value = results.get(system, {}).get(section, {}).get(key)
            values[system] = None if value is None else round(value * scale, 3)
        if all(v is None for v in values.values()):
            continue
        sizes = {**results.get("barnabas", {}).get(section, {}), **results.get("kafka", {}).get(section, {})}
        ratio = values["barnabas"] / values["kafka"] if values["barnabas"] is not None and values["kafka"] else None
        rows.append({"measure": label.format(**sizes), "unit": unit, **values, "ratio": ratio})
    return rows


def kept_sections(previous: Path, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sections of an earlier report that this run did not measure again, with this run's."""
    if not previous.exists():
        return results
    merged: dict[str, dict[str, Any]] = json.loads(previous.read_text()).get("results", {})
    for system, sections in results.items():
        merged.setdefault(system, {}).update(sections)
    return merged


def write_report(output: Path, report: dict[str, Any]) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# Scale", "", f"Run {report['run_at']} on {report['environment'].get('cpu', 'this machine')}.", ""]
    lines += ["| measure | unit | barnabas | Kafka | barnabas ÷ Kafka |", "|---|---|---:|---:|---:|"]
    for row in report["compared"]:
        cells = [("—" if row[s] is None else f"{row[s]:g}") for s in SYSTEMS]
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        lines.append(f"| {row['measure']} | {row['unit']} | {cells[0]} | {cells[1]} | {ratio} |")
    lines.append("")
    for system, sections in report["results"].items():
        for name, section in sections.items():
            lines += [f"## {system}: {name}", "", "| measure | value |", "|---|---:|"]
            lines += [f"| {key} | {value} |" for key, value in section.items()]
            lines.append("")
    (output / "scale.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="barnabas and/or kafka, comma-separated")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--recovery-gb", type=float, default=10.0)
    parser.add_argument("--cluster-partitions", type=int, default=100_000)
    parser.add_argument("--cluster-replication-factor", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument(
        "--only", default="partitions,connections,recovery,cluster", help="which parts, comma-separated"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep the brokers' dirs and logs here")
    parser.add_argument(
        "--shared-fs", action="store_true", help="part 1 on the work dir's filesystem, not a fresh one per system"
    )
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",")}
    systems = [s.strip() for s in args.systems.split(",")]
    if unknown := set(systems) - set(SYSTEMS):
        parser.error(f"unknown systems: {', '.join(sorted(unknown))} (known: {', '.join(SYSTEMS)})")
    limits = {"open_files": allow_open_files()}
    results: dict[str, dict[str, Any]] = {system: {} for system in systems}
    measured_at = time.strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory(prefix="barnabas-scale-") as tmp:
        base = args.work_dir or Path(tmp)
        for system in systems:
            found = results[system]
            if "partitions" in parts:
                with fresh_filesystem(base / system / "partitions", not args.shared_fs) as (directory, fs):
                    found["partitions"] = one_broker_partitions(single_broker(system, directory), args.partitions)
                found["partitions"]["filesystem"] = fs
                print(system, "partitions", found["partitions"], flush=True)
            if "connections" in parts:
                found["connections"] = one_broker_connections(
                    single_broker(system, base / system / "connections"), args.connections
                )
                print(system, "connections", found["connections"], flush=True)
            if "recovery" in parts:
                found["recovery"] = recovery_after_crash(
                    single_broker(system, base / system / "recovery"), args.recovery_gb
                )
                print(system, "recovery", found["recovery"], flush=True)
                shutil.rmtree(base / system / "recovery", ignore_errors=True)  # gigabytes of logs
            if "cluster" in parts and system == "barnabas":
                found["cluster"] = cluster_partitions(
                    base / system, args.cluster_partitions, args.cluster_replication_factor
                )
                print(system, "cluster", found["cluster"], flush=True)
    for sections in results.values():
        for section in sections.values():
            section.setdefault("measured_at", measured_at)
    results = kept_sections(args.output / "scale.json", results)
    report = {
        "run_at": time.strftime("%Y-%m-%d %H:%M:%S"), "environment": environment(None), "limits": limits,
        "results": results, "compared": compared_rows(results),
    }  # fmt: skip
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
