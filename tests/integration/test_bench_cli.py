"""`barnabas bench` end to end with a tiny workload: it starts its own broker, measures every
phase, and writes a JSON report whose fields and values make sense."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RECORDS = 3000
RECORD_SIZE = 1024


def _bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(300)
def test_bench_writes_a_sane_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = _bench(
        "--records", str(RECORDS), "--record-size", str(RECORD_SIZE), "--partitions", "2",
        "--producers", "1", "--acks", "1,all", "--consumers", "1", "--loopback-seconds", "0.5",
        "--output", str(out), "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "produce acks=1" in done.stdout  # the table

    report = json.loads((out / "latest.json").read_text())
    assert report["schema"] == 1
    assert (out / "runs" / f"{report['run_id']}.json").exists()
    markdown = (out / "latest.md").read_text()
    assert "| phase | MB/s |" in markdown

    env = report["environment"]
    assert env["cpu_count"] >= 1
    assert env["cpu_model"]
    assert env["python"].startswith("CPython 3.") or env["python"]
    assert env["versions"]["librdkafka"] and env["versions"]["barnabas"]
    assert "busy_cores" in env["load_before"]

    phases = {p["name"]: p for p in report["phases"]}
    assert set(phases) == {
        "loopback ingress", "loopback egress", "produce acks=1 ×1", "produce acks=all ×1", "consume ×1",
    }  # fmt: skip
    for direction in ("ingress", "egress"):
        loop = phases[f"loopback {direction}"]
        assert loop["frames"] > 0
        assert 10 < loop["mb_per_s"] < 100_000
        assert loop["frame_bytes"] > 1_000_000  # ~1 MiB Kafka frames

    for acks in ("1", "all"):
        produce = phases[f"produce acks={acks} ×1"]
        assert produce["records"] == RECORDS
        assert produce["bytes"] == RECORDS * RECORD_SIZE
        assert produce["mb_per_s"] > 0.1
        assert produce["records_per_s"] > 10
        assert 0 < produce["ratio_to_ceiling"] < 1
        # Measured from /proc in 10 ms clock ticks: a 3 MB run can round to zero.
        assert produce["cpu"]["broker"] is not None and produce["cpu"]["broker"] >= 0
        assert produce["cpu"]["clients"] > 0

    consume = phases["consume ×1"]
    assert consume["records"] == 2 * RECORDS  # everything produced, both topics
    assert consume["bytes"] == 2 * RECORDS * RECORD_SIZE
    assert consume["mb_per_s"] > 0.1
    assert 0 < consume["ratio_to_ceiling"] < 1

    summary = {row["name"]: row for row in report["summary"]}
    assert summary["consume ×1"]["aim_mb_per_s"] == 300
    assert summary["produce acks=1 ×1"]["aim_mb_per_s"] == 150
    assert report["headline"]["produce_acks_1"]["mb_per_s"]["median"] == phases["produce acks=1 ×1"]["mb_per_s"]


def test_bench_rejects_bad_settings_with_one_line(tmp_path: Path) -> None:
    done = _bench("--partitions", "0", "--output", str(tmp_path), timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == ["barnabas bench: --partitions must be positive"]
