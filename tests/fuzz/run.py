"""Run fuzz targets: ``python -m tests.fuzz.run TARGET|all [--runs N]`` (``make fuzz`` runs them all).

With atheris installed each target runs under libFuzzer, coverage-guided over barnabas's code,
starting from its committed corpus (``tests/fuzz/corpus/<target>/``, read only) and growing a work
corpus under ``--work`` (``build/fuzz/<target>/``, where crash inputs land too). Without atheris, or
with ``--engine random``, a plain loop mutates the committed corpus and throws in random bytes: no
coverage, but the same targets and the same verdicts.

Besides an exception a target lets out, two things are findings, caught here rather than in the
targets: an input that runs longer than ``--timeout`` seconds (libFuzzer's -timeout, or an interval
timer), and an allocation far beyond the input's size: the process gets an address-space limit of
``--memory-mb`` above what it uses at start, so a decoder that reserves memory by a declared size
fails (a MemoryError, or an abort from native code) instead of succeeding on a large machine.

``all`` runs the targets one at a time, each in its own process, and ends non-zero if any found
something. The replay of the committed corpora is ``tests/fuzz/test_corpus_replay.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from tests.fuzz.targets import NAMES, load

CORPUS = Path(__file__).with_name("corpus")
DEFAULT_WORK = Path("build") / "fuzz"


def limit_address_space(extra_mb: int) -> None:
    """Cap this process's address space at what it maps now plus ``extra_mb`` MiB."""
    with open("/proc/self/status") as status:
        vm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize"))
    limit = vm_kib * 1024 + (extra_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def corpus_files(*directories: Path) -> list[Path]:
    return sorted(path for directory in directories if directory.is_dir() for path in directory.iterdir())


# -- the fallback: mutate the corpus, no coverage -----------------------------------------------------


class _TimedOutError(BaseException):  # not an Exception: no target may swallow it
    pass


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _TimedOutError


_INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


def mutate(data: bytearray, rng: random.Random, corpus: list[bytes]) -> bytearray:
    """A few random edits: flip, set, insert, delete, an interesting integer, a splice."""
    for _ in range(rng.randint(1, 5)):
        choice = rng.random()
        pos = rng.randint(0, len(data))
        if choice < 0.3 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif choice < 0.45 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif choice < 0.6:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif choice < 0.7 and data:
            del data[pos : pos + rng.randint(1, 8)]
        elif choice < 0.85:
            width = rng.choice((1, 2, 4))
            value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
            data[pos : pos + width] = value.to_bytes(width, "big")
        elif corpus:
            other = rng.choice(corpus)
            cut = rng.randint(0, len(other))
            data[pos:] = other[cut:]
    return data


def run_random(name: str, runs: int, work: Path, *, timeout: float, memory_mb: int, seed: int) -> int:
    target = load(name)
    limit_address_space(memory_mb)
    corpus = [path.read_bytes() for path in corpus_files(CORPUS / name, work / "corpus")] or [b""]
    rng = random.Random(seed)
    last_input = os.open(work / "last-input", os.O_RDWR | os.O_CREAT, 0o644)
    signal.signal(signal.SIGALRM, _on_alarm)
    started = reported = time.monotonic()
    for count in range(1, runs + 1):
        if rng.random() < 0.1:
            data = rng.randbytes(rng.randint(0, 64))
        else:
            data = bytes(mutate(bytearray(rng.choice(corpus)), rng, corpus)[: target.max_len])
        os.pwrite(last_input, data, 0)  # an abort in native code leaves the culprit here
        os.ftruncate(last_input, len(data))
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            target.run(data)
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            crash = work / f"crash-{hashlib.sha1(data).hexdigest()}"
            crash.write_bytes(data)
            kind = f"a hang (over {timeout} s)" if isinstance(exc, _TimedOutError) else "a finding"
            traceback.print_exc()
            print(f"{name}: {kind} after {count} inputs; input saved to {crash}", file=sys.stderr)
            return 1
        signal.setitimer(signal.ITIMER_REAL, 0)
        now = time.monotonic()
        if now - reported > 10:
            print(f"{name}: {count} inputs, {count / (now - started):.0f}/s", file=sys.stderr, flush=True)
            reported = now
    elapsed = time.monotonic() - started
    print(f"{name}: Done {runs} runs in {elapsed:.0f} second(s), {runs / elapsed:.0f}/s, no finding", file=sys.stderr)
    return 0


# -- atheris ------------------------------------------------------------------------------------------


def run_atheris(name: str, runs: int, work: Path, timeout: float, memory_mb: int) -> int:
    atheris = importlib.import_module("atheris")  # installed by `make fuzz` only, and untyped
    with atheris.instrument_imports(include=["barnabas"]):
        target = load(name)
        from barnabas.protocol import _declared_sizes

    # The declared-size walkers are generated code, which no import hook sees: instrument each as it is built.
    compile_walker = _declared_sizes._compile

    def compile_instrumented(src: Any, body: Any) -> Any:
        return atheris.instrument_func(compile_walker(src, body))

    _declared_sizes._compile = compile_instrumented
    limit_address_space(memory_mb)
    run: Callable[[bytes], None] = target.run
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    argv = [
        sys.argv[0],
        f"-runs={runs}",
        f"-max_len={target.max_len}",
        f"-timeout={max(int(timeout), 1)}",
        f"-rss_limit_mb={memory_mb}",
        f"-artifact_prefix={work}/",
        "-print_final_stats=1",
        str(work / "corpus"),
        str(CORPUS / name),
    ]
    atheris.Setup(argv, run)
    atheris.Fuzz()
    return 0  # not reached: libFuzzer exits


# -- all targets --------------------------------------------------------------------------------------

_DONE = re.compile(r"Done (\d+) runs in (\d+) second")


def run_all(args: argparse.Namespace) -> int:
    failed = []
    for name in NAMES:
        command = [sys.executable, "-m", "tests.fuzz.run", name, "--runs", str(args.runs), "--work", str(args.work)]
        command += ["--engine", args.engine, "--timeout", str(args.timeout), "--memory-mb", str(args.memory_mb)]
        log = args.work / name / "fuzz.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"== {name} (follow {log})", flush=True)
        started = time.monotonic()
        with log.open("w") as output_file:
            child = subprocess.run(command, stdout=output_file, stderr=subprocess.STDOUT, check=False)
        elapsed = time.monotonic() - started
        output = log.read_text(errors="replace")
        done = _DONE.findall(output)
        if child.returncode != 0 or not done:
            failed.append(name)
            print(output[-4000:])
            print(f"== {name}: FOUND SOMETHING (exit {child.returncode}); see {args.work / name}/", flush=True)
            continue
        executed = int(done[-1][0])
        print(f"== {name}: {executed} inputs in {elapsed:.0f} s ({executed / elapsed:.0f}/s), no finding", flush=True)
    if failed:
        print(f"findings in: {', '.join(failed)}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("target", choices=[*NAMES, "all"])
    parser.add_argument("--runs", type=int, default=100_000, help="inputs per target (default 100000)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="work corpora and crash inputs")
    parser.add_argument("--engine", choices=["auto", "atheris", "random"], default="auto")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one input may take")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address space beyond the start, MiB")
    parser.add_argument("--seed", type=int, default=0, help="the random engine's seed")
    args = parser.parse_args(argv)
    if args.target == "all":
        return run_all(args)
    work = args.work / args.target
    work.mkdir(parents=True, exist_ok=True)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if importlib.util.find_spec("atheris") is not None else "random"
        if engine == "random":
            print("atheris is not installed: falling back to random mutation (no coverage)", file=sys.stderr)
    if engine == "atheris":
        return run_atheris(args.target, args.runs, work, args.timeout, args.memory_mb)
    return run_random(args.target, args.runs, work, timeout=args.timeout, memory_mb=args.memory_mb, seed=args.seed)


if __name__ == "__main__":
    sys.exit(main())
