"""A 3-broker cluster per coordination backend: replicated produce throughput and leader failover time.

For each backend this starts the coordination server (the contract suite's fixture classes; SQLite
is the embedded file), three real ``barnabas broker`` processes sharing it (tests/support/cluster.py,
FAST_FAILOVER settings, ``min.insync.replicas=2``), and in the same run measures:

1. Produce throughput: one librdkafka producer process (``barnabas bench``'s producer worker: 1 KiB
   records, ``linger.ms=5``, 1 MiB batches) for ``--seconds`` into a fresh 4-partition topic, once
   with replication factor 3 and ``acks=all``, once with replication factor 1 and ``acks=1``.
   MB/s counts record values (10^6 bytes per second) until every record is acknowledged.
2. Failover: ``--kills`` times, SIGKILL the leader of partition 0 of an RF 3 topic while a
   producer process sends one acks=all record at a time to that partition, and take the time from
   the kill to the delivery report of the first record produced after the kill that succeeded.
   The victim is then restarted and the partition's ISR must be full again before the next kill.

Writes bench/results/cluster.json and cluster.md; broker logs go to ``--log-dir``:

    python bench/cluster.py [--backends sqlite,etcd,zookeeper] [--kills 20] [--seconds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import queue
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from barnabas.benchmark._phases import WorkerGroup  # noqa: E402
from barnabas.benchmark._settings import BenchError, producer_config  # noqa: E402
from barnabas.benchmark._system import CpuSample, busy_processes, environment, process_cpu_s  # noqa: E402
from barnabas.benchmark._workers import ProduceJob, producer_worker  # noqa: E402
from barnabas.testing import FAST_FAILOVER, Broker, BrokerCluster  # noqa: E402
from barnabas.testing.servers.etcd import EtcdServer  # noqa: E402
from barnabas.testing.servers.zookeeper import ZooKeeperServer  # noqa: E402

BACKENDS = ("sqlite", "etcd", "zookeeper")
MB = 1_000_000
RECORD_SIZE = 1024
PARTITIONS = 4
BROKERS = 3
MIN_ISR = "2"
FAILOVER_TOPIC = "failover"
#: The failover producer: one acks=all record at a time to partition 0, quick retries and refreshes.
FAILOVER_PRODUCER = {
    "acks": "all",
    "linger.ms": 0,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 100,
    "message.timeout.ms": 30000,
    "request.timeout.ms": 10000,
    "socket.timeout.ms": 10000,
    "enable.idempotence": False,
}
#: Longest wait for the first successful produce after a kill before the run is called failed.
FAILOVER_TIMEOUT_S = 120.0
#: How often the failover producer hands its delivery reports to this process.
REPORT_EVERY_S = 0.05


# -- coordination servers ---------------------------------------------------------------------------


@contextlib.contextmanager
def server_for(backend: str, base: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Start ``backend``'s server under ``base``; yield (url, facts about it). Stopped by pid afterwards."""
    began = time.monotonic()
    stop: Callable[[], None] = lambda: None  # noqa: E731
    facts: dict[str, Any] = {}
    base.mkdir(parents=True, exist_ok=True)
    if backend == "sqlite":
        url = f"sqlite:///{base / 'coordination.db'}"
        facts["liveness"] = "flock on a per-session lock file, reaper pass every 0.2 s"
    elif backend == "etcd":
        etcd = EtcdServer(base)
        stop = etcd.stop
        etcd.start()
        url = etcd.url_for()
        facts.update(heartbeat_ms=etcd.heartbeat_ms, election_ms=etcd.election_ms, liveness="lease TTL")
    elif backend == "zookeeper":
        zookeeper = ZooKeeperServer(base)
        stop = zookeeper.stop
        zookeeper.start()
        url = zookeeper.url_for()
        facts.update(
            tick_ms=zookeeper.tick_ms,
            max_session_timeout_ms=zookeeper.max_session_timeout_ms,
            liveness="session timeout (expiry in tick buckets)",
        )
    else:
        raise SystemExit(f"unknown backend {backend!r}")
    facts["start_s"] = round(time.monotonic() - began, 2)
    try:
        yield url, facts
    finally:
        stop()


# -- broker logs ------------------------------------------------------------------------------------


_LOG_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$"
)
_ODD_LEVELS = ("WARNING", "ERROR", "CRITICAL")
_DIGITS = re.compile(r"\d+")


def log_time(line: str) -> float | None:
    """The wall-clock time a broker log line was written (its asctime, local time), or None."""
    match = _LOG_LINE.match(line)
    if match is None:
        return None
    return datetime.datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()


class BrokerLogs:
    """Moves each broker's captured output into one file per broker, with markers between steps, and
    counts its warnings and errors by kind (numbers masked) with one example each."""

    def __init__(self, directory: Path, brokers: list[Broker]) -> None:
        self.directory = directory
        self.brokers = brokers
        directory.mkdir(parents=True, exist_ok=True)
        self.kinds: dict[str, dict[str, Any]] = {}
        self.read_up_to: dict[int, int] = {}

    def path(self, broker: Broker) -> Path:
        return self.directory / f"broker-{broker.broker_id}.log"

    def _count(self, broker_id: int, line: str) -> None:
        match = _LOG_LINE.match(line)
        if match is not None and match["level"] in _ODD_LEVELS:
            kind = f"{match['level']} {match['logger']}: {_DIGITS.sub('N', match['message'])[:140]}"
        elif line.startswith("Traceback") or (match is None and "Error" in line):
            kind = f"unformatted: {_DIGITS.sub('N', line)[:140]}"
        else:
            return
        entry = self.kinds.setdefault(kind, {"count": 0, "example": f"broker {broker_id}: {line[:400]}"})
        entry["count"] += 1

    def drain(self, marker: str | None = None) -> dict[int, list[str]]:
        """Write out every broker's new output; return it, by broker id."""
        drained: dict[int, list[str]] = {}
        for broker in self.brokers:
            text = broker.log_text()
            lines = text[self.read_up_to.get(broker.broker_id, 0) :].splitlines()
            self.read_up_to[broker.broker_id] = len(text)
            for line in lines:
                self._count(broker.broker_id, line)
            with self.path(broker).open("a") as out:
                if lines:
                    out.write("\n".join(lines) + "\n")
                if marker:
                    out.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} {marker}\n")
            drained[broker.broker_id] = lines
        return drained

    def summary(self) -> list[dict[str, Any]]:
        return [{"kind": kind, **entry} for kind, entry in sorted(self.kinds.items(), key=lambda kv: -kv[1]["count"])]


# -- throughput ---------------------------------------------------------------------------------------


def _dead_broker(cluster: BrokerCluster) -> str | None:
    dead = [b.broker_id for b in cluster.brokers if not b.running]
    return f"broker(s) {dead} exited" if dead else None


def partition_leaders(cluster: BrokerCluster, topic: str) -> dict[int, int]:
    """Partition → leader, from the first broker whose metadata shows every partition of ``topic`` led
    (brokers learn of a new topic through their watch, so one may not know it yet)."""
    seen: dict[int, int] = {}

    def led(md: Any) -> bool:
        found = md.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return False
        seen.clear()
        seen.update({p.id: p.leader for p in found.partitions.values()})
        return all(leader >= 0 for leader in seen.values())

    cluster.wait_for(led, f"{topic} led")
    return dict(seen)


def throughput(cluster: BrokerCluster, topic: str, replication: int, acks: str, seconds: float) -> dict[str, Any]:
    """One producer process into a fresh ``PARTITIONS``-partition topic for ``seconds``."""
    cluster.create_topic(topic, PARTITIONS, replication, **{"min.insync.replicas": MIN_ISR})
    leaders = partition_leaders(cluster, topic)
    group = WorkerGroup(f"produce {topic}", alive_check=lambda: _dead_broker(cluster))
    try:
        group.add(producer_worker, ProduceJob(cluster.bootstrap, topic, acks, {}, RECORD_SIZE, seconds, None))
        group.wait_ready()
        pids = {b.broker_id: b.process.pid for b in cluster.brokers if b.process.pid is not None}
        cpu_before = {i: process_cpu_s(pid) for i, pid in pids.items()}
        machine_before = CpuSample.take()
        began = group.release()
        [result] = group.collect(seconds + 180.0)
        elapsed = time.monotonic() - began
        cpu_after = {i: process_cpu_s(pid) for i, pid in pids.items()}
        machine_after = CpuSample.take()
    finally:
        group.close()
    if result["failed"]:
        raise BenchError(f"{topic}: {result['failed']} records failed: {result['failures']}")
    span = result["end"] - result["start"]
    broker_cores = {
        str(i): round((cpu_after[i] - cpu_before[i]) / elapsed, 2)
        for i in pids
        if cpu_before[i] is not None and cpu_after[i] is not None
    }
    busy = steal = other = None
    if machine_before is not None and machine_after is not None:
        busy, steal = machine_after.cores_since(machine_before)
        other = max(0.0, busy - sum(broker_cores.values()) - result["cpu_s"] / elapsed)
    return {
        "topic": topic,
        "replication_factor": replication,
        "acks": acks,
        "partition_leaders": leaders,
        "records": result["records"],
        "seconds": round(span, 3),
        "mb_per_s": round(result["bytes"] / span / MB, 1),
        "records_per_s": round(result["records"] / span),
        "producer_cpu_cores": round(result["cpu_s"] / span, 2),
        "broker_cpu_cores": broker_cores,
        "machine_busy_cores": None if busy is None else round(busy, 2),
        "steal_cores": None if steal is None else round(steal, 2),
        #: Busy CPU the brokers and the producer do not account for: other users' processes, kernel threads.
        "other_cores": None if other is None else round(other, 2),
        "client_errors": result["client_errors"],
        "librdkafka_stats": result["stats"],
    }


# -- failover -----------------------------------------------------------------------------------------


def failover_producer(bootstrap: str, topic: str, stop: Any, events: Any, debug_log: str | None) -> None:
    """Process entry point: produce one acks=all record at a time to partition 0 until ``stop``.

    Reports batches of ``(produce() time, delivery report time, error or None)`` (monotonic clock,
    shared by every process on the machine) on ``events``. With ``debug_log``, librdkafka's debug
    output (metadata, topic, msg, broker) goes to that file.
    """
    from confluent_kafka import Producer

    client_errors: list[str] = []
    try:
        config = producer_config(bootstrap, "all", {})
        config.update(FAILOVER_PRODUCER)
        if debug_log:
            fd = os.open(debug_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 2)  # librdkafka logs to stderr
            config.update(debug="metadata,topic,msg,broker,protocol", log_level=7)
        config.update(
            {"client.id": "barnabas-bench-failover", "delivery.report.only.error": False},
            error_cb=lambda error: client_errors.append(error.str()) if len(client_errors) < 50 else None,
        )
        producer = Producer(config)
        producer.list_topics(topic, timeout=30)
        events.put(("ready", None))
        pending: list[tuple[float, float, str | None]] = []
        reported = time.monotonic()
        sequence = 0
        while not stop.is_set():
            outcome: list[tuple[float, str | None]] = []

            def on_delivery(error: Any, _message: Any, outcome: list[tuple[float, str | None]] = outcome) -> None:
                outcome.append((time.monotonic(), None if error is None else error.str()))

            sent = time.monotonic()
            producer.produce(topic, b"%d" % sequence, partition=0, on_delivery=on_delivery)
            sequence += 1
            while not outcome and not stop.is_set():
                producer.poll(0.01)
            if outcome:
                pending.append((sent, *outcome[0]))
            if pending and time.monotonic() - reported >= REPORT_EVERY_S:
                events.put(("records", pending))
                pending, reported = [], time.monotonic()
        if pending:
            events.put(("records", pending))
        producer.flush(5)
        events.put(("done", client_errors))
    except Exception as exc:
        events.put(("error", f"{type(exc).__name__}: {exc}"))


class FailoverProducer:
    """The failover producer process, and its delivery reports as they arrive."""

    def __init__(self, bootstrap: str, topic: str, debug_log: str | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop_event = context.Event()
        self.events: Any = context.Queue()
        self.proc = context.Process(
            target=failover_producer, args=(bootstrap, topic, self.stop_event, self.events, debug_log), daemon=True
        )
        self.records: list[tuple[float, float, str | None]] = []
        self.client_errors: list[str] = []
        self.error: str | None = None
        self.changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> FailoverProducer:
        self.proc.start()
        kind, payload = self.events.get(timeout=60)
        if kind != "ready":
            raise BenchError(f"failover producer: {payload}")
        self._reader.start()
        return self

    def _read(self) -> None:
        while True:
            try:
                kind, payload = self.events.get(timeout=0.5)
            except queue.Empty:
                if not self.proc.is_alive():
                    with self.changed:
                        self.error = self.error or f"exited with code {self.proc.exitcode}"
                        self.changed.notify_all()
                    return
                continue
            with self.changed:
                if kind == "records":
                    self.records.extend(payload)
                elif kind == "done":
                    self.client_errors = payload
                elif kind == "error":
                    self.error = payload
                self.changed.notify_all()
            if kind in ("done", "error"):
                return

    def first_success_after(self, moment: float, timeout_s: float) -> tuple[float, float, list[str]]:
        """(produce time, delivery time) of the first record produced after ``moment`` that succeeded,
        and the errors of those produced after ``moment`` that failed before it."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                failed = []
                for sent, done, error in self.records:
                    if sent < moment:
                        continue
                    if error is None:
                        return sent, done, failed
                    failed.append(error)
                if self.error is not None:
                    raise BenchError(f"failover producer: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(f"no successful produce {timeout_s:.0f} s after the kill; errors: {failed[:5]}")
                self.changed.wait(min(left, 0.5))

    def latencies_between(self, start: float, end: float) -> list[float]:
        with self.changed:
            return [done - sent for sent, done, error in self.records if start <= sent < end and error is None]

    def close(self) -> None:
        self.stop_event.set()
        self.proc.join(timeout=15)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        if self._reader.is_alive():
            self._reader.join(timeout=5)


def restart(cluster: BrokerCluster, victim: Broker, timeout_s: float = 60.0) -> int:
    """Start the victim again once its old registration is gone; return how many starts failed."""
    cluster.wait_for(lambda md: victim.broker_id not in md.brokers, f"broker {victim.broker_id} unregistered")
    deadline = time.monotonic() + timeout_s
    failures = 0
    while True:
        try:
            victim.start()
            return failures
        except RuntimeError:
            failures += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def election_times(
    chunks: list[dict[int, list[str]]], victim: int, killed_wall: float
) -> tuple[float | None, float | None, int]:
    """From the broker logs after a kill: seconds from the kill until the controller wrote the new leader
    of partition 0 (``leader <victim> -> <new>``) and until the new leader took over (``leader at epoch``),
    and how many times a follower asked the new leader before it had taken over (it then retries after
    50 ms, and acks=all produces wait for it)."""
    decided = leading = None
    early_asks = 0
    for chunk in chunks:
        for broker_id, lines in chunk.items():
            for line in lines:
                at = log_time(line)
                if at is None or at < killed_wall - 0.01:
                    continue
                if decided is None and f"{FAILOVER_TOPIC}-0: leader {victim} -> " in line:
                    decided = round(at - killed_wall, 3)
                if leading is None and broker_id != victim and f"{FAILOVER_TOPIC}-0: leader at epoch" in line:
                    leading = round(at - killed_wall, 3)
                if f"{FAILOVER_TOPIC}-0: leader " in line and "not_leader_or_follower to OffsetForLeaderEpoch" in line:
                    early_asks += 1
    return decided, leading, early_asks


def wall_clock(moment: float) -> str:
    """``HH:MM:SS.mmm`` local time, as the broker logs print it."""
    return time.strftime("%H:%M:%S", time.localtime(moment)) + f".{int(moment % 1 * 1000):03d}"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def failovers(cluster: BrokerCluster, kills: int, logs: BrokerLogs, debug: bool) -> dict[str, Any]:
    cluster.create_topic(FAILOVER_TOPIC, 1, BROKERS, **{"min.insync.replicas": MIN_ISR})
    debug_log = str(logs.directory / "producer-debug.log") if debug else None
    producer = FailoverProducer(cluster.bootstrap, FAILOVER_TOPIC, debug_log)
    rows: list[dict[str, Any]] = []
    error = None
    try:
        producer.start()
        for index in range(kills):
            healed = time.monotonic()
            producer.first_success_after(healed, FAILOVER_TIMEOUT_S)  # the producer works before the kill
            time.sleep(0.5)
            leader = partition_leaders(cluster, FAILOVER_TOPIC)[0]
            controller = cluster.controller()
            victim = cluster.brokers[leader]
            steady = producer.latencies_between(healed, time.monotonic())
            logs.drain(f"kill {index}: SIGKILL broker {leader} (leader of {FAILOVER_TOPIC}-0, controller {controller})")
            killed_wall = time.time()
            killed = time.monotonic()
            victim.kill()
            sent, done, failed = producer.first_success_after(killed, FAILOVER_TIMEOUT_S)
            failover_s = done - killed
            after_kill = logs.drain(f"kill {index}: first acks=all produce succeeded {failover_s:.3f} s after the kill")
            restart_began = time.monotonic()
            start_failures = restart(cluster, victim)
            restarted = time.monotonic()
            cluster.wait_for(lambda md: cluster.fully_replicated(md, FAILOVER_TOPIC), "ISR full again")
            full = time.monotonic()
            new_leader = partition_leaders(cluster, FAILOVER_TOPIC)[0]
            healed_lines = logs.drain(f"kill {index}: broker {leader} back, ISR full")
            decided, leading, early_asks = election_times([after_kill, healed_lines], leader, killed_wall)
            row = {
                "kill": index,
                "victim": leader,
                "victim_was_controller": leader == controller,
                "killed_at": wall_clock(killed_wall),
                "failover_s": round(failover_s, 4),
                "controller_decided_s": decided,
                "new_leader_leading_s": leading,
                "follower_asked_too_early": early_asks,
                "first_success_produced_after_s": round(sent - killed, 4),
                "failed_deliveries": len(failed),
                "failed_errors": sorted(set(failed))[:5],
                "new_leader": new_leader,
                "unregistered_and_restarted_s": round(restarted - restart_began, 3),
                "restart_failures": start_failures,
                "isr_full_after_restart_s": round(full - restarted, 3),
                "steady_produce_latency_ms_p50": round(statistics.median(steady) * 1000, 2) if steady else None,
            }
            rows.append(row)
            print(
                f"  kill {index + 1}/{kills}: broker {leader}{' (controller)' if row['victim_was_controller'] else ''}"
                f" -> first acks=all produce after {failover_s * 1000:.0f} ms; new leader {new_leader};"
                f" ISR full {full - restarted:.1f} s after restart",
                flush=True,
            )
    except Exception as exc:  # keep the kills measured so far
        error = f"kill {len(rows)}: {type(exc).__name__}: {exc}"
    finally:
        producer.close()
    result: dict[str, Any] = {"kills": len(rows)}
    if error:
        result["error"] = error
    for key in ("failover_s", "controller_decided_s", "new_leader_leading_s", "isr_full_after_restart_s"):
        values = [row[key] for row in rows if row[key] is not None]
        result[key] = distribution(values) if values else None
    result["client_after_takeover_s"] = distribution(
        [row["failover_s"] - row["new_leader_leading_s"] for row in rows if row["new_leader_leading_s"] is not None]
    )
    steady_all = [row["steady_produce_latency_ms_p50"] for row in rows if row["steady_produce_latency_ms_p50"]]
    result["steady_produce_latency_ms_p50"] = round(statistics.median(steady_all), 2) if steady_all else None
    result["victim_was_controller"] = sum(row["victim_was_controller"] for row in rows)
    result["follower_asked_too_early"] = sum(row["follower_asked_too_early"] > 0 for row in rows)
    result["producer_client_errors"] = producer.client_errors[:20]
    result["rows"] = rows
    return result


def distribution(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50": round(percentile(values, 50), 3),
        "p90": round(percentile(values, 90), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
        "mean": round(statistics.fmean(values), 3),
    }


# -- one backend --------------------------------------------------------------------------------------


def run_backend(backend: str, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"backend": backend}
    with (
        tempfile.TemporaryDirectory(prefix=f"barnabas-cluster-bench-{backend}-") as tmp,
        server_for(backend, Path(tmp) / "server") as (url, facts),
    ):
        row["server"] = facts
        (Path(tmp) / "cluster").mkdir()
        row["coordination_url_scheme"] = url.split(":", 1)[0]
        cluster = BrokerCluster(Path(tmp) / "cluster", BROKERS, url, {"min.insync.replicas": MIN_ISR})
        row["broker_properties"] = {**FAST_FAILOVER, "min.insync.replicas": MIN_ISR}
        logs = BrokerLogs(log_dir / backend, cluster.brokers)
        try:
            began = time.monotonic()
            cluster.start()
            row["cluster_start_s"] = round(time.monotonic() - began, 2)
            print(f"{backend}: {BROKERS} brokers up in {row['cluster_start_s']} s", flush=True)
            row["load_before"] = busy_processes(1.0)
            row["rf3_acks_all"] = throughput(cluster, "rf3-acks-all", 3, "all", args.seconds)
            print(f"{backend}: RF 3 acks=all {row['rf3_acks_all']['mb_per_s']} MB/s", flush=True)
            logs.drain("throughput RF 3 acks=all done")
            row["rf1_acks_1"] = throughput(cluster, "rf1-acks-1", 1, "1", args.seconds)
            print(f"{backend}: RF 1 acks=1 {row['rf1_acks_1']['mb_per_s']} MB/s", flush=True)
            logs.drain("throughput RF 1 acks=1 done")
            row["failover"] = failovers(cluster, args.kills, logs, args.producer_debug)
            if "error" in row["failover"]:
                row["error"] = row["failover"]["error"]
            if f := row["failover"]["failover_s"]:
                print(f"{backend}: failover p50 {f['p50']} s, p90 {f['p90']} s, max {f['max']} s", flush=True)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
            print(f"{backend}: FAILED: {row['error']}", flush=True)
        finally:
            cluster.stop()
            logs.drain("cluster stopped")
            row["broker_log_warnings"] = logs.summary()
            row["broker_logs"] = str(logs.directory)
    return row


# -- report -------------------------------------------------------------------------------------------


def _ms(dist: dict[str, float] | None, key: str) -> str:
    return "–" if not dist else f"{dist[key] * 1000:.0f} ms"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Replicated cluster per coordination backend ({result['when']})",
        "",
        f"{BROKERS} local brokers (`python bench/cluster.py`; FAST_FAILOVER settings, min.insync.replicas={MIN_ISR}), "
        f"one librdkafka producer process. Throughput: {PARTITIONS} partitions, 1 KiB records, linger.ms=5, "
        f"1 MiB batches, {result['seconds']:g} s per run, MB/s of record values. Failover: SIGKILL of the leader "
        f"of partition 0 (RF 3), time to the delivery report of the first acks=all record produced after the "
        f"kill that succeeds; {result['kills']} kills per backend, the victim restarted and the ISR full again "
        f"before the next. Machine: {result['machine']['cpu_count']} CPUs, {result['machine']['python']}, "
        f"librdkafka {result['machine']['versions']['librdkafka']}; the whole run took "
        f"{result['duration_s'] / 60:.1f} min.",
        "",
        "| backend | RF3 acks=all MB/s | RF1 acks=1 MB/s | failover p50 | p90 | max | session timeout |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    details = [
        "",
        "Where the failover time goes (from the broker logs; p50 / max over the kills): *controller* is the "
        "controller's write of the new leader (the kill detected), *takeover* the new leader's first "
        "`leader at epoch` line, *client* the rest until the producer's delivery report (librdkafka noticing "
        f"the new leader: its metadata refresh runs every "
        f"{FAILOVER_PRODUCER['topic.metadata.refresh.interval.ms']} ms here, and the new leader's acks=all "
        "waits for a follower). *Follower asked too early*: kills after which a follower sent "
        "OffsetForLeaderEpoch to the new leader before it had taken over, got NOT_LEADER_OR_FOLLOWER and retried "
        "50 ms later. *Other load*: busy cores the brokers and the producer do not account "
        "for (other processes on the machine, the coordination server's included).",
        "",
        "| backend | controller p50 | max | takeover p50 | max | client p50 | max | victim was controller "
        "| follower asked too early | ISR full after restart p50 | acks=all latency, steady "
        "| other load during RF3 / RF1 runs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        rf3 = row.get("rf3_acks_all", {}).get("mb_per_s")
        rf1 = row.get("rf1_acks_1", {}).get("mb_per_s")
        failover = row.get("failover") or {}
        f = failover.get("failover_s")
        timeout = row["broker_properties"]["broker.session.timeout.ms"]
        session = f"{timeout} ms" if row["backend"] != "sqlite" else f"{timeout} ms (unused: flock liveness)"
        rf1_text = "–" if rf1 is None else f"{rf1:.0f}" + (f" (RF3 = {rf3 / rf1:.2f}×)" if rf3 else "")
        lines.append(
            f"| {row['backend']} | {'–' if rf3 is None else f'{rf3:.0f}'} | {rf1_text} "
            f"| {_ms(f, 'p50')} | {_ms(f, 'p90')} | {_ms(f, 'max')} | {session} |"
        )
        if failover:
            c, t, k = (failover.get(key) for key in ("controller_decided_s", "new_leader_leading_s",
                                                      "client_after_takeover_s"))  # fmt: skip
            isr = failover.get("isr_full_after_restart_s")
            steady = failover.get("steady_produce_latency_ms_p50")
            other = " / ".join(
                f"{row[key]['other_cores']:.2f}" if row.get(key, {}).get("other_cores") is not None else "–"
                for key in ("rf3_acks_all", "rf1_acks_1")
            )
            details.append(
                f"| {row['backend']} | {_ms(c, 'p50')} | {_ms(c, 'max')} | {_ms(t, 'p50')} | {_ms(t, 'max')} "
                f"| {_ms(k, 'p50')} | {_ms(k, 'max')} | {failover['victim_was_controller']} of {failover['kills']} "
                f"| {failover['follower_asked_too_early']} of {failover['kills']} | {_ms(isr, 'p50')} "
                f"| {'–' if steady is None else f'{steady:.1f} ms'} | {other} cores |"
            )
    errors = [f"- {row['backend']}: {row['error']}" for row in result["rows"] if "error" in row]
    if errors:
        lines += ["", "Failures:", "", *errors]
    return "\n".join(lines + details) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--kills", type=int, default=20, help="leader kills per backend")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each throughput run")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--log-dir", type=Path, default=None, help="broker logs (default: a new dir under /tmp)")
    parser.add_argument(
        "--producer-debug", action="store_true", help="librdkafka debug log of the failover producer in --log-dir"
    )
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so every broker, server and client process is still stopped by pid.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="barnabas-cluster-bench-logs-"))
    began = time.monotonic()
    rows = []
    for backend in args.backends.split(","):
        print(f"{backend}: starting", flush=True)
        rows.append(run_backend(backend, args, log_dir))
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "duration_s": round(time.monotonic() - began, 1),
        "machine": environment(None),
        "seconds": args.seconds,
        "kills": args.kills,
        "record_size": RECORD_SIZE,
        "partitions": PARTITIONS,
        "failover_producer": FAILOVER_PRODUCER,
        "broker_logs": str(log_dir),
        "rows": rows,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "cluster.json").write_text(json.dumps(result, indent=2, default=str))
    table = markdown(result)
    (args.output / "cluster.md").write_text(table)
    print(table)
    print(f"took {result['duration_s']:.0f} s; broker logs in {log_dir}")
    return 0 if not any("error" in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
