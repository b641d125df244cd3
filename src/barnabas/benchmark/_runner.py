"""One ``barnabas bench`` run: loopback ceiling, produce at each acks, consume everything back.

Rules this module keeps:

- Phases run one after another, never overlapping, in this order per repetition: loopback
  ingress, loopback egress, produce (each acks value × each producer count, one fresh topic
  each), consume (every topic of the repetition). Each measured phase starts with a clean page
  cache: ``os.sync()`` first, its time recorded as the phase's ``settle``.
- Each phase records its CPU use in cores: the broker (from /proc, when its pid is known), a proxy
  node in front of it (compare's ``barnabas-proxy``: ``proxy``, only when there is one), the
  benchmark's client processes (their own CPU clocks), this process, py-spy, kernel threads
  (page writeback, softirqs: partly work done for the broker), the whole machine, steal, and the
  rest ("other": other users' processes on the machine at the time).
- Before consuming, the log end offsets are checked against the records the producers saw
  acknowledged: a mismatch is an error, not a number.
- With ``--profile``, py-spy samples the broker during each produce and consume phase, one
  speedscope file per phase.
- A broker started here lives in a temporary data dir that is deleted afterwards; topics created
  on an existing broker (``--bootstrap``) are deleted at the end.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ._broker import BrokerProcess
from ._loopback import LoopbackJob, loopback_client, loopback_server
from ._phases import WorkerGroup
from ._profiles import PySpyRecorder, find_py_spy, summarise_speedscope
from ._settings import CONSUME_AIM_MB_S, PRODUCE_AIM_MB_S, BenchError, BenchSettings
from ._system import CpuSample, busy_processes, environment, kernel_threads_cpu_s, process_cpu_s
from ._workers import ConsumeJob, ProduceJob, consumer_worker, producer_worker

__all__ = ["run_benchmark"]

MB = 1_000_000
_ADMIN_TIMEOUT_S = 30.0
_REACH_TIMEOUT_S = 15.0
#: "Quiet" for --wait-idle: the machine's busy cores, outside the (idle) broker, at most this.
_QUIET_CORES = 0.3
_CONSUME_IDLE_TIMEOUT_S = 60.0


def _brokers_cpu_s(pids: Sequence[int]) -> float | None:
    """CPU seconds of all broker processes together (a cluster's brokers), None if any is unreadable."""
    if not pids:
        return None
    values = [process_cpu_s(pid) for pid in pids]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


class _CpuMeter:
    """CPU use of the machine and of known processes over one phase, in cores."""

    def __init__(
        self, broker_pids: Sequence[int], py_spy: PySpyRecorder | None, proxy_pids: Sequence[int] = ()
    ) -> None:
        self.broker_pids = tuple(broker_pids)
        self.proxy_pids = tuple(proxy_pids)
        self.py_spy_pid = py_spy.cpu_pid() if py_spy is not None else None
        self.machine = CpuSample.take()
        self.broker = _brokers_cpu_s(self.broker_pids)
        self.proxy = _brokers_cpu_s(self.proxy_pids)
        self.py_spy = process_cpu_s(self.py_spy_pid) if self.py_spy_pid else None
        self.bench = time.process_time()
        self.kernel = kernel_threads_cpu_s()
        self.at = time.monotonic()

    def finish(self, client_cpu_s: float) -> dict[str, float | None]:
        elapsed = max(time.monotonic() - self.at, 1e-9)
        machine = CpuSample.take()

        def delta(before: float | None, pids: Sequence[int]) -> float | None:
            after = _brokers_cpu_s(pids)
            return None if before is None or after is None else (after - before) / elapsed

        broker = delta(self.broker, self.broker_pids)
        proxy = delta(self.proxy, self.proxy_pids)
        py_spy = delta(self.py_spy, (self.py_spy_pid,) if self.py_spy_pid else ())
        bench = (time.process_time() - self.bench) / elapsed
        clients = client_cpu_s / elapsed
        kernel_now = kernel_threads_cpu_s()
        kernel = sum(cpu - self.kernel.get(key, 0.0) for key, cpu in kernel_now.items()) / elapsed
        system = steal = other = None
        if machine is not None and self.machine is not None:
            system, steal = machine.cores_since(self.machine)
            other = max(0.0, system - (broker or 0.0) - (proxy or 0.0) - (py_spy or 0.0) - bench - clients - kernel)
        cores = {
            "broker": broker, "clients": clients, "bench": bench, "py_spy": py_spy,
            "kernel_threads": kernel, "system": system, "steal": steal, "other": other,
        }  # fmt: skip
        if self.proxy_pids:
            cores["proxy"] = proxy
        return {name: None if value is None else round(value, 3) for name, value in cores.items()}


class _Run:
    """The state of one benchmark run (one broker, several repetitions)."""

    def __init__(self, settings: BenchSettings, console: Console, progress: Progress, run_id: str) -> None:
        self.settings = settings
        self.console = console
        self.progress = progress
        self.run_id = run_id
        self.bootstrap = settings.bootstrap or ""
        self.broker: BrokerProcess | None = None
        self.broker_pid = settings.broker_pid
        #: Every broker process whose CPU a phase counts (a cluster has several; see compare).
        self.broker_pids: list[int] = [settings.broker_pid] if settings.broker_pid else []
        #: Proxy nodes in front of the brokers (compare's barnabas-proxy): their CPU is counted apart.
        self.proxy_pids: list[int] = []
        #: Why a system started elsewhere (compare) stopped running, or None; checked by every phase.
        self.system_problem: Callable[[], str | None] = lambda: None
        self.py_spy_exe = find_py_spy() if settings.profile else None
        self.topics: list[str] = []
        self.phases: list[dict[str, Any]] = []

    # -- helpers --------------------------------------------------------------------------

    def _alive_check(self) -> str | None:
        if problem := self.system_problem():
            return problem
        if self.broker is not None and not self.broker.alive():
            assert self.broker.proc is not None
            last = self.broker.last_lines(1)
            return (
                f"the broker exited with code {self.broker.proc.returncode}; its last line: {last[0] if last else '-'}"
            )
        return None

    @contextlib.contextmanager
    def _task(self, description: str, total: float) -> Iterator[TaskID]:
        task = self.progress.add_task(description, total=total, rate="")
        try:
            yield task
        finally:
            self.progress.update(task, visible=False)
            self.progress.remove_task(task)

    @contextlib.contextmanager
    def _profiled(self, phase_id: str) -> Iterator[PySpyRecorder | None]:
        if self.py_spy_exe is None or self.broker_pid is None:
            yield None
            return
        output = self.settings.output / f"profile-{phase_id}.speedscope.json"
        output.unlink(missing_ok=True)
        recorder = PySpyRecorder(
            self.py_spy_exe, self.broker_pid, output, self.settings.profile_rate, self.settings.profile_native
        )
        recorder.start()
        try:
            yield recorder
        finally:
            recorder.stop()

    def wait_quiet(self) -> dict[str, float]:
        """Wait up to --wait-idle seconds for other processes to leave the CPU; what was seen."""
        waited = 0.0
        busy = 0.0
        while True:
            before, broker = CpuSample.take(), process_cpu_s(self.broker_pid) if self.broker_pid else None
            time.sleep(1.0)
            after, broker2 = CpuSample.take(), process_cpu_s(self.broker_pid) if self.broker_pid else None
            if before is None or after is None:
                return {}
            busy = after.cores_since(before)[0] - ((broker2 or 0.0) - (broker or 0.0))
            waited += 1.0
            if busy <= _QUIET_CORES or waited >= self.settings.wait_idle_s:
                return {"waited_s": waited, "busy_cores": round(busy, 2)}

    def _phase_id(self, rep: int, name: str) -> str:
        return name if self.settings.runs == 1 else f"r{rep + 1}-{name}"

    # -- broker and topics ----------------------------------------------------------------

    def start_broker(self, data_dir: Path) -> None:
        if self.settings.bootstrap is not None:
            return
        with self._task("starting broker", 1):
            self.broker = BrokerProcess(data_dir, self.settings.broker_settings).start()
        self.bootstrap = self.broker.bootstrap
        self.broker_pid = self.broker.pid
        self.broker_pids = [self.broker.pid]

    def _client_config(self) -> dict[str, Any]:
        # librdkafka logs connection failures to stderr itself; errors reach us as exceptions.
        return {"bootstrap.servers": self.bootstrap, "log_level": 0}

    def check_reachable(self) -> None:
        """Raise BenchError unless the bootstrap broker answers a Metadata request."""
        try:
            AdminClient(self._client_config()).list_topics(timeout=_REACH_TIMEOUT_S)
        except KafkaException as exc:
            raise BenchError(f"cannot reach {self.bootstrap}: {exc.args[0].str()}") from None

    def create_topic(self, name: str) -> None:
        admin = AdminClient(self._client_config())
        topic = NewTopic(name, num_partitions=self.settings.partitions, replication_factor=-1)
        try:
            admin.create_topics([topic], operation_timeout=_ADMIN_TIMEOUT_S)[name].result(_ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise BenchError(f"cannot create topic {name}: {exc.args[0].str()}") from None
        except TimeoutError:
            raise BenchError(f"cannot create topic {name}: no answer within {_ADMIN_TIMEOUT_S:.0f} s") from None
        self.topics.append(name)

    def delete_topics(self) -> None:
        if self.settings.bootstrap is None or not self.topics:
            return
        admin = AdminClient(self._client_config())
        for future in admin.delete_topics(self.topics, operation_timeout=_ADMIN_TIMEOUT_S).values():
            with contextlib.suppress(Exception):
                future.result(_ADMIN_TIMEOUT_S)

    def offsets(self, topic: str) -> list[tuple[int, int, int]]:
        """(partition, log start, log end) of every partition of ``topic``."""
        consumer = Consumer({**self._client_config(), "group.id": "barnabas-bench-offsets"})
        try:
            metadata = consumer.list_topics(topic, timeout=_ADMIN_TIMEOUT_S)
            partitions = sorted(metadata.topics[topic].partitions)
            out = []
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=_ADMIN_TIMEOUT_S)
                out.append((p, low, high))
            return out
        except KafkaException as exc:
            raise BenchError(f"cannot read the offsets of {topic}: {exc.args[0].str()}") from None
        finally:
            consumer.close()

    # -- phases ---------------------------------------------------------------------------

    def loopback(self, rep: int, direction: str) -> dict[str, Any]:
        settings = self.settings
        context = WorkerGroup("loopback").context
        ports, results = context.Queue(), context.Queue()
        job = LoopbackJob(direction, settings.record_size, settings.loopback_s, settings.loopback_in_flight)
        server = context.Process(target=loopback_server, args=(job, ports, results), daemon=True)
        client = None
        label = f"loopback {direction} ({'client → server' if direction == 'ingress' else 'server → client'})"
        try:
            with self._task(label, settings.loopback_s) as task:
                server.start()
                port = ports.get(timeout=30)
                meter = _CpuMeter((), None)
                client = context.Process(target=loopback_client, args=(job, port, results), daemon=True)
                started = time.monotonic()
                client.start()
                got: dict[str, dict[str, Any]] = {}
                deadline = started + settings.loopback_s + 60
                while len(got) < 2:
                    self.progress.update(task, completed=min(time.monotonic() - started, settings.loopback_s))
                    with contextlib.suppress(Exception):
                        item = results.get(timeout=0.25)
                        got[item["role"]] = item
                    if time.monotonic() > deadline or (client.exitcode not in (None, 0)):
                        raise BenchError(f"{label}: the client failed (exit code {client.exitcode})")
                measured = got["client"]
                cpu = meter.finish(measured["cpu_s"] + got["server"]["cpu_s"])
        finally:
            for proc in (client, server):
                if proc is not None and proc.pid is not None:
                    proc.join(timeout=10)
                    if proc.is_alive():
                        proc.kill()
                        proc.join()
        seconds = measured["seconds"]
        return {
            "kind": "loopback",
            "name": f"loopback {direction}",
            "rep": rep,
            "direction": direction,
            "in_flight": settings.loopback_in_flight,
            "frame_bytes": measured["frame_bytes"],
            "frames": measured["frames"],
            "bytes": measured["bytes"],
            "wire_bytes": measured["wire_bytes"],
            "seconds": round(seconds, 3),
            "mb_per_s": round(measured["bytes"] / seconds / MB, 1),
            "wire_mb_per_s": round(measured["wire_bytes"] / seconds / MB, 1),
            "cpu": cpu,
        }

    def produce(self, rep: int, acks: str, producers: int) -> dict[str, Any]:
        settings = self.settings
        topic = f"bench-{self.run_id}-r{rep + 1}-acks{acks}-x{producers}"
        self.create_topic(topic)
        group = WorkerGroup(f"produce acks={acks} ×{producers}", self._alive_check)
        record_size = settings.record_size
        try:
            for index in range(producers):
                share = None
                if settings.records is not None:
                    share = settings.records // producers + (index < settings.records % producers)
                duration = None if settings.records is not None else settings.duration_s
                job = ProduceJob(self.bootstrap, topic, acks, settings.producer_overrides, record_size, duration, share)
                group.add(producer_worker, job)
            total = float(settings.records) if settings.records is not None else settings.duration_s
            with self._task(f"produce acks={acks}, {producers} producer(s)", total) as task:
                group.wait_ready()
                # py-spy attaches (and the CPU meter starts) before the workers are released.
                with self._profiled(self._phase_id(rep, f"produce-acks{acks}-x{producers}")) as recorder:
                    meter = _CpuMeter(self.broker_pids, recorder, self.proxy_pids)
                    began = group.release()

                    def tick() -> None:
                        elapsed = max(time.monotonic() - began, 1e-9)
                        done = group.progress()
                        position = done if settings.records is not None else min(elapsed, settings.duration_s)
                        self.progress.update(
                            task, completed=position, rate=f"{done * record_size / elapsed / MB:7.1f} MB/s"
                        )

                    results = group.collect(settings.duration_s * 4 + 120 if settings.records is None else 3600, tick)
                    cpu = meter.finish(sum(r["cpu_s"] for r in results))
                    profile = self._profile_summary(recorder)
        finally:
            group.close()
        failed = sum(r["failed"] for r in results)
        if failed:
            first = next(f for r in results for f in r["failures"])
            raise BenchError(f"produce acks={acks}: {failed} records failed: {first}")
        records = sum(r["records"] for r in results)
        span = max(r["end"] for r in results) - min(r["start"] for r in results)
        nbytes = sum(r["bytes"] for r in results)
        return {
            "kind": "produce",
            "name": f"produce acks={acks} ×{producers}",
            "rep": rep,
            "topic": topic,
            "acks": acks,
            "producers": producers,
            "partitions": settings.partitions,
            "records": records,
            "bytes": nbytes,
            "seconds": round(span, 3),
            "mb_per_s": round(nbytes / span / MB, 1),
            "records_per_s": round(records / span),
            "cpu": cpu,
            "workers": [
                {
                    "records": r["records"],
                    "seconds": round(r["end"] - r["start"], 3),
                    "flush_seconds": round(r["end"] - r["produced"], 3),
                    "cpu_s": round(r["cpu_s"], 2),
                    "client_errors": r["client_errors"],
                    "librdkafka": r["stats"],
                }
                for r in results
            ],
            "profile": profile,
        }

    def consume(self, rep: int, produced: list[dict[str, Any]], trust_end_offsets: bool = True) -> dict[str, Any]:
        """Read back every record of ``produced``'s topics.

        With ``trust_end_offsets`` the log end offsets must equal the acknowledged counts and bound
        each consumer; without (compare: the same method for every system) consumers read from the
        beginning until together they have seen every acknowledged record, and the end offsets are
        only reported (``end_offsets``: what ListOffsets said against what was acknowledged).
        """
        settings = self.settings
        partitions: list[tuple[str, int, int, int]] = []
        end_offsets = []
        for phase in produced:
            offsets = self.offsets(phase["topic"])
            stored = sum(high - low for _, low, high in offsets)
            end_offsets.append({"topic": phase["topic"], "listed": stored, "acknowledged": phase["records"]})
            if trust_end_offsets:
                if stored != phase["records"]:
                    raise BenchError(
                        f"{phase['topic']} holds {stored} records but the producers saw {phase['records']} acknowledged"
                    )
                partitions += [(phase["topic"], p, low, high) for p, low, high in offsets if high > low]
            else:
                partitions += [(phase["topic"], p, OFFSET_BEGINNING, -1) for p, _, _ in offsets]
        if trust_end_offsets:
            expected = sum(high - low for _, _, low, high in partitions)
        else:
            expected = sum(phase["records"] for phase in produced)
        consumers = min(settings.consumers, max(len(partitions), 1))
        group = WorkerGroup(f"consume ×{consumers}", self._alive_check)
        stop = None if trust_end_offsets else group.context.Event()
        record_size = settings.record_size
        try:
            for index in range(consumers):
                assignment = partitions[index::consumers]
                job = ConsumeJob(
                    self.bootstrap, assignment, settings.consumer_overrides, record_size, _CONSUME_IDLE_TIMEOUT_S, stop
                )
                group.add(consumer_worker, job)
            with self._task(f"consume, {consumers} consumer(s)", expected) as task:
                group.wait_ready()
                # py-spy attaches (and the CPU meter starts) before the workers are released.
                with self._profiled(self._phase_id(rep, f"consume-x{consumers}")) as recorder:
                    meter = _CpuMeter(self.broker_pids, recorder, self.proxy_pids)
                    began = group.release()

                    def tick() -> None:
                        done = group.progress()
                        elapsed = max(time.monotonic() - began, 1e-9)
                        self.progress.update(
                            task, completed=done, rate=f"{done * record_size / elapsed / MB:7.1f} MB/s"
                        )
                        if stop is not None and done >= expected:
                            stop.set()

                    results = group.collect(3600, tick)
                    cpu = meter.finish(sum(r["cpu_s"] for r in results))
                    profile = self._profile_summary(recorder)
        finally:
            group.close()
        records = sum(r["records"] for r in results)
        if records < expected or (not trust_end_offsets and records != expected):
            raise BenchError(f"consume: read {records} of {expected} acknowledged records")
        span = max(r["end"] for r in results) - min(r["start"] for r in results)
        nbytes = sum(r["bytes"] for r in results)
        return {
            "kind": "consume",
            "name": f"consume ×{consumers}",
            "rep": rep,
            "topics": [p["topic"] for p in produced],
            "consumers": consumers,
            "partitions": len(partitions),
            "records": records,
            "acknowledged": sum(phase["records"] for phase in produced),
            "end_offsets": end_offsets,
            "bytes": nbytes,
            "seconds": round(span, 3),
            "mb_per_s": round(nbytes / span / MB, 1),
            "records_per_s": round(records / span),
            "cpu": cpu,
            "workers": [
                {
                    "records": r["records"],
                    "seconds": round(r["end"] - r["start"], 3),
                    "cpu_s": round(r["cpu_s"], 2),
                    "client_errors": r["client_errors"],
                    "librdkafka": r["stats"],
                }
                for r in results
            ],
            "profile": profile,
        }

    def _profile_summary(self, recorder: PySpyRecorder | None) -> dict[str, Any] | None:
        if recorder is None:
            return None
        path = recorder.stop()
        if path is None:
            raise BenchError(f"py-spy wrote no profile to {recorder.output}")
        return summarise_speedscope(path, recorder.seconds)

    # -- the whole run --------------------------------------------------------------------

    def _settle(self) -> dict[str, float]:
        """Before a measured phase: write back every dirty page, then wait for a quiet CPU if asked.

        Without the sync, the gigabytes one phase (or the system before) left dirty are written
        back during the next and throttle its writers: back-to-back runs of one broker fell from
        640 to 310 MB/s that way. Every phase now starts with a clean page cache.
        """
        with self._task("writing back dirty pages (sync)", 1):
            began = time.monotonic()
            os.sync()
            settled: dict[str, float] = {"disk_sync_s": round(time.monotonic() - began, 2)}
        if self.settings.wait_idle_s > 0:
            with self._task("waiting for a quiet machine", self.settings.wait_idle_s):
                settled.update(self.wait_quiet())
        return settled

    def repetition(self, rep: int) -> None:
        settings = self.settings
        ceiling: dict[str, float] = {}
        if not settings.skip_loopback:
            for direction in ("ingress", "egress"):
                quiet = self._settle()
                phase = self.loopback(rep, direction)
                phase["settle"] = quiet
                ceiling[direction] = phase["mb_per_s"]
                self.phases.append(phase)
        produced = []
        for acks in settings.acks:
            for producers in settings.producers:
                quiet = self._settle()
                phase = self.produce(rep, acks, producers)
                phase["settle"] = quiet
                if "ingress" in ceiling:
                    phase["ratio_to_ceiling"] = round(phase["mb_per_s"] / ceiling["ingress"], 3)
                _cpu_per_mb(phase)
                self.phases.append(phase)
                produced.append(phase)
        if not settings.skip_consume and produced:
            quiet = self._settle()
            phase = self.consume(rep, produced)
            phase["settle"] = quiet
            _cpu_per_mb(phase)
            if "egress" in ceiling:
                phase["ratio_to_ceiling"] = round(phase["mb_per_s"] / ceiling["egress"], 3)
            if "ingress" in ceiling:
                phase["ratio_to_ingress_ceiling"] = round(phase["mb_per_s"] / ceiling["ingress"], 3)
            self.phases.append(phase)


def _cpu_per_mb(phase: dict[str, Any]) -> None:
    """Add CPU milliseconds per MB moved: less sensitive to other load than the rate itself."""
    for who in ("broker", "clients"):
        cores = phase["cpu"].get(who)
        if cores is not None and phase["mb_per_s"] > 0:
            phase[f"{who}_cpu_ms_per_mb"] = round(cores / phase["mb_per_s"] * 1000, 2)


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def summarise(phases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per distinct phase name: the spread over repetitions of its rates and CPU use."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for phase in phases:
        rows.setdefault(phase["name"], []).append(phase)
    out = []
    for name, group in rows.items():
        first = group[0]
        row: dict[str, Any] = {"name": name, "kind": first["kind"], "runs": len(group)}
        row["mb_per_s"] = _spread([p["mb_per_s"] for p in group])
        if "records_per_s" in first:
            row["records_per_s"] = _spread([p["records_per_s"] for p in group])
        if all("ratio_to_ceiling" in p for p in group):
            row["ratio_to_ceiling"] = _spread([p["ratio_to_ceiling"] for p in group])
        for key in ("broker_cpu_ms_per_mb", "clients_cpu_ms_per_mb"):
            values = [p[key] for p in group if p.get(key) is not None]
            if values:
                row[key] = _spread(values)
        for key in ("broker", "clients", "kernel_threads", "other", "steal"):
            values = [p["cpu"][key] for p in group if p["cpu"].get(key) is not None]
            if values:
                row[f"{key}_cores"] = _spread(values)
        if first["kind"] == "produce":
            row["aim_mb_per_s"] = PRODUCE_AIM_MB_S
        elif first["kind"] == "consume":
            row["aim_mb_per_s"] = CONSUME_AIM_MB_S
        if "aim_mb_per_s" in row:
            row["aim_met"] = row["mb_per_s"]["median"] >= row["aim_mb_per_s"]
        out.append(row)
    return out


def _headline(summary: list[dict[str, Any]]) -> dict[str, Any]:
    """The best median per kind (and per acks for produce): what the aims are judged on."""

    def best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not rows:
            return None
        top = max(rows, key=lambda r: r["mb_per_s"]["median"])
        return {"phase": top["name"], "mb_per_s": top["mb_per_s"], "ratio_to_ceiling": top.get("ratio_to_ceiling")}

    produce = [r for r in summary if r["kind"] == "produce"]
    headline: dict[str, Any] = {
        "loopback_ingress": best([r for r in summary if r["name"] == "loopback ingress"]),
        "loopback_egress": best([r for r in summary if r["name"] == "loopback egress"]),
        "consume": best([r for r in summary if r["kind"] == "consume"]),
    }
    for acks in sorted({r["name"].split("acks=")[1].split()[0] for r in produce}):
        headline[f"produce_acks_{acks}"] = best([r for r in produce if f"acks={acks} " in r["name"]])
    return headline


def run_benchmark(settings: BenchSettings, console: Console | None = None) -> dict[str, Any]:
    """Run the benchmark and return the report (written by the caller with ``write_report``).

    Raises:
        BenchError: the broker, a client or a check failed; the message is one line.
    """
    try:
        return _run_benchmark(settings, console)
    except (BenchError, KeyboardInterrupt):
        raise
    except Exception as exc:
        # Anything else is still one line for the command; the cause stays chained.
        raise BenchError(f"{type(exc).__name__}: {exc}") from exc


def _run_benchmark(settings: BenchSettings, console: Console | None) -> dict[str, Any]:
    settings.validate()
    console = console or Console(stderr=True)
    settings.output.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    began = time.monotonic()
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
        console=console, disable=not settings.show_progress, refresh_per_second=2,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="barnabas-bench-") as scratch:
        data_dir = Path(scratch) / "data"
        with progress:
            with contextlib.ExitStack() as cleanup:
                task = progress.add_task("checking machine load", total=1, rate="")
                load_before = busy_processes(1.0)
                progress.remove_task(task)
                run = _Run(settings, console, progress, run_id)
                cleanup.callback(lambda: run.broker.stop() if run.broker else None)
                run.start_broker(data_dir)
                run.check_reachable()
                cleanup.callback(run.delete_topics)
                for rep in range(settings.runs):
                    run.repetition(rep)
            load_after = busy_processes(1.0)
        env = environment(data_dir.parent if settings.bootstrap is None else None)
    env["load_before"] = load_before
    env["load_after"] = load_after
    summary = summarise(run.phases)
    settings_out = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items()}
    settings_out["bootstrap"] = settings.bootstrap or "started by the benchmark"
    return {
        "schema": 1,
        "run_id": run_id,
        "started_at": started_at,
        "seconds": round(time.monotonic() - began, 1),
        "units": {"mb_per_s": "10^6 bytes of record values per second", "cores": "CPU-seconds per second"},
        "aims": {"produce_mb_per_s": PRODUCE_AIM_MB_S, "consume_mb_per_s": CONSUME_AIM_MB_S},
        "settings": settings_out,
        "environment": env,
        "headline": _headline(summary),
        "summary": summary,
        "phases": run.phases,
    }
