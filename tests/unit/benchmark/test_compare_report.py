"""The compare report's proxy pieces: its column, proxy ÷ direct, the ms it adds, its CPU and memory rows, its aims."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from barnabas.benchmark._compare_report import (
    compare_markdown,
    compare_rich_table,
    compare_rows,
    compare_table_markdown,
    proxy_overhead,
    write_compare_report,
)


def _phase(kind: str, **values: Any) -> dict[str, Any]:
    return {"kind": kind, "name": kind, **values}


def _throughput(kind: str, mb_per_s: float, proxy_cores: float | None = None) -> dict[str, Any]:
    cpu: dict[str, Any] = {"broker": 0.5, "other": 0.01}
    if proxy_cores is not None:
        cpu["proxy"] = proxy_cores
    return _phase(kind, mb_per_s=mb_per_s, records_per_s=round(mb_per_s * 1000), cpu=cpu)


def _latency(p50: float, p99: float, p999: float) -> dict[str, Any]:
    return _phase(
        "latency", load=0.1, mb_per_s=41.2, records_per_s=40_000, target_records_per_s=40_000,
        worst_producer_lag_ms=1.0, latency_ms={"p50": p50, "p99": p99, "p99.9": p999, "max": p999 * 2},
    )  # fmt: skip


def _system(product: str, label: str, phases: dict[str, Any], brokers: int = 1) -> dict[str, Any]:
    key = product if brokers == 1 else f"{product}-{brokers}"
    return {"key": key, "label": label, "product": product, "brokers": brokers, "status": "ok", "phases": phases}


SETTINGS = {
    "latency_loads": [0.1], "metadata_partitions": 1000, "record_size": 1024, "partitions": 4, "producers": 2,
    "consumers": 2, "produce_s": 10.0, "consume_rounds": 3, "latency_s": 10.0, "metadata_s": 5.0,
}  # fmt: skip
ENVIRONMENT = {
    "cpu_model": "test CPU", "cpu_count": 2, "memory_mb": 4096, "os": "Linux", "python": "CPython 3.11",
    "versions": {"barnabas": "0.1"}, "load_before": {"loadavg": [0.1, 0.1, 0.1], "busy_cores": 0.1},
}  # fmt: skip


def _report(*systems: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": "20261126-120000",
        "started_at": "2026-11-26T12:00:00+0000",
        "seconds": 100.0,
        "settings": {**copy.deepcopy(SETTINGS), "systems": [s["product"] for s in systems]},
        "environment": ENVIRONMENT,
        "limits": {},
        "systems": {s["key"]: copy.deepcopy(s) for s in systems},
    }


DIRECT = _system(
    "barnabas", "barnabas",
    {
        "produce_acks_1": _throughput("produce", 412.3),
        "produce_acks_all": _throughput("produce", 300.0),
        "consume": _throughput("consume", 800.0),
        "latency_10": {**_latency(2.345, 9.5, 20.0), "rate_of": "barnabas"},
        "metadata": _phase("metadata", requests_per_s=500.0, latency_ms={"p50": 2.0, "p99": 40.0}),
    },
)  # fmt: skip
PROXIED = _system(
    "barnabas-proxy", "barnabas via proxy",
    {
        "connections": _phase("connections", connections=200, kib_per_connection=61.48,
                              rss_kib={"before": 40_000, "open": 52_296, "closed": 50_000},
                              sockets={"before": 3, "open": 403, "closed": 3}, sockets_per_connection=2.0),
        "produce_acks_1": _throughput("produce", 375.0, proxy_cores=0.35),
        "produce_acks_all": _throughput("produce", 255.0, proxy_cores=0.3),
        "consume": _throughput("consume", 640.0, proxy_cores=0.8),
        "latency_10": {**_latency(2.601, 9.0, 150.0), "rate_of": "barnabas"},
        "metadata": _phase("metadata", requests_per_s=250.0, latency_ms={"p50": 4.5, "p99": 41.0}),
    },
)  # fmt: skip
KAFKA = _system("kafka", "Kafka", {"produce_acks_1": _throughput("produce", 400.0)})


def _row(rows: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    return next(row for row in rows if row["workload"] == workload)


def test_proxy_over_direct_is_the_quotient_of_the_unrounded_values() -> None:
    rows = compare_rows(_report(DIRECT, PROXIED, KAFKA))
    produce = _row(rows, "produce acks=1")
    assert produce["values"]["barnabas-proxy"] == 375.0
    assert produce["ratios"]["proxy/direct"] == 375.0 / 412.3
    assert produce["proxy_added_ms"] is None  # throughput rows carry the ratio only
    # The other ratios stay barnabas direct's.
    assert produce["ratios"]["barnabas/kafka"] == 412.3 / 400.0
    consume = _row(rows, "consume from the beginning")
    assert consume["ratios"]["proxy/direct"] == 640.0 / 800.0
    assert _row(rows, "Metadata (1,000 partitions)")["ratios"]["proxy/direct"] == 0.5


def test_millisecond_rows_carry_the_milliseconds_the_proxy_adds() -> None:
    rows = compare_rows(_report(DIRECT, PROXIED))
    p50 = _row(rows, "end-to-end p50 at 10% of max")
    assert p50["proxy_added_ms"] == pytest.approx(2.601 - 2.345)
    assert p50["ratios"]["proxy/direct"] == 2.601 / 2.345
    p99 = _row(rows, "end-to-end p99 at 10% of max")
    assert p99["proxy_added_ms"] == pytest.approx(-0.5)  # faster through the proxy: a negative difference
    table = compare_table_markdown(_report(DIRECT, PROXIED))
    assert "| 1.11× (+0.26 ms) |" in table
    assert "| 0.95× (-0.50 ms) |" in table
    assert "| 7.50× (+130 ms) |" in table  # p99.9: 150 against 20 ms


def test_the_proxy_cpu_rows_are_mcore_per_mb_s_and_only_the_proxys() -> None:
    rows = compare_rows(_report(DIRECT, PROXIED))
    cpu = _row(rows, "proxy CPU, produce acks=1")
    assert cpu["unit"] == "mcore per MB/s"
    assert cpu["values"]["barnabas-proxy"] == pytest.approx(0.35 * 1000 / 375.0)
    assert cpu["values"]["barnabas"] is None
    assert cpu["limit"] is None  # a produce phase, but no MB/s limit applies to CPU
    assert cpu["ratios"] == {"barnabas/kafka": None, "barnabas/tansu": None, "barnabas/limit": None,
                             "proxy/direct": None}  # fmt: skip
    assert _row(rows, "proxy CPU, consume")["values"]["barnabas-proxy"] == pytest.approx(1.25)
    memory = _row(rows, "proxy memory per client connection")
    assert (memory["unit"], memory["values"]) == ("KiB", {"barnabas": None, "barnabas-proxy": 61.48})


def test_without_the_proxy_the_table_is_as_before() -> None:
    report = _report(DIRECT, KAFKA)
    rows = compare_rows(report)
    assert not [row for row in rows if row["workload"].startswith("proxy")]
    assert all(row["ratios"]["proxy/direct"] is None for row in rows)
    table = compare_table_markdown(report)
    assert table.splitlines()[0] == (
        "| topology | workload | unit | barnabas | Kafka | Tansu | limit | ÷ Kafka | ÷ Tansu | ÷ limit |"
    )
    assert "proxy" not in compare_markdown(report)
    assert proxy_overhead(rows) == []


def test_with_the_proxy_its_columns_sit_beside_barnabas_and_at_the_end() -> None:
    table = compare_table_markdown(_report(DIRECT, PROXIED))
    header, rule, *lines = table.splitlines()
    assert header == (
        "| topology | workload | unit | barnabas | via proxy | Kafka | Tansu | limit | ÷ Kafka | ÷ Tansu | ÷ limit "
        "| proxy ÷ direct |"
    )
    assert rule.count("|") == header.count("|")
    produce = next(line for line in lines if "| produce acks=1 |" in line)
    assert produce.split(" | ")[3:5] == ["412", "375"]
    assert produce.endswith("| 0.91× |")
    cpu = next(line for line in lines if "proxy CPU, produce acks=1" in line)
    assert cpu.split(" | ")[3:5] == ["–", "0.9"]
    rich = compare_rich_table(_report(DIRECT, PROXIED))
    assert [c.header for c in rich.columns][3:5] == ["barnabas", "via proxy"]
    assert rich.columns[-1].header == "proxy ÷ direct"
    Console(width=250, file=open("/dev/null", "w")).print(rich)  # noqa: SIM115 - renders without error


def test_a_failed_proxy_shows_failed_and_no_ratio() -> None:
    failed = {**copy.deepcopy(PROXIED), "status": "failed", "reason": "the proxy did not start: boom", "phases": {}}
    report = _report(DIRECT, failed)
    rows = compare_rows(report)
    produce = _row(rows, "produce acks=1")
    assert produce["states"]["barnabas-proxy"] == "failed"
    assert produce["ratios"]["proxy/direct"] is None
    assert "| 412 | failed |" in compare_table_markdown(report)
    assert proxy_overhead(rows) == []
    assert "barnabas via proxy: failed — the proxy did not start: boom" in compare_markdown(report)


def test_proxy_overhead_judges_each_figure_against_its_aim() -> None:
    figures = {f["what"]: f for f in proxy_overhead(compare_rows(_report(DIRECT, PROXIED)))}
    assert list(figures) == [
        "produce acks=1 throughput", "produce acks=all throughput", "consume throughput",
        "end-to-end p50 at 10 % load", "proxy CPU, produce acks=1", "proxy CPU, produce acks=all",
        "proxy CPU, consume", "memory per client connection",
    ]  # fmt: skip
    acks_1 = figures["produce acks=1 throughput"]
    assert acks_1["figure"] == 375.0 / 412.3 and acks_1["met"] is True
    assert acks_1["shown"] == "0.91× direct"
    assert figures["produce acks=all throughput"]["met"] is False  # 0.85×
    assert figures["consume throughput"]["met"] is False  # 0.80×
    p50 = figures["end-to-end p50 at 10 % load"]
    assert p50["figure"] == pytest.approx(0.256) and p50["met"] is True and p50["shown"] == "+0.26 ms"
    cpu = figures["proxy CPU, consume"]
    assert cpu["met"] is None and cpu["aim"] == "Kroxylicious: 10 mcore per MB/s"
    assert figures["memory per client connection"] == {
        "topology": "1 broker", "what": "memory per client connection", "figure": 61.48, "shown": "61.5 KiB",
        "aim": None, "met": None,
    }  # fmt: skip


def test_a_ratio_just_under_the_aim_is_not_met_even_when_it_rounds_to_it() -> None:
    proxied = copy.deepcopy(PROXIED)
    proxied["phases"]["produce_acks_1"]["mb_per_s"] = 412.3 * 0.8999
    figures = {f["what"]: f for f in proxy_overhead(compare_rows(_report(DIRECT, proxied)))}
    assert figures["produce acks=1 throughput"]["shown"] == "0.90× direct"
    assert figures["produce acks=1 throughput"]["met"] is False


def test_added_latency_over_the_aim_is_not_met_and_other_loads_are_not_judged() -> None:
    proxied = copy.deepcopy(PROXIED)
    proxied["phases"]["latency_10"]["latency_ms"]["p50"] = 2.9
    figures = {f["what"]: f for f in proxy_overhead(compare_rows(_report(DIRECT, proxied)))}
    assert figures["end-to-end p50 at 10 % load"]["met"] is False
    # A run without a 10 % load has no p50 figure to judge.
    report = _report(DIRECT, PROXIED)
    report["settings"]["latency_loads"] = [0.5]
    for system in report["systems"].values():
        system["phases"]["latency_50"] = system["phases"].pop("latency_10")
    assert "end-to-end p50 at 10 % load" not in {f["what"] for f in proxy_overhead(compare_rows(report))}


def test_three_brokers_are_judged_apart_from_one() -> None:
    direct_3 = _system("barnabas", "barnabas (3 brokers)", {"produce_acks_1": _throughput("produce", 200.0)}, 3)
    proxied_3 = _system(
        "barnabas-proxy", "barnabas via proxy (3 brokers)",
        {"produce_acks_1": _throughput("produce", 190.0, proxy_cores=0.5)}, 3,
    )  # fmt: skip
    figures = proxy_overhead(compare_rows(_report(DIRECT, PROXIED, direct_3, proxied_3)))
    three = [f for f in figures if f["topology"] == "3 brokers, RF=3"]
    assert [(f["what"], f["figure"]) for f in three] == [
        ("produce acks=1 throughput", 190.0 / 200.0),
        ("proxy CPU, produce acks=1", pytest.approx(0.5 * 1000 / 190.0)),
    ]


def test_the_markdown_page_has_the_proxy_section_cpu_and_latency_basis() -> None:
    page = compare_markdown(_report(DIRECT, PROXIED))
    assert "Proxy overhead (barnabas via one proxy node against barnabas direct, the same brokers):" in page
    assert "- 1 broker: produce acks=all throughput 0.85× direct (≥ 0.9× direct: not met)" in page
    assert "- 1 broker: end-to-end p50 at 10 % load +0.26 ms (≤ +0.5 ms: met)" in page
    assert "- 1 broker: proxy CPU, consume 1.2 mcore per MB/s (Kroxylicious: 10 mcore per MB/s)" in page
    assert "proxy RSS 40,000 → 52,296 KiB (50,000 once closed), sockets 3 → 403 (2.0 per connection)" in page
    assert "- barnabas via proxy: broker 0.50–0.50 cores, proxy 0.30–0.80 cores, other" in page
    assert "- barnabas via proxy (loads are shares of barnabas's acks=1 rate): 10% = " in page
    assert "- barnabas: 10% = " in page  # its own rate: no note


def test_the_written_report_carries_rows_and_proxy_overhead(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import json

    paths = write_compare_report(_report(DIRECT, PROXIED), tmp_path)
    written = json.loads((tmp_path / "latest.json").read_text())
    assert written["proxy_overhead"] == proxy_overhead(compare_rows(_report(DIRECT, PROXIED)))
    assert _row(written["rows"], "produce acks=1")["ratios"]["proxy/direct"] == 375.0 / 412.3
    assert tmp_path / "latency.png" in paths  # both systems drawn, the proxy in a colour of its own


def _at_rate(report: dict[str, Any], rate: int, p50s: dict[str, float]) -> dict[str, Any]:
    """``report`` with a fixed-rate latency run of ``rate`` records/s on each system, at the given p50."""
    report["settings"]["latency_rates"] = [rate]
    for key, p50 in p50s.items():
        run = {**_latency(p50, p50 * 3, p50 * 5), "load": None, "target_records_per_s": rate}
        report["systems"][key]["phases"][f"latency_rate_{rate}"] = run
    return report


def test_fixed_rate_latency_has_rows_and_its_proxy_p50_is_judged() -> None:
    report = _at_rate(_report(DIRECT, PROXIED, KAFKA), 2000, {"barnabas": 1.5, "barnabas-proxy": 2.25})
    rows = compare_rows(report)
    p50 = _row(rows, "end-to-end p50 at 2,000 records/s")
    assert p50["values"]["barnabas"] == 1.5 and p50["proxy_added_ms"] == pytest.approx(0.75)
    assert _row(rows, "end-to-end p99 at 2,000 records/s")["values"]["barnabas-proxy"] == pytest.approx(6.75)
    figures = {f["what"]: f for f in proxy_overhead(rows)}
    fixed = figures["end-to-end p50 at 2,000 records/s"]
    assert (fixed["shown"], fixed["met"]) == ("+0.75 ms", False)
    page = compare_markdown(report)
    assert "- barnabas: 10% = 41.2 MB/s" in page and ", 2,000 records/s = 41.2 MB/s" in page


def test_without_fixed_rates_there_are_no_fixed_rate_rows() -> None:
    rows = compare_rows(_report(DIRECT, PROXIED))
    assert not [row for row in rows if "records/s" in row["workload"]]
