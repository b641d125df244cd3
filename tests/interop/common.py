"""What every interop driver produces, and the one check applied to every driver's report
(:func:`problems_in`).

Contract (shared by the Python, node and Java drivers):

* message i (0 <= i < count) has key ``key-<i>`` and value :func:`value_for` (i) — ``value-<i>-``
  followed by a deterministic pad up to :data:`VALUE_SIZE` characters. The node and Java drivers
  implement the same function; the checker recomputes it, so any drift fails loudly.
* the driver writes one JSON document::

      {"produced": N, "records": [[partition, offset, key, value], ...],
       "earliest": {"<p>": o}, "latest": {"<p>": o}, "errors": ["..."], ...}

  ``produced`` counts acknowledged messages, ``records`` are in the order the consumer returned
  them, ``errors`` holds non-fatal problems (delivery failures, delete-topic failures). Extra keys
  (``client``, ``client_version``, ``timings_ms``) are informational.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

CLIENTS = ("confluent", "kafka-python", "aiokafka", "kafkajs", "java")
MODES = ("plain", "gzip", "snappy", "lz4", "zstd", "idempotent")
CODECS = ("gzip", "snappy", "lz4", "zstd")

VALUE_SIZE = 100
_PAD_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def key_for(i: int) -> str:
    return f"key-{i}"


def value_for(i: int) -> str:
    """``value-<i>-`` + pad: pad char j is ALPHABET[(i + j) % 36]; total VALUE_SIZE chars."""
    prefix = f"value-{i}-"
    n = len(_PAD_ALPHABET)
    return prefix + "".join(_PAD_ALPHABET[(i + j) % n] for j in range(VALUE_SIZE - len(prefix)))


def codec_of(mode: str) -> str | None:
    """The compression codec a mode asks for (None for plain and idempotent)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    return mode if mode in CODECS else None


def _int_keys(mapping: Mapping[Any, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in mapping.items()}


def _clip(items: Sequence[Any], limit: int = 10) -> str:
    shown = ", ".join(map(str, items[:limit]))
    return f"[{shown}{', ...' if len(items) > limit else ''}] ({len(items)} total)"


def problems_in(report: Mapping[str, Any], count: int, partitions: int) -> list[str]:
    """Every way ``report`` departs from a correct produce/consume/list-offsets run (empty = correct)."""
    problems: list[str] = []
    errors = list(report.get("errors") or [])
    if errors:
        problems.append(f"driver reported errors: {_clip(errors, 5)}")
    if report.get("produced") != count:
        problems.append(f"produced (acknowledged) {report.get('produced')} of {count}")

    per_partition: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)  # p -> [(offset, i)]
    seen: collections.Counter[int] = collections.Counter()
    bad_records: list[str] = []
    for rec in report.get("records") or []:
        partition, offset, key, value = rec
        if not (isinstance(key, str) and key.startswith("key-") and key[4:].isdigit()):
            bad_records.append(f"p{partition}@{offset} key={key!r}")
            continue
        i = int(key[4:])
        if not 0 <= i < count:
            bad_records.append(f"p{partition}@{offset} key {key!r} out of range")
            continue
        if value != value_for(i):
            bad_records.append(f"p{partition}@{offset} {key}: value {value!r} != expected")
        seen[i] += 1
        per_partition[int(partition)].append((int(offset), i))
    if bad_records:
        problems.append(f"malformed records: {_clip(bad_records, 5)}")

    missing = [i for i in range(count) if seen[i] == 0]
    duplicated = sorted(i for i, n in seen.items() if n > 1)
    if missing:
        problems.append(f"never consumed: keys {_clip(missing)}")
    if duplicated:
        problems.append(f"consumed more than once: keys {_clip(duplicated)}")

    unexpected = sorted(p for p in per_partition if not 0 <= p < partitions)
    if unexpected:
        problems.append(f"records from partitions {unexpected}, topic has {partitions}")
    empty = [p for p in range(partitions) if not per_partition.get(p)]
    if empty:
        problems.append(f"partitions {empty} received no messages (partitioner or metadata problem)")

    for p in sorted(per_partition):
        offsets = [o for o, _ in per_partition[p]]
        if offsets != list(range(len(offsets))):
            wrong = next(n for n, o in enumerate(offsets) if o != n)
            problems.append(
                f"partition {p}: offsets are not 0..{len(offsets) - 1} in order; "
                f"position {wrong} has offset {offsets[wrong]} (around: {offsets[max(0, wrong - 3) : wrong + 4]})"
            )
        seqs = [i for _, i in per_partition[p]]
        inversions = [(a, b) for a, b in itertools.pairwise(seqs) if b <= a]
        if inversions:
            problems.append(
                f"partition {p}: produce order not kept, e.g. key {inversions[0][1]} after "
                f"key {inversions[0][0]} ({len(inversions)} inversions)"
            )

    earliest = _int_keys(report.get("earliest") or {})
    latest = _int_keys(report.get("latest") or {})
    want_earliest = dict.fromkeys(range(partitions), 0)
    want_latest = {p: len(per_partition.get(p, [])) for p in range(partitions)}
    if earliest != want_earliest:
        problems.append(f"earliest offsets {earliest} != {want_earliest}")
    if latest != want_latest:
        problems.append(f"latest offsets {latest} != consumed counts {want_latest}")
    return problems
