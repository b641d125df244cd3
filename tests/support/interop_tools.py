"""Building the Java and node client tools once per run, and the Java Admin client as a command.

``build_tools`` runs an idempotent build/install script (tests/interop/java/build.sh,
tests/interop/node/install.sh); ``java_command`` is how to start one of the Java tools' main
classes; ``JavaAdmin`` runs ``barnabas.interop.AdminTool`` (reassignments, elections) and parses
its one JSON line; ``kafka_tool`` runs one of Kafka's own command-line tools.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
INTEROP = REPO / "tests" / "interop"
JAVA_DIR = INTEROP / "java"
NODE_DIR = INTEROP / "node"
JAVA_TOOLS = ("java", "javac", "mvn")
PREPARE_TIMEOUT_S = 240  # first build.sh / install.sh downloads; stays under pytest-timeout (300 s)
ADMIN_TIMEOUT_S = 90


def build_tools(script: Path, tools: tuple[str, ...], what: str) -> str | None:
    """Run an idempotent build/install script; return a failure description or None."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        return f"{what}: {', '.join(missing)} not found on PATH (`make test` installs them)"
    try:
        proc = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=PREPARE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return f"{what}: {script.relative_to(REPO)} did not finish within {PREPARE_TIMEOUT_S} s"
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        return f"{what}: {script.relative_to(REPO)} failed (exit {proc.returncode}):\n{tail}"
    return None


def java_command(main_class: str) -> tuple[str, ...]:
    """Start ``main_class`` from the built Java tools (short-lived JVM: serial GC, C1 only)."""
    target = JAVA_DIR / "target"
    classpath = f"{target / 'interop-driver.jar'}{os.pathsep}{target / 'lib' / '*'}"
    return ("java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, main_class)


class JavaAdmin:
    """The Java Admin client's leadership calls against ``bootstrap``, one JVM per call."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, *args: str) -> Any:
        command = (*java_command("barnabas.interop.AdminTool"), "--bootstrap", self.bootstrap, *args)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"AdminTool {' '.join(args)} failed: {proc.stderr.strip()[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> Any:
        return self.run("reassign", "--topic", topic, "--partition", str(partition),
                        "--replicas", ",".join(map(str, replicas)))  # fmt: skip

    def cancel(self, topic: str, partition: int) -> Any:
        return self.run("cancel", "--topic", topic, "--partition", str(partition))

    def reassignments(self) -> dict[str, Any]:
        return dict(self.run("list"))

    def elect(self, kind: str, topic: str | None = None, partition: int | None = None) -> dict[str, Any]:
        target = ("--topic", topic, "--partition", str(partition)) if topic is not None else ()
        return dict(self.run("elect", "--type", kind, *target))


KAFKA_LIB = REPO / "bench" / "kafka-server" / "build" / "lib"
KAFKA_TOOL_TIMEOUT_S = 120


def kafka_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (a short-lived JVM; bench/kafka-server/build.sh resolves the jars) to completion."""
    if not any(KAFKA_LIB.glob("kafka-tools-*.jar")):
        raise AssertionError(
            f"Kafka's tools are not in {KAFKA_LIB}: bench/kafka-server/build.sh (make test) resolves them"
        )
    command = [
        "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", f"{KAFKA_LIB}{os.sep}*", main_class, *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=KAFKA_TOOL_TIMEOUT_S, check=False)
