"""``barnabas bench compare``: barnabas (direct and through its proxy), Apache Kafka and Tansu side by side in one run.

Rules this module keeps:

- One run on one machine: each system in turn — started, measured, stopped, its data deleted —
  so no two systems ever run at the same time, then the limits (loopback ceiling both ways, the
  disk's write bandwidth), last so that no system runs in the disk measurement's wake. Every
  performance claim is a ratio of figures from this run.
- Every system gets the same clients and settings (``barnabas bench``'s librdkafka producer and
  consumer processes; ``_latency``; ``_metadata_probe``), the same topics (``partitions`` each,
  replication factor = brokers up to 3) and the same checks.
- Consumers read from the beginning until every acknowledged record has been seen (the brokers'
  end offsets are reported, not trusted: Tansu's under-report); a count that differs is an error.
  In a latency run, records still missing 10 s after the consumers last saw one are counted as
  undelivered, left out of the percentiles and named in the report.
- Latency runs at fixed fractions (``latency_loads``) of the system's own acks=1 produce rate
  measured just before, so each system is compared at the same relative load. The exception is
  barnabas through its proxy: it runs at the direct barnabas's rates of this run (when barnabas
  ran before it), so that proxy − direct is the latency the proxy adds at the same offered load.
  Then latency runs at the same fixed rates for every system (``latency_rates``, records/s), with
  one producer and one consumer process: light loads where the machine is not the bottleneck, so
  what a system (or the proxy) adds shows.
- barnabas through its proxy (``barnabas-proxy``) is the same cluster with one proxy node in front,
  clients bootstrapping from the proxy only; every phase reports the proxy's CPU apart from the
  brokers'. Its first phase, before anything else touched the proxy, is the ``connections`` probe
  (``_connection_probe``): the proxy's memory per client connection.
- A system that fails is recorded with its one-line reason and the run goes on with the others;
  a combination that cannot be measured (``_systems.not_applicable``) is recorded as n/a.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ._connection_probe import measure_connection_memory
from ._disk import measure_disk
from ._kafka import find_kafka_lib
from ._latency import Histogram, LatencyJob, PacedProduceJob, latency_consumer_worker, paced_producer_worker
from ._metadata_probe import MetadataJob, metadata_worker
from ._names import CLUSTER_WORKLOADS, PRODUCTS, PROXIED, WORKLOADS
from ._phases import WorkerGroup
from ._runner import _CpuMeter, _Run
from ._settings import BenchError, BenchSettings
from ._system import busy_processes, environment
from ._systems import RunningSystem, SystemSpec, build_system, not_applicable

__all__ = ["WORKLOADS", "CompareSettings", "run_compare"]

MB = 1_000_000
_ADMIN_TIMEOUT_S = 60.0
_TOPIC_READY_TIMEOUT_S = 180.0
#: A latency run ends this long after its consumers last saw a record, even if some are missing.
_STALL_S = 10.0
_IDLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CompareSettings:
    """One ``barnabas bench compare`` invocation."""

    output: Path = Path("bench/results/compare")
    systems: tuple[str, ...] = PRODUCTS
    brokers: tuple[int, ...] = (1, 3)
    workloads: tuple[str, ...] = WORKLOADS
    produce_s: float = 10.0
    #: Times the consume phase reads the same records; the median round is reported (one round
    #: swung by ±10 % between runs on the 2-core VM, more than the systems differed).
    consume_rounds: int = 3
    #: An unreported acks=1 produce run first on every system (JIT compilation, page cache, connections),
    #: and as long of untimed Metadata requests before the timed ones.
    warmup_s: float = 3.0
    latency_s: float = 10.0
    latency_loads: tuple[float, ...] = (0.1, 0.5, 0.8)
    #: Records/s of the fixed-rate latency runs, the same for every system.
    latency_rates: tuple[int, ...] = (2000,)
    metadata_s: float = 5.0
    metadata_partitions: int = 1000
    #: Client connections the ``connections`` workload opens to a proxy node at once.
    proxy_connections: int = 200
    record_size: int = 1024
    partitions: int = 4
    producers: int = 2
    consumers: int = 2
    loopback_s: float = 4.0
    disk_s: float = 3.0
    skip_limits: bool = False
    kafka_lib: Path | None = None
    barnabas_settings: tuple[str, ...] = ()
    show_progress: bool = True
    #: Before each measured phase, wait up to this long for other processes to leave the CPU.
    wait_idle_s: float = 0.0

    def validate(self) -> None:
        """Raise BenchError for settings that cannot be measured."""
        if not self.systems or any(s not in PRODUCTS for s in self.systems):
            raise BenchError(f"--systems takes {', '.join(PRODUCTS)}")
        if not self.brokers or any(b not in (1, 3) for b in self.brokers):
            raise BenchError("--brokers takes 1 and 3")
        if not self.workloads or any(w not in WORKLOADS for w in self.workloads):
            raise BenchError(f"--workloads takes {', '.join(WORKLOADS)}")
        for needs in ("consume", "latency"):
            if needs in self.workloads and "produce" not in self.workloads:
                raise BenchError(f"the {needs} workload needs produce (it reads, or runs at a share of, its rate)")
        positive = {
            "--produce-seconds": self.produce_s, "--latency-seconds": self.latency_s,
            "--metadata-seconds": self.metadata_s, "--loopback-seconds": self.loopback_s,
            "--disk-seconds": self.disk_s,
        }  # fmt: skip
        for flag, value in positive.items():
            if value <= 0:
                raise BenchError(f"{flag} must be positive")
        if self.warmup_s < 0:
            raise BenchError("--warmup-seconds must not be negative")
        if self.wait_idle_s < 0:
            raise BenchError("--wait-idle must not be negative")
        if not self.latency_loads or any(not 0 < load <= 1 for load in self.latency_loads):
            raise BenchError("--latency-loads are fractions in (0, 1]")
        if any(rate <= 0 for rate in self.latency_rates):
            raise BenchError("--latency-rates are records per second, each positive")
        for flag, count in {
            "--partitions": self.partitions, "--producers": self.producers, "--consumers": self.consumers,
            "--consume-rounds": self.consume_rounds, "--metadata-partitions": self.metadata_partitions,
            "--record-size": self.record_size, "--proxy-connections": self.proxy_connections,
        }.items():  # fmt: skip
            if count <= 0:
                raise BenchError(f"{flag} must be positive")
        if self.record_size < 8:
            raise BenchError("--record-size must be at least 8 (latency records carry their send time)")

    def specs(self) -> list[SystemSpec]:
        """The systems in the order they run: every product on one broker (in ``--systems`` order), then on three.

        The order matters on a disk with burst credit (cloud and VM volumes): the system that
        writes first may find more of it. Running twice with the order reversed shows how much.
        """
        return [SystemSpec(p, b) for b in sorted(self.brokers) for p in dict.fromkeys(self.systems)]


class _Compare:
    """The state of one compare run."""

    def __init__(self, settings: CompareSettings, console: Console, progress: Progress, scratch: Path) -> None:
        self.settings = settings
        self.console = console
        self.progress = progress
        self.scratch = scratch
        self.run_id = time.strftime("%Y%m%d-%H%M%S")
        self.kafka_lib = find_kafka_lib(settings.kafka_lib) if "kafka" in settings.systems else None
        self.limits: dict[str, Any] = {}
        self.systems: dict[str, dict[str, Any]] = {}

    @contextlib.contextmanager
    def _task(self, description: str, total: float | None = None) -> Iterator[TaskID]:
        task = self.progress.add_task(description, total=total, rate="")
        try:
            yield task
        finally:
            self.progress.remove_task(task)

    def _bench_settings(self) -> BenchSettings:
        s = self.settings
        return BenchSettings(
            output=s.output, bootstrap="(set per system)", duration_s=s.produce_s, record_size=s.record_size,
            partitions=s.partitions, producers=(s.producers,), consumers=s.consumers, acks=("1", "all"),
            loopback_s=s.loopback_s, show_progress=s.show_progress, wait_idle_s=s.wait_idle_s,
        )  # fmt: skip

    # -- limits ---------------------------------------------------------------------------

    def measure_limits(self) -> None:
        run = _Run(self._bench_settings(), self.console, self.progress, self.run_id)
        for direction in ("ingress", "egress"):
            phase = run.loopback(0, direction)
            self.limits[f"loopback_{direction}"] = phase
        with self._task(f"disk write bandwidth ({self.settings.disk_s:.0f} s plain, then with fsync)"):
            self.limits["disk"] = measure_disk(self.scratch / "disk", self.settings.disk_s)

    # -- one system -----------------------------------------------------------------------

    def measure_system(self, spec: SystemSpec) -> None:
        entry: dict[str, Any] = {"key": spec.key, "label": spec.label, "product": spec.product, "brokers": spec.brokers}
        self.systems[spec.key] = entry
        if reason := not_applicable(spec):
            entry.update(status="n/a", reason=reason)
            return
        base = self.scratch / spec.key
        system = build_system(spec, base, self.kafka_lib, self.settings.barnabas_settings)
        try:
            with self._task(f"{spec.label}: starting"):
                began = time.monotonic()
                system.start()
            entry.update(version=system.version, start_s=round(time.monotonic() - began, 1), status="ok")
            entry["phases"] = self._workloads(spec, system)
        except BenchError as exc:
            entry.update(status="failed", reason=str(exc))
        except Exception as exc:  # a client library error: still one system's failure, not the run's
            entry.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
        finally:
            with self._task(f"{spec.label}: stopping"):
                system.stop()
                shutil.rmtree(base, ignore_errors=True)

    def _workloads(self, spec: SystemSpec, system: RunningSystem) -> dict[str, Any]:
        settings = self.settings
        bench = self._bench_settings()
        run = _Run(bench, self.console, self.progress, f"{self.run_id}-{spec.key}")
        run.bootstrap = system.bootstrap
        run.proxy_pids = list(system.proxy_pids)
        run.broker_pids = [pid for pid in system.pids if pid not in run.proxy_pids]
        run.system_problem = system.problem
        phases: dict[str, Any] = {}
        workloads = [w for w in settings.workloads if spec.brokers == 1 or w in CLUSTER_WORKLOADS]
        produced = []
        if "connections" in workloads and run.proxy_pids:
            # First: on a fresh proxy, growth of its RSS is the connections' (see _connection_probe).
            with self._task(f"{spec.label}: {settings.proxy_connections} client connections to the proxy"):
                phases["connections"] = measure_connection_memory(
                    run.proxy_pids[0], system.bootstrap, settings.proxy_connections
                )
        if settings.warmup_s > 0:
            warm = replace(bench, duration_s=settings.warmup_s)
            warmup = _Run(warm, self.console, self.progress, f"{self.run_id}-{spec.key}-warmup")
            warmup.bootstrap, warmup.system_problem = system.bootstrap, system.problem
            warmup.broker_pids, warmup.proxy_pids = run.broker_pids, run.proxy_pids
            phase = warmup.produce(0, "1", settings.producers)
            phases["warmup"] = {**phase, "kind": "warmup", "name": "warm-up (not compared)"}
            run.topics += warmup.topics
        if "produce" in workloads:
            for acks in ("1", "all"):
                quiet = run._settle()
                phase = {**run.produce(0, acks, settings.producers), "name": f"produce acks={acks}"}
                phases[f"produce_acks_{acks}"] = {**phase, "settle": quiet}
                produced.append(phase)
        if "consume" in workloads:
            rounds = []
            for _ in range(settings.consume_rounds):
                quiet = run._settle()
                rounds.append({**run.consume(0, produced, trust_end_offsets=False), "settle": quiet})
            median = sorted(rounds, key=lambda r: r["mb_per_s"])[(len(rounds) - 1) // 2]
            phases["consume"] = {**median, "name": "consume", "rounds_mb_per_s": [r["mb_per_s"] for r in rounds]}
        with self._task(f"{spec.label}: deleting topics"):
            _delete_topics(system.bootstrap, run.topics)
        if "latency" in workloads:
            max_rate, rate_of = self._latency_basis(spec, phases)
            for load in settings.latency_loads:
                quiet = run._settle()
                phase = self.latency(spec, system, run, load * max_rate, load)
                phases[f"latency_{round(load * 100)}"] = {**phase, "rate_of": rate_of, "settle": quiet}
            for rate in settings.latency_rates:
                quiet = run._settle()
                phase = self.latency(spec, system, run, rate)
                phases[f"latency_rate_{rate}"] = {**phase, "settle": quiet}
        if "metadata" in workloads:
            quiet = run._settle()
            phases["metadata"] = {**self.metadata(spec, system, run), "settle": quiet}
        return phases

    def _latency_basis(self, spec: SystemSpec, phases: dict[str, Any]) -> tuple[float, str]:
        """(acks=1 records/s the latency loads are shares of, whose rate it is): see the module rules."""
        proxied, direct = PROXIED
        if spec.product == proxied:
            measured = self.systems.get(SystemSpec(direct, spec.brokers).key, {})
            rate = (measured.get("phases") or {}).get("produce_acks_1", {}).get("records_per_s")
            if rate:
                return rate, measured["label"]
        return phases["produce_acks_1"]["records_per_s"], spec.label

    def _create(self, bootstrap: str, topic: str, partitions: int, replication: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        try:
            future = admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
                operation_timeout=_ADMIN_TIMEOUT_S,
            )[topic]
            future.result(_ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise BenchError(f"cannot create topic {topic}: {exc.args[0].str()}") from None
        deadline = time.monotonic() + _TOPIC_READY_TIMEOUT_S
        while True:
            found = admin.list_topics(topic, timeout=_ADMIN_TIMEOUT_S).topics.get(topic)
            led = 0 if found is None or found.error else sum(p.leader >= 0 for p in found.partitions.values())
            if led == partitions:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"{topic}: {led} of {partitions} partitions have a leader after 3 minutes")
            time.sleep(0.1)

    def latency(
        self, spec: SystemSpec, system: RunningSystem, run: _Run, rate: float, load: float | None = None
    ) -> dict[str, Any]:
        """Paced producers at ``rate`` records/s, consumers timing every record; ``load`` is the share of
        the max that rate is, None for a fixed rate."""
        settings = self.settings
        at = f"{load:.0%}" if load is not None else f"{round(rate):,} records/s"
        topic = f"latency-{self.run_id}-{spec.key}-{round(load * 100) if load is not None else f'r{round(rate)}'}"
        self._create(system.bootstrap, topic, settings.partitions, min(spec.brokers, 3))
        consumers = WorkerGroup(f"latency consumers at {at}", run._alive_check)
        producers = WorkerGroup(f"paced producers at {at}", run._alive_check)
        stop = consumers.context.Event()
        warmup_s = min(1.0, settings.latency_s * 0.2)
        label = f"{spec.label}: end-to-end latency at {at} ({rate * settings.record_size / MB:,.1f} MB/s)"
        try:
            # A fixed (light) rate takes one producer and one consumer process: on a small machine more
            # clients than that keep the cores busy and turn every extra hop into scheduling delay.
            producer_count = settings.producers if load is not None else 1
            count = min(settings.consumers if load is not None else 1, settings.partitions)
            for index in range(count):
                mine = list(range(settings.partitions))[index::count]
                job = LatencyJob(
                    system.bootstrap, topic, mine, settings.record_size, warmup_s, _IDLE_TIMEOUT_S, {}, stop
                )
                consumers.add(latency_consumer_worker, job)
            for _ in range(producer_count):
                share = rate / producer_count
                producers.add(
                    paced_producer_worker,
                    PacedProduceJob(system.bootstrap, topic, share, settings.latency_s, settings.record_size, {}),
                )
            with self._task(label, settings.latency_s) as task:
                consumers.wait_ready()
                producers.wait_ready()
                meter = _CpuMeter(run.broker_pids, None, run.proxy_pids)
                consumers.release()
                began = producers.release()

                def tick() -> None:
                    self.progress.update(task, completed=min(time.monotonic() - began, settings.latency_s))

                sent = producers.collect(settings.latency_s * 3 + 60, tick)
                acked = sum(r["records"] for r in sent)
                failed = sum(r["failed"] for r in sent)
                if failed:
                    first = next(f for r in sent for f in r["failures"])
                    raise BenchError(f"latency at {at}: {failed} records failed: {first}")
                # Wait for the consumers to see every acknowledged record, or to stall.
                last, last_change = consumers.progress(), time.monotonic()
                while (seen := consumers.progress()) < acked:
                    if problem := run._alive_check():
                        raise BenchError(problem)
                    if seen != last:
                        last, last_change = seen, time.monotonic()
                    elif time.monotonic() - last_change > _STALL_S:
                        break
                    time.sleep(0.05)
                stop.set()
                timed = consumers.collect(60)
                cpu = meter.finish(sum(r["cpu_s"] for r in sent) + sum(r["cpu_s"] for r in timed))
        finally:
            stop.set()
            producers.close()
            consumers.close()
        _delete_topics(system.bootstrap, [topic])
        consumed = sum(r["records"] for r in timed)
        if consumed > acked:
            raise BenchError(f"latency at {at}: consumed {consumed} records, {acked} were acknowledged")
        histogram = Histogram()
        for r in timed:
            histogram.merge(Histogram(r["histogram"]))
        seconds = max(r["produced"] for r in sent) - min(r["start"] for r in sent)
        return {
            "kind": "latency",
            "name": f"latency at {at}",
            "load": load,
            "target_records_per_s": round(rate),
            "records": acked,
            "consumed": consumed,
            # Acknowledged but never delivered within _STALL_S: not in the percentiles, named in the report.
            "undelivered": acked - consumed,
            "measured_records": histogram.count,
            "seconds": round(seconds, 3),
            "records_per_s": round(acked / seconds),
            "mb_per_s": round(acked * settings.record_size / seconds / MB, 1),
            "worst_producer_lag_ms": round(max(r["worst_lag_s"] for r in sent) * 1000, 1),
            "latency_ms": {
                "p50": _ms(histogram.percentile_ms(0.50)),
                "p99": _ms(histogram.percentile_ms(0.99)),
                "p99.9": _ms(histogram.percentile_ms(0.999)),
                "max": round(max(r["max_ns"] for r in timed) / 1e6, 3),
            },
            "cpu": cpu,
        }

    def metadata(self, spec: SystemSpec, system: RunningSystem, run: _Run) -> dict[str, Any]:
        """Metadata requests for all topics while one topic has ``metadata_partitions`` partitions."""
        settings = self.settings
        topic = f"metadata-{self.run_id}-{spec.key}"
        count = settings.metadata_partitions
        with self._task(f"{spec.label}: creating a topic with {count:,} partitions"):
            self._create(system.bootstrap, topic, count, min(spec.brokers, 3))
        group = WorkerGroup("metadata clients", run._alive_check)
        try:
            for _ in range(settings.producers):
                job = MetadataJob(system.bootstrap, topic, count, settings.metadata_s, settings.warmup_s)
                group.add(metadata_worker, job)
            with self._task(f"{spec.label}: Metadata with {count:,} partitions", settings.metadata_s) as task:
                group.wait_ready()
                meter = _CpuMeter(run.broker_pids, None, run.proxy_pids)
                began = group.release()

                def tick() -> None:
                    elapsed = max(time.monotonic() - began, 1e-9)
                    self.progress.update(
                        task, completed=min(elapsed, settings.metadata_s), rate=f"{group.progress() / elapsed:,.0f}/s"
                    )

                results = group.collect(settings.metadata_s * 3 + 120, tick)
                cpu = meter.finish(0.0)
        finally:
            group.close()
        _delete_topics(system.bootstrap, [topic])
        histogram = Histogram()
        for r in results:
            histogram.merge(Histogram(r["histogram"]))
        requests = sum(r["requests"] for r in results)
        span = max(r["end"] for r in results) - min(r["start"] for r in results)
        return {
            "kind": "metadata",
            "name": f"Metadata, {count} partitions",
            "partitions": count,
            "clients": len(results),
            "requests": requests,
            "seconds": round(span, 3),
            "requests_per_s": round(requests / span, 1),
            "latency_ms": {"p50": _ms(histogram.percentile_ms(0.5)), "p99": _ms(histogram.percentile_ms(0.99))},
            "cpu": cpu,
        }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete ``topics`` (frees memory in Tansu, disk and page cache elsewhere); failures are ignored."""
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.delete_topics(topics, operation_timeout=_ADMIN_TIMEOUT_S).values():
        with contextlib.suppress(Exception):
            future.result(_ADMIN_TIMEOUT_S)


def run_compare(settings: CompareSettings, console: Console | None = None) -> dict[str, Any]:
    """Run the comparison and return the report (``write_compare_report`` writes it).

    Raises:
        BenchError: the settings are invalid or the limits could not be measured; a failing system
            is recorded in the report instead.
    """
    try:
        return _run_compare(settings, console)
    except (BenchError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise BenchError(f"{type(exc).__name__}: {exc}") from exc


def _run_compare(settings: CompareSettings, console: Console | None) -> dict[str, Any]:
    settings.validate()
    console = console or Console(stderr=True)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    began = time.monotonic()
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
        console=console, disable=not settings.show_progress, refresh_per_second=2,
    )  # fmt: skip
    specs = settings.specs()
    with tempfile.TemporaryDirectory(prefix="barnabas-compare-") as scratch, progress:
        compare = _Compare(settings, console, progress, Path(scratch))
        overall = progress.add_task("[cyan]compare", total=len(specs) + (0 if settings.skip_limits else 1), rate="")
        with compare._task("checking machine load"):
            load_before = busy_processes(1.0)
        for spec in specs:
            progress.update(overall, rate=spec.label)
            compare.measure_system(spec)
            progress.advance(overall)
        if not settings.skip_limits:
            # Last: the disk measurement writes gigabytes, and on a volume with burst credit the
            # system measured right after it did worse: barnabas first had a 330-740 ms p99 at 10 % load,
            # barnabas after Kafka 11 ms.
            compare.measure_limits()
            progress.advance(overall)
        load_after = busy_processes(1.0)
        env = environment(Path(scratch))
    env["load_before"] = load_before
    env["load_after"] = load_after
    env["versions"]["kafka"] = next(
        (s["version"] for s in compare.systems.values() if s["product"] == "kafka" and "version" in s), None
    )
    env["versions"]["tansu"] = next(
        (s["version"] for s in compare.systems.values() if s["product"] == "tansu" and "version" in s), None
    )
    settings_out = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items()}
    return {
        "schema": 1,
        "kind": "compare",
        "run_id": compare.run_id,
        "started_at": started_at,
        "seconds": round(time.monotonic() - began, 1),
        "units": {
            "mb_per_s": "10^6 bytes of record values per second",
            "latency_ms": "milliseconds from the producer's produce() call to the consumer's consume() return",
            "cores": "CPU-seconds per second",
        },
        "settings": settings_out,
        "environment": env,
        "limits": compare.limits,
        "systems": compare.systems,
    }
