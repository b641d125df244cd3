"""Device telemetry readings as JSON records, deterministic for a given seed.

Rules this module keeps, because the pipeline's tests compute their expected output from it:

- `telemetry(spec)` yields the same records in the same order for the same `TelemetrySpec`.
- Every reading has a unique `reading_id`; a duplicate is the same reading's bytes sent again a few
  records later (an at-least-once producer's retry), never a different reading with a reused id.
- A late reading arrives at most `max_late_ticks` ticks after its own tick, so its event time trails
  the newest one seen by less than `max_late_ticks * tick_seconds` (keep that under the job's watermark
  delay, or Spark drops it as too late and the expected aggregates no longer hold).
- Malformed records are extra lines; they never replace a reading.
- The stream ends with one closing reading per device, `close_after_seconds` after the last tick, so the
  watermark passes every earlier one-minute window and append mode emits them all.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
MALFORMED_KINDS = ("truncated", "not-json", "wrong-type", "missing-field", "bad-timestamp", "not-an-object")


class Kind(StrEnum):
    READING = "reading"
    DUPLICATE = "duplicate"
    MALFORMED = "malformed"
    CLOSING = "closing"


@dataclass(frozen=True, slots=True)
class Reading:
    """One sensor reading; `ts` is its event time."""

    reading_id: str
    device_id: str
    ts: datetime
    metric: str
    value: float

    def to_json(self) -> bytes:
        return json.dumps({
            "reading_id": self.reading_id,
            "device_id": self.device_id,
            "ts": self.ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "metric": self.metric,
            "value": self.value,
        }).encode()  # fmt: skip


@dataclass(frozen=True, slots=True)
class Record:
    """One record to produce: `reading` is set for readings, duplicates and closing readings."""

    key: bytes
    value: bytes
    kind: Kind
    reading: Reading | None = None
    malformed_kind: str | None = None


@dataclass(frozen=True, slots=True)
class TelemetrySpec:
    """What to generate; `readings` counts distinct readings (duplicates and malformed lines are extra)."""

    readings: int
    seed: int = 7
    devices: int = 12
    tick_seconds: float = 2.0
    duplicate_rate: float = 0.05
    malformed_rate: float = 0.0
    late_rate: float = 0.05
    max_late_ticks: int = 3
    spike_rate: float = 0.03
    close_after_seconds: float = 180.0


def telemetry(spec: TelemetrySpec) -> Iterator[Record]:
    """The records for `spec`, in production order."""
    rng = random.Random(spec.seed)
    temperatures = [20.0 + rng.uniform(-3, 3) for _ in range(spec.devices)]
    held: list[tuple[int, Record]] = []  # late readings and pending duplicates, by release index
    last_ts = EPOCH
    for index in range(spec.readings):
        tick, device = divmod(index, spec.devices)
        temperatures[device] += rng.gauss(0, 0.4)
        value = temperatures[device]
        if rng.random() < spec.spike_rate:
            value = 80.0 + rng.uniform(1, 25)
        ts = EPOCH + timedelta(seconds=tick * spec.tick_seconds, milliseconds=device * 10 + rng.randrange(10))
        last_ts = max(last_ts, ts)
        reading = Reading(f"r-{spec.seed}-{index:09d}", _device_id(device), ts, "temperature_c", round(value, 3))
        record = Record(reading.device_id.encode(), reading.to_json(), Kind.READING, reading)
        released = index
        if rng.random() < spec.late_rate:
            # Released after at most max_late_ticks more ticks of readings.
            released = index + rng.randrange(1, spec.max_late_ticks * spec.devices)
            held.append((released, record))
        else:
            yield record
        if rng.random() < spec.duplicate_rate:
            # Always after the original (held items with equal release indexes keep their order).
            duplicate = Record(record.key, record.value, Kind.DUPLICATE, reading)
            held.append((released + rng.randrange(1, spec.devices), duplicate))
        if rng.random() < spec.malformed_rate:
            yield _malformed(rng, reading)
        due = [item for item in held if item[0] <= index]
        held = [item for item in held if item[0] > index]
        for _, late in sorted(due, key=lambda item: item[0]):
            yield late
    for _, late in sorted(held, key=lambda item: item[0]):
        yield late
    closing_ts = last_ts + timedelta(seconds=spec.close_after_seconds)
    for device in range(spec.devices):
        reading = Reading(f"r-{spec.seed}-close-{device:04d}", _device_id(device), closing_ts, "temperature_c", 0.0)
        yield Record(reading.device_id.encode(), reading.to_json(), Kind.CLOSING, reading)


def _device_id(device: int) -> str:
    return f"device-{device:03d}"


def _malformed(rng: random.Random, reading: Reading) -> Record:
    """A broken line derived from a reading (the reading itself is still sent intact)."""
    kind = rng.choice(MALFORMED_KINDS)
    fields: dict[str, object] = json.loads(reading.to_json())
    fields["reading_id"] = f"{reading.reading_id}-bad"
    if kind == "truncated":
        text = json.dumps(fields)
        value = text[: rng.randrange(5, len(text) - 5)].encode()
    elif kind == "not-json":
        value = f"device {reading.device_id} says {reading.value}".encode()
    elif kind == "wrong-type":
        value = json.dumps({**fields, "value": "very hot"}).encode()
    elif kind == "missing-field":
        del fields["device_id"]
        value = json.dumps(fields).encode()
    elif kind == "bad-timestamp":
        value = json.dumps({**fields, "ts": "yesterday at noon"}).encode()
    else:
        value = json.dumps([fields]).encode()
    return Record(reading.device_id.encode(), value, Kind.MALFORMED, None, kind)
