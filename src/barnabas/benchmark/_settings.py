"""What one benchmark run measures, and the librdkafka settings its clients use.

Rules this module keeps:

- Every client setting the benchmark relies on is written here, once, so the JSON report can
  record exactly what was measured; ``--producer-config``/``--consumer-config`` overrides are
  applied on top and recorded too.
- Producers send 1 KiB (``record_size``) unkeyed, uncompressed records with ``linger.ms=5`` and
  1 MiB batches; ``message.max.bytes`` is raised so librdkafka never caps a batch below
  ``batch.size`` (it bounds a whole MessageSet, framing included, at 1 000 000 by default).
- Only failed deliveries come back to Python (``delivery.report.only.error``): a callback per
  record would cost the producer process more CPU than librdkafka spends sending it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BATCH_BYTES",
    "BenchError",
    "BenchSettings",
    "consumer_config",
    "producer_config",
]

#: librdkafka batch.size: the producer's batches (and so the broker's appends) are up to 1 MiB.
BATCH_BYTES = 1 << 20
#: The issue's aims on a 2-core machine, in MB/s (10**6 bytes per second).
PRODUCE_AIM_MB_S = 150.0
CONSUME_AIM_MB_S = 300.0


class BenchError(Exception):
    """The benchmark could not run or measured something wrong; the message is one line."""


@dataclass(frozen=True)
class BenchSettings:
    """One ``barnabas bench`` invocation.

    ``records`` (total per produce run) wins over ``duration_s`` when given. Each entry of
    ``producers`` is one produce run per acks value, on its own topic; the consume phase reads
    every topic produced in the same repetition.
    """

    output: Path = Path("bench/results")
    bootstrap: str | None = None
    broker_pid: int | None = None
    duration_s: float = 15.0
    records: int | None = None
    record_size: int = 1024
    partitions: int = 4
    producers: tuple[int, ...] = (1,)
    consumers: int = 1
    acks: tuple[str, ...] = ("1", "all")
    runs: int = 1
    loopback_s: float = 4.0
    loopback_in_flight: int = 5
    skip_loopback: bool = False
    skip_consume: bool = False
    profile: bool = False
    profile_rate: int = 100
    profile_native: bool = False
    broker_settings: tuple[str, ...] = ()
    producer_overrides: dict[str, str] = field(default_factory=dict)
    consumer_overrides: dict[str, str] = field(default_factory=dict)
    show_progress: bool = True
    #: Before each phase, wait up to this long for the machine to be quiet (see _runner).
    wait_idle_s: float = 0.0

    def validate(self) -> None:
        """Raise BenchError for settings that cannot be measured."""
        if self.records is None and self.duration_s <= 0:
            raise BenchError("--duration must be positive")
        if self.records is not None and self.records <= 0:
            raise BenchError("--records must be positive")
        if self.record_size <= 0 or self.record_size > BATCH_BYTES // 2:
            raise BenchError(f"--record-size must be between 1 and {BATCH_BYTES // 2}")
        if self.partitions <= 0:
            raise BenchError("--partitions must be positive")
        if not self.producers or min(self.producers) <= 0:
            raise BenchError("--producers must be positive counts")
        if self.consumers <= 0:
            raise BenchError("--consumers must be positive")
        if not self.acks or any(a not in ("0", "1", "all") for a in self.acks):
            raise BenchError("--acks takes 0, 1 and all")
        if self.runs <= 0:
            raise BenchError("--runs must be positive")
        if self.loopback_s <= 0 or self.loopback_in_flight <= 0:
            raise BenchError("--loopback-seconds and --loopback-in-flight must be positive")
        if self.profile and self.bootstrap is not None and self.broker_pid is None:
            raise BenchError("--profile needs a broker to attach to: drop --bootstrap or give --broker-pid")
        if self.wait_idle_s < 0:
            raise BenchError("--wait-idle must not be negative")
        if self.profile_rate <= 0:
            raise BenchError("--profile-rate must be positive")


def producer_config(bootstrap: str, acks: str, overrides: dict[str, str]) -> dict[str, Any]:
    """librdkafka producer settings for one produce run."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "barnabas-bench-producer",
        "log_level": 0,  # failures come back through error_cb and delivery reports instead
        "acks": acks,
        "linger.ms": 5,
        "batch.size": BATCH_BYTES,
        # 1 MiB of 1 KiB records is ~1 000 records; the default (10 000) would do, but a
        # smaller record size must not make the count the limit instead of the bytes.
        "batch.num.messages": 1_000_000,
        "message.max.bytes": 4 * BATCH_BYTES,
        "compression.type": "none",
        "enable.idempotence": False,
        # Room for several batches per partition in the client's queue (1 KiB records).
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "delivery.report.only.error": True,
    }
    config.update(overrides)
    return config


def consumer_config(bootstrap: str, overrides: dict[str, str]) -> dict[str, Any]:
    """librdkafka consumer settings for the consume phase (assign(), no group membership)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "barnabas-bench-consumer",
        "log_level": 0,  # failures come back through error_cb instead
        "group.id": "barnabas-bench",  # required by the client; assign() never joins the group
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        # Large fetches: up to 2 MiB per partition (two producer batches), 50 MiB per response,
        # and the broker answers as soon as 1 MiB is there (or after 100 ms). 2 MiB per partition
        # measured best on the 2-core VM: 8 MiB doubled the broker's CPU per MB (it reads and
        # copies each partition's data into fresh multi-MiB buffers), 1 MiB was no faster.
        "fetch.max.bytes": 50 * BATCH_BYTES,
        "max.partition.fetch.bytes": 2 * BATCH_BYTES,
        "fetch.min.bytes": BATCH_BYTES,
        "fetch.wait.max.ms": 100,
        # Keep fetching while Python drains: 256 MiB / 1 M records of prefetch per consumer.
        "queued.max.messages.kbytes": 256 * 1024,
        "queued.min.messages": 1_000_000,
        "check.crcs": False,
    }
    config.update(overrides)
    return config
