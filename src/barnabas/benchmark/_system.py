"""Facts about the machine, and CPU accounting from /proc (Linux; elsewhere the numbers are None).

Rules this module keeps:

- CPU use is reported in cores (CPU-seconds per wall-second), so 2.0 is all of a 2-core machine.
- ``system`` counts every busy tick of the machine (user, nice, system, irq, softirq) and
  ``steal`` separately (time the hypervisor gave to someone else); what the broker, the clients
  and this process do not account for is "other": other agents sharing the CPU.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka

from barnabas import __version__

__all__ = ["CpuSample", "busy_processes", "environment", "kernel_threads_cpu_s", "process_cpu_s"]

_PF_KTHREAD = 0x00200000

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15)


@dataclass(frozen=True)
class CpuSample:
    """Machine-wide CPU tick counters at one instant."""

    at: float
    busy: float
    steal: float

    @classmethod
    def take(cls) -> CpuSample | None:
        try:
            line = Path("/proc/stat").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        values = [int(v) for v in line.split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq = values[:7]
        steal = values[7] if len(values) > 7 else 0
        return cls(time.monotonic(), (user + nice + system + irq + softirq) / _TICK, steal / _TICK)

    def cores_since(self, earlier: CpuSample) -> tuple[float, float]:
        """(busy cores, stolen cores) between ``earlier`` and this sample."""
        elapsed = max(self.at - earlier.at, 1e-9)
        return (self.busy - earlier.busy) / elapsed, (self.steal - earlier.steal) / elapsed


def kernel_threads_cpu_s() -> dict[tuple[int, str], float]:
    """(pid, start time) → CPU seconds of every kernel thread (kworker, ksoftirqd, jbd2, ...).

    Kernel threads do work on behalf of the benchmark too (writeback of the broker's pages,
    network softirqs), so a phase reports them apart from other users' processes.
    """
    out: dict[tuple[int, str], float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[6]) & _PF_KTHREAD:  # flags, field 9
            out[(int(entry.name), fields[19])] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _all_process_ticks() -> dict[int, tuple[str, str, float]]:
    """pid → (name, start time, CPU seconds); the start time tells a reused pid apart."""
    out: dict[int, tuple[str, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        # Kernel workers rename themselves; the start time (field 22) identifies a process.
        out[int(entry.name)] = (name, fields[19], (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def busy_processes(interval_s: float = 1.0, top: int = 5) -> dict[str, Any]:
    """Machine load over ``interval_s``: busy cores, load average and the busiest processes."""
    if not Path("/proc/stat").exists():
        return {}
    before, sample = _all_process_ticks(), CpuSample.take()
    time.sleep(interval_s)
    after, sample2 = _all_process_ticks(), CpuSample.take()
    rows: list[dict[str, Any]] = []
    attributed = 0.0
    for pid, (name, started, ticks) in after.items():
        # A process that started during the interval counts with all its CPU time.
        earlier = before[pid][2] if pid in before and before[pid][1] == started else 0.0
        cores = (ticks - earlier) / interval_s
        attributed += cores
        if cores >= 0.01:
            rows.append({"pid": pid, "name": name, "cores": round(cores, 2)})
    rows.sort(key=lambda r: -float(r["cores"]))
    busy = steal = None
    if sample is not None and sample2 is not None:
        busy, steal = sample2.cores_since(sample)
    return {
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "busy_cores": None if busy is None else round(busy, 2),
        "steal_cores": None if steal is None else round(steal, 2),
        # Busy time no visible process accounts for: short-lived processes, other containers.
        "unattributed_cores": None if busy is None else round(max(0.0, busy - attributed), 2),
        "top_processes": rows[:top],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _filesystem_of(path: Path) -> str | None:
    """The mount type holding ``path`` (longest matching mount point in /proc/mounts)."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return None
    resolved = str(path.resolve())
    best: tuple[int, str] | None = None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1]
        if (resolved == point or resolved.startswith(point.rstrip("/") + "/")) and (
            best is None or len(point) > best[0]
        ):
            best = (len(point), f"{fields[2]} ({fields[0]} on {point})")
    return best[1] if best else None


def _source_revision() -> dict[str, Any] | None:
    """The git commit of the barnabas source being measured and how many of its files differ.

    Read-only git calls, only when the package sits in a git work tree (an editable install);
    None for an installed wheel or without git.
    """
    package = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "changed_files": len(status)}


def environment(data_dir: Path | None) -> dict[str, Any]:
    """CPU, memory, OS, Python and library versions of this machine."""
    memory_mb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_mb = int(line.split()[1]) // 1024
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory_mb": memory_mb,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "data_dir_filesystem": _filesystem_of(data_dir) if data_dir else None,
        "source": _source_revision(),
        "versions": {
            "barnabas": __version__,
            "confluent-kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
            "uvloop": _version("uvloop"),
            "kio": _version("kio"),
            "rich": _version("rich"),
            "py-spy": _version("py-spy"),
        },
    }
