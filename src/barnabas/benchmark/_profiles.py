"""Sample the broker with py-spy during one phase, and summarise where its time went.

Rules this module keeps:

- py-spy attaches to the broker's pid only (``py-spy record --pid``), writes a speedscope file
  and is stopped with SIGINT, which makes it write the file; nothing else is signalled.
- py-spy drops idle samples (a thread waiting in epoll), so sample weights add up to the
  broker's busy time; ``busy_fraction`` compares it with the wall time sampled.
- Self time is charged to the innermost frame of a sample; total time to every distinct
  function on its stack (recursion counted once). Functions are keyed by (name, file), lines
  are kept separately for the hottest lines. The "total" ranking lists Python functions only,
  without the entry chain every sample shares.
- File names are shortened to the part after ``site-packages/``, ``src/`` or ``lib/python3.X/``.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ._child import stop_child
from ._settings import BenchError

__all__ = ["PySpyRecorder", "find_py_spy", "format_profile_markdown", "summarise_speedscope"]

_ATTACH_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 60.0
_SHORTEN = re.compile(r"^.*?(?:site-packages/|/src/|/lib/python3\.\d+/)")


def find_py_spy() -> str:
    """The py-spy executable next to this interpreter, else on PATH.

    Raises:
        BenchError: py-spy is not installed (``pip install 'barnabas[profile]'``).
    """
    beside = Path(sys.executable).parent / "py-spy"
    if beside.exists():
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        raise BenchError("--profile needs py-spy: pip install 'barnabas[profile]'")
    return found


class PySpyRecorder:
    """One ``py-spy record`` child sampling ``pid`` into ``output`` (speedscope JSON)."""

    def __init__(self, executable: str, pid: int, output: Path, rate: int, native: bool) -> None:
        self.executable = executable
        self.pid = pid
        self.output = output
        self.rate = rate
        self.native = native
        self.proc: subprocess.Popen[str] | None = None
        self.started_at = 0.0
        self.seconds = 0.0
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling and return once py-spy reports it is sampling.

        Raises:
            BenchError: py-spy exited or did not start sampling (permissions: ptrace).
        """
        command = [
            self.executable, "record", "--pid", str(self.pid), "--rate", str(self.rate),
            "--format", "speedscope", "--output", str(self.output),
        ]  # fmt: skip
        if self.native:
            command.append("--native")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sampling = threading.Event()

        def pump(proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self._lines.append(line.rstrip("\n"))
                if "Sampling process" in line:
                    sampling.set()
            sampling.set()

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True, name="py-spy output")
        self._reader.start()
        if not sampling.wait(_ATTACH_TIMEOUT_S) or self.proc.poll() is not None:
            reason = next((line for line in self._lines if line.strip()), "no output")
            self.stop()
            raise BenchError(f"py-spy could not sample the broker (pid {self.pid}): {reason}")
        self.started_at = time.monotonic()

    def stop(self) -> Path | None:
        """SIGINT py-spy, wait for it to write the profile; the file, or None if there is none."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.seconds = time.monotonic() - self.started_at
        stop_child(self.proc, self._reader, _STOP_TIMEOUT_S, signal.SIGINT)
        self._reader = None
        return self.output if self.output.exists() else None

    def cpu_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None


def _short(path: str) -> str:
    return _SHORTEN.sub("", path) or path


#: Innermost frames that mean "waiting", which py-spy still reports as active at times.
_WAITING = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2", "select", "poll", "ppoll"})


def _is_idle(stack: list[int], frames: list[dict[str, Any]]) -> bool:
    """True for samples of a thread that is waiting, not working.

    py-spy drops most idle samples itself, but not all: an executor thread blocked in
    ``SimpleQueue.get`` (a futex) and, with ``--native``, the event loop inside ``epoll_wait``
    still show up. Those are removed so percentages are of work.
    """
    if frames[stack[-1]]["name"] in _WAITING:
        return True
    python = [frames[i] for i in stack if str(frames[i].get("file") or "").endswith(".py")]
    return bool(python) and python[-1]["name"] == "_worker" and python[-1]["file"].endswith("futures/thread.py")


def summarise_speedscope(path: Path, wall_seconds: float, top: int = 25) -> dict[str, Any]:
    """Top functions by self and total time, self time per file and the hottest lines.

    Percentages are of all (busy) samples. Also writes ``<path stem>.folded.txt`` (one
    ``root;...;leaf weight`` line per distinct stack) next to the profile for flamegraph tools.
    """
    document = json.loads(path.read_text())
    frames = document["shared"]["frames"]
    keys = [(f["name"], _short(f.get("file") or "?")) for f in frames]
    line_keys = [(f["name"], _short(f.get("file") or "?"), f.get("line") or 0) for f in frames]
    self_time: Counter[tuple[str, str]] = Counter()
    total_time: Counter[tuple[str, str]] = Counter()
    file_time: Counter[str] = Counter()
    line_time: Counter[tuple[str, str, int]] = Counter()
    stacks: Counter[tuple[int, ...]] = Counter()
    busy = idle = 0.0
    for profile in document["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            if not stack:
                continue
            stacks[tuple(stack)] += weight
            if _is_idle(stack, frames):
                idle += weight
                continue
            busy += weight
            leaf = stack[-1]
            leaf_key = keys[leaf]
            if leaf_key[0].startswith("0x") and len(stack) > 1:
                # An unresolved native symbol (memcpy and friends in a stripped libc): name it by its caller.
                leaf_key = (f"{leaf_key[0]} in {frames[stack[-2]]['name']}", leaf_key[1])
            self_time[leaf_key] += weight
            file_time[keys[leaf][1]] += weight
            line_time[line_keys[leaf]] += weight
            for key in {keys[i] for i in stack}:
                total_time[key] += weight

    folded = path.with_name(path.name.replace(".speedscope.json", "") + ".folded.txt")
    with folded.open("w") as out:
        for stack, weight in stacks.most_common():  # idle stacks included, marked by their frames
            names = ";".join(f"{frames[i]['name']} ({keys[i][1]}:{line_keys[i][2]})" for i in stack)
            out.write(f"{names} {round(weight * 1000)}\n")

    def pct(value: float) -> float:
        return round(100.0 * value / busy, 2) if busy else 0.0

    def rows(counter: Counter[tuple[str, str]]) -> list[dict[str, Any]]:
        return [
            {
                "function": name,
                "file": file,
                "self_pct": pct(self_time[(name, file)]),
                "total_pct": pct(max(total_time[(name, file)], self_time[(name, file)])),
            }
            for (name, file), _ in counter.most_common(top)
        ]

    # The entry chain (runpy, main, uvloop.run, run_forever...) is on every stack: leave it out of
    # the "total" ranking, where it would only push the informative frames down.
    trunk = {
        key for key, weight in total_time.items() if busy and weight >= 0.97 * busy and self_time[key] < 0.01 * busy
    }
    # Native frames (--profile-native) interleave the Python ones; rank only Python functions by total.
    ranked_total: Counter[tuple[str, str]] = Counter(
        {k: w for k, w in total_time.items() if k not in trunk and k[1].endswith(".py")}
    )

    return {
        "file": path.name,
        "folded": folded.name,
        "busy_seconds": round(busy, 2),
        "idle_seconds_dropped": round(idle, 2),
        "wall_seconds": round(wall_seconds, 2),
        "busy_fraction": round(busy / wall_seconds, 3) if wall_seconds > 0 else None,
        "top_self": rows(self_time),
        "top_total": rows(ranked_total),
        "self_by_file": [{"file": f, "self_pct": pct(w)} for f, w in file_time.most_common(top)],
        "hot_lines": [
            {"function": n, "file": f, "line": ln, "self_pct": pct(w)} for (n, f, ln), w in line_time.most_common(top)
        ],
    }


def format_profile_markdown(name: str, summary: dict[str, Any], top: int = 15) -> str:
    """A markdown section for one phase's profile summary."""
    lines = [
        f"### Broker profile: {name}",
        "",
        f"`{summary['file']}` (open in https://www.speedscope.app), folded stacks `{summary['folded']}`. "
        f"Busy {summary['busy_seconds']} s of {summary['wall_seconds']} s sampled "
        f"(busy fraction {summary['busy_fraction']}, all threads; waiting samples dropped: "
        f"{summary['idle_seconds_dropped']} s); percentages are of busy samples. Without --profile-native, "
        "`Runner.run` self time is uvloop's C code (socket reads and writes); with it, unresolved `0x…` "
        "libc frames are mostly memcpy/memmove, named by their caller.",
        "",
        "| top self | self % | total % | | top total | total % | self % |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for by_self, by_total in zip(summary["top_self"][:top], summary["top_total"][:top], strict=False):
        lines.append(
            f"| `{by_self['function']}` {by_self['file']} | {by_self['self_pct']} | {by_self['total_pct']} | "
            f"| `{by_total['function']}` {by_total['file']} | {by_total['total_pct']} | {by_total['self_pct']} |"
        )
    lines += ["", "| file | self % |", "|---|---:|"]
    lines += [f"| {row['file']} | {row['self_pct']} |" for row in summary["self_by_file"][:10]]
    lines += ["", "| hot line | self % |", "|---|---:|"]
    lines += [f"| `{r['function']}` {r['file']}:{r['line']} | {r['self_pct']} |" for r in summary["hot_lines"][:10]]
    return "\n".join(lines) + "\n"
