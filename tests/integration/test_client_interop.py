"""Client interoperability: five Kafka client families x six modes against one broker.

Each (client, mode) run is one driver process — confluent-kafka, kafka-python and aiokafka via
``python -m tests.interop.py_driver``, kafkajs via ``tests/interop/node/driver.js``, the Java client
via ``tests/interop/java`` — that creates a 3-partition topic with the client's admin API, produces
10,000 keyed messages with acks=all (compressed per mode, or idempotent), reads every partition back
by assign() from the beginning, lists earliest/latest offsets and deletes the topic. The driver writes
a JSON report; :func:`tests.interop.common.problems_in` checks every client's report the same way.

Broker: the module's ``shared_broker`` (a barnabas process), or, when the environment variable
``BARNABAS_TEST_BOOTSTRAP`` is set (``host:port``), that already-running broker instead — e.g. a
Tansu or Kafka peer while debugging a client.

Prerequisites: java/javac/mvn (kafka-clients is resolved from Maven Central on first use) and
node/npm; missing tools fail the Java/kafkajs tests rather than skip them. kafka-python's snappy,
lz4 and zstd modes need the PyPI packages python-snappy, lz4 and zstandard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.common import CLIENTS, MODES, key_for, problems_in, value_for
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, NODE_DIR, REPO, build_tools, java_command

BOOTSTRAP_ENV = "BARNABAS_TEST_BOOTSTRAP"
COUNT = 10_000
PARTITIONS = 3
DRIVER_TIMEOUT_S = 120  # hard limit per driver process; drivers give up on their own 10 s earlier

# Combinations a client genuinely cannot do here; everything else must pass.
# (kafkajs has no built-in zstd; tests/interop/node/zstd_codec.js plugs in a WASM libzstd.)
UNSUPPORTED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Driver:
    """How to start one client family's driver, or why it cannot be started."""

    command: tuple[str, ...] = ()
    problem: str | None = None


@pytest.fixture(scope="session")
def java_driver() -> Driver:
    problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
    if problem:
        return Driver(problem=problem)
    return Driver(command=java_command("barnabas.interop.InteropDriver"))


@pytest.fixture(scope="session")
def node_driver() -> Driver:
    problem = build_tools(NODE_DIR / "install.sh", ("node", "npm"), "kafkajs driver install")
    if problem:
        return Driver(problem=problem)
    return Driver(command=("node", str(NODE_DIR / "driver.js")))


@pytest.fixture(scope="module")
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The broker under test: BARNABAS_TEST_BOOTSTRAP if set, else the module's barnabas broker."""
    override = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if override:
        return override
    return str(request.getfixturevalue("shared_broker").bootstrap)


def _driver_for(client: str, request: pytest.FixtureRequest) -> Driver:
    if client == "java":
        return request.getfixturevalue("java_driver")  # type: ignore[no-any-return]
    if client == "kafkajs":
        return request.getfixturevalue("node_driver")  # type: ignore[no-any-return]
    return Driver(command=(sys.executable, "-m", "tests.interop.py_driver", "--client", client))


def _failure_reason(stderr: str) -> str:
    """The driver's one-line verdict ("interop-driver: ..."), else its last stderr line."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("interop-driver:"):
            return line.removeprefix("interop-driver:").strip()
    return lines[-1] if lines else "(no output)"


def _tail(text: str, n: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


CASES = [pytest.param(client, mode, id=f"{client}-{mode}") for client in CLIENTS for mode in MODES]


@pytest.mark.interop
@pytest.mark.parametrize(("client", "mode"), CASES)
def test_client_interop(
    client: str,
    mode: str,
    bootstrap: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    if (client, mode) in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[client, mode])
    driver = _driver_for(client, request)
    if driver.problem:
        pytest.fail(driver.problem, pytrace=False)

    topic = f"interop-{client}-{mode}-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "report.json"
    command = [
        *driver.command,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--mode",
        mode,
        "--count",
        str(COUNT),
        "--partitions",
        str(PARTITIONS),
        "--out",
        str(out),
    ]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:  # subprocess.run has killed the driver
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(
            f"{client}/{mode}: driver still running after {DRIVER_TIMEOUT_S} s (killed); stderr tail:\n{_tail(stderr)}",
            pytrace=False,
        )
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        pytest.fail(
            f"{client}/{mode} against {bootstrap}: {_failure_reason(proc.stderr)}\n"
            f"(driver exit {proc.returncode} after {elapsed:.1f} s; stderr tail:)\n{_tail(proc.stderr)}",
            pytrace=False,
        )

    report = json.loads(out.read_text())
    request.node.user_properties += [
        ("client_version", report.get("client_version")),
        ("timings_ms", report.get("timings_ms")),
    ]
    print(f"{client}/{mode}: {report.get('client_version')} {elapsed:.2f} s, phases {report.get('timings_ms')}")
    problems = problems_in(report, COUNT, PARTITIONS)
    if problems:
        pytest.fail(f"{client}/{mode} against {bootstrap}:\n  " + "\n  ".join(problems), pytrace=False)


# ---------------------------------------------------------------- the checker itself (no broker)


def _perfect_report(count: int = 30, partitions: int = 3) -> dict[str, object]:
    per: dict[int, int] = dict.fromkeys(range(partitions), 0)
    records = []
    for i in range(count):
        p = i % partitions
        records.append([p, per[p], key_for(i), value_for(i)])
        per[p] += 1
    return {
        "produced": count,
        "records": records,
        "errors": [],
        "earliest": {str(p): 0 for p in per},
        "latest": {str(p): n for p, n in per.items()},
    }


def _mutated(change) -> list[str]:  # type: ignore[no-untyped-def]
    report = _perfect_report()
    change(report)
    return problems_in(report, 30, 3)


def test_checker_accepts_a_correct_report() -> None:
    assert problems_in(_perfect_report(), 30, 3) == []
    assert len(value_for(7)) == 100 and value_for(7).startswith("value-7-hijk")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda r: r["errors"].append("boom"), "driver reported errors"),
        (lambda r: r.update(produced=29), "produced (acknowledged) 29 of 30"),
        (lambda r: r["records"].pop(), "never consumed: keys [29]"),
        (lambda r: r["records"].append(r["records"][0]), "consumed more than once"),
        (lambda r: r["records"][3].__setitem__(1, 5), "offsets are not"),
        (
            lambda r: r["records"].__setitem__(slice(0, 4), [r["records"][3], *r["records"][1:3], r["records"][0]]),
            "produce order not kept",
        ),
        (lambda r: r["records"][4].__setitem__(3, "value-4-x"), "malformed records"),
        (lambda r: r["records"][4].__setitem__(2, "key-99"), "out of range"),
        (lambda r: r["latest"].update({"1": 9}), "latest offsets"),
        (lambda r: r["earliest"].update({"2": 1}), "earliest offsets"),
        (lambda r: r.update(records=[x for x in r["records"] if x[0] != 2]), "partitions [2] received no messages"),
    ],
)
def test_checker_reports_each_defect(change, expected: str) -> None:  # type: ignore[no-untyped-def]
    problems = _mutated(change)
    assert any(expected in p for p in problems), problems
