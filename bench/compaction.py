"""Log compaction: how long a cleaning pass takes, and what it costs produce while it runs.

1. In process: a compacted PartitionLog of ``--megabytes`` MB (16 MiB segments, batches of 100
   records of 100-byte random values, as a client would send them), cleaned once by the log
   cleaner's three steps (plan on this thread, the pass, the swap), for a few key cardinalities
   and codecs. Reports each step's time, MB/s, records kept and batches rebuilt.
2. A real ``barnabas broker``: a compacted topic filled with the same kind of data and a
   ``min.cleanable.dirty.ratio`` of 1.0 (never cleaned), then a producer (acks=1, linger 5 ms)
   writes ``--messages`` 100-byte records to another topic three times: twice as a baseline, and
   once right after the ratio is lowered to 0.01, so the pass runs on the broker's worker thread
   during the measurement. Reports messages/s and delivery latency percentiles.

Writes bench/results/compaction.json and compaction.md:

    python bench/compaction.py [--megabytes 100] [--messages 2500000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from barnabas.log import LogConfig, LogManager  # noqa: E402
from barnabas.protocol import Compression, build_record_batch  # noqa: E402
from barnabas.testing import Broker  # noqa: E402

T0 = 1_700_000_000_000
VALUE_BYTES = 100
RESULTS = ROOT / "bench" / "results"


def clean_in_process(megabytes: int, keys: int, codec: Compression) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    logs = LogManager([base], LogConfig(), 0, "bench")
    try:
        logs.load_all(T0)
        config = LogConfig(cleanup_policy="compact", segment_bytes=16 << 20, min_cleanable_dirty_ratio=0.0)
        log = logs.create("bench", 0, None, config, T0)
        rnd = random.Random(1)
        records = 0
        while log.size_bytes < megabytes << 20:
            batch = [(b"key-%d" % rnd.randrange(keys), rnd.randbytes(VALUE_BYTES)) for _ in range(100)]
            log.append_as_leader(bytearray(build_record_batch(batch, base_timestamp_ms=T0, compression=codec)), 0, T0)
            records += 100
        log.roll(T0)
        size = log.size_bytes
        started = time.perf_counter()
        job = logs.begin_cleaning(T0 + 1)
        assert job is not None
        planned = time.perf_counter()
        result = logs.cleaner.clean(job)
        cleaned = time.perf_counter()
        assert logs.cleaner.finish(result, T0 + 2)
        swapped = time.perf_counter()
        stats = result.stats
        return {
            "codec": codec.name.lower(),
            "keys": keys,
            "log_mb": round(size / 1e6, 1),
            "records": records,
            "plan_ms": round((planned - started) * 1000, 2),
            "pass_s": round(cleaned - planned, 2),
            "mb_per_s": round(size / 1e6 / (cleaned - planned), 1),
            "swap_ms": round((swapped - cleaned) * 1000, 2),
            "records_kept": stats.messages_retained,
            "mb_after": round(stats.bytes_retained / 1e6, 2),
            "batches_rebuilt": stats.batches_rebuilt,
        }
    finally:
        logs.close()
        shutil.rmtree(base, ignore_errors=True)


def produce_run(bootstrap: str, messages: int) -> dict[str, Any]:
    latencies: list[float] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "queue.buffering.max.messages": 2_000_000}
    )
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    for i in range(messages):
        sent = time.perf_counter()
        producer.produce(
            "plain",
            key=b"k",
            value=value,
            partition=0,
            on_delivery=lambda _e, _m, sent=sent: latencies.append(time.perf_counter() - sent),
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "msg_per_s": round(messages / elapsed),
        "mb_per_s": round(messages * VALUE_BYTES / elapsed / 1e6, 1),
        "seconds": round(elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1),
    }


def produce_while_cleaning(megabytes: int, messages: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-compaction-broker-"))
    broker = Broker(
        base / "data",
        extra_args=["--set", "log.retention.check.interval.ms=100", "--set", "log.cleaner.backoff.ms=100"],
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        compacted = {"cleanup.policy": "compact", "segment.bytes": str(16 << 20), "min.cleanable.dirty.ratio": "1.0"}
        topics = [NewTopic("compacted", 1, 1, config=compacted), NewTopic("plain", 1, 1)]
        for future in admin.create_topics(topics).values():
            future.result(30)
        filler = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "linger.ms": 5,
                "compression.type": "lz4",
                "batch.size": 65536,
                "queue.buffering.max.messages": 2_000_000,
            }
        )
        rnd = random.Random(1)
        for i in range(megabytes * 9_000):  # about 115 bytes a record in the log
            filler.produce("compacted", key=b"key-%d" % rnd.randrange(10_000), value=rnd.randbytes(VALUE_BYTES))
            if i % 10_000 == 0:
                filler.poll(0)
        assert filler.flush(300) == 0
        runs = {
            "baseline": produce_run(broker.bootstrap, messages),
            "baseline_again": produce_run(broker.bootstrap, messages),
        }
        lower = ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[lower])
        admin.incremental_alter_configs([resource])[resource].result(30)
        runs["while_cleaning"] = produce_run(broker.bootstrap, messages)
    finally:
        broker.stop()
        shutil.rmtree(base, ignore_errors=True)
    runs["cleaner_log"] = [line for line in broker.log_text().splitlines() if "barnabas.log.cleaner_manager" in line]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--messages", type=int, default=2_500_000)
    args = parser.parse_args()
    passes = [
        clean_in_process(args.megabytes, keys, codec)
        for keys, codec in [(10_000, Compression.NONE), (10_000, Compression.LZ4), (500_000, Compression.LZ4)]
    ]
    for row in passes:
        print(row, flush=True)
    broker = produce_while_cleaning(args.megabytes, args.messages)
    print(json.dumps(broker, indent=2), flush=True)
    results = {"date": datetime.date.today().isoformat(), "passes": passes, "broker": broker}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compaction.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "| codec | keys | log MB | records | pass s | MB/s | swap ms | kept | MB after | rebuilt batches |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['codec']} | {r['keys']:,} | {r['log_mb']} | {r['records']:,} | {r['pass_s']} | {r['mb_per_s']} | "
            f"{r['swap_ms']} | {r['records_kept']:,} | {r['mb_after']} | {r['batches_rebuilt']:,} |"
            for r in passes
        ),
        "",
        "| produce run | msg/s | MB/s | p50 ms | p99 ms |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {run['msg_per_s']:,} | {run['mb_per_s']} | {run['p50_ms']} | {run['p99_ms']} |"
            for name, run in broker.items()
            if name != "cleaner_log"
        ),
    ]
    (RESULTS / "compaction.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
