"""End-to-end latency at fixed rates, direct and through one proxy node, in the same run.

One barnabas broker and one `barnabas proxy` node in front of it (barnabas.testing). For each rate,
one librdkafka producer (``linger.ms=1``, 1 KiB records stamped with the wall clock when produced)
sends at that rate for ``--seconds`` to a 4-partition topic, and one consumer in the same process
(``fetch.wait.max.ms=100``, ``fetch.min.bytes=1``) reads them; a record's latency is the time from
its stamp to its arrival at the consumer. First direct, then through the proxy, each on a topic of
its own. ``bench compare``'s latency rows load the machine at shares of its maximum rate; this one
keeps the load light and fixed, so the proxy's own added time shows.

    python bench/proxy_latency.py [--rates 2000,10000] [--seconds 8]

Writes ``bench/results/proxy-latency.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from barnabas.testing import Broker, free_ports  # noqa: E402
from barnabas.testing.proxy import ProxyNode  # noqa: E402

PARTITIONS = 4
RECORD_BYTES = 1024
STAMP_BYTES = 20


def measure(bootstrap: str, topic: str, rate: int, seconds: float) -> dict[str, Any]:
    """Produce ``rate`` records/s for ``seconds`` and time each one's arrival at a consumer."""
    latencies: list[float] = []
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
         "fetch.min.bytes": 1, "fetch.wait.max.ms": 100, "log_level": 0}
    )  # fmt: skip
    consumer.subscribe([topic])
    while not consumer.assignment():
        consumer.poll(0.2)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.1)
            value = message.value() if message is not None and message.error() is None else None
            if value is not None:
                latencies.append(time.time() - float(value[:STAMP_BYTES]))

    reader = threading.Thread(target=consume)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "log_level": 0})
    padding = b"x" * (RECORD_BYTES - STAMP_BYTES)
    start, sent = time.monotonic(), 0
    while (now := time.monotonic()) < start + seconds:
        due = start + sent / rate
        if now < due:
            time.sleep(due - now)
        producer.produce(topic, b"%20.6f" % time.time() + padding)
        producer.poll(0)
        sent += 1
    producer.flush(30)
    deadline = time.monotonic() + 10
    while len(latencies) < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join()
    consumer.close()
    latencies.sort()
    ms = [round(latencies[int(len(latencies) * q)] * 1000, 2) for q in (0.5, 0.99)] if latencies else [None, None]
    return {"rate": rate, "sent": sent, "received": len(latencies), "p50_ms": ms[0], "p99_ms": ms[1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="2000,10000", help="records per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per rate and path")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="barnabas-proxy-latency-") as tmp:
        broker = Broker(Path(tmp) / "broker").start()
        (port,) = free_ports(1)
        proxy = ProxyNode(Path(tmp), broker.bootstrap, port, peers=[f"127.0.0.1:{port}"]).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for rate in rates:
                for path, bootstrap in (("direct", broker.bootstrap), ("proxy", proxy.bootstrap)):
                    topic = f"latency-{path}-{rate}"
                    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
                    result = {"path": path, **measure(bootstrap, topic, rate, args.seconds)}
                    print(result, flush=True)
                    results.append(result)
        finally:
            proxy.stop()
            broker.stop()
    args.output.mkdir(parents=True, exist_ok=True)
    report = {"run_at": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": args.seconds, "results": results}
    (args.output / "proxy-latency.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
