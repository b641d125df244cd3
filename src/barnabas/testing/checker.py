"""The read-back checker of the queue workload: every way a run can break barnabas's guarantees.

A run is what ``barnabas.testing.workload.Workload`` recorded: the values the producer had
acknowledged (and at which offsets), what a consumer read back, each partition's high watermark,
the consumer group's acknowledged offset commits and the group's committed offsets afterwards.
The checks are Kafka's ReplicationTest (tests/kafkatest/tests/core/replication_test.py: every
acknowledged value consumed exactly once, in per-partition produce order) and Jepsen's queue
checker (each acknowledged value at the offset its acknowledgement named, no value that was never
sent or sent elsewhere, the high watermark past every acknowledged offset, committed group offsets
never going backwards). Pure: no client, no I/O, so a crafted run tests it.

Rules it keeps:

- Value ``v`` is sent to partition ``v % partitions``; values ``0 .. sent-1`` were handed out.
- A commit counts once the coordinator acknowledged it for that partition; acknowledged commits of
  a partition must never decrease, and the group's committed offset read after the run must not
  be behind the last one (a later commit, acknowledged or not, may have moved it forward).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

__all__ = ["WorkloadResult"]


@dataclass
class WorkloadResult:
    """One run's record; ``problems()`` names every broken guarantee."""

    acked: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))  # partition -> values
    failed: list[str] = field(default_factory=list)
    consumed: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (offset, value)
    #: partition -> {offset: value} as the delivery reports named them.
    acked_at: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    #: How many values the producer handed out (0 .. sent-1, value v to partition v % partitions).
    sent: int = 0
    partitions: int = 0
    #: Each partition's high watermark as a fresh consumer found it (``Workload.read_back``).
    ends: dict[int, int] = field(default_factory=dict)
    #: partition -> the offsets the group coordinator acknowledged committing, in the order acknowledged.
    commits: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    #: Commits the coordinator refused or that failed (kept for a failed run; not an anomaly by themselves).
    commit_failures: list[str] = field(default_factory=list)
    #: partition -> the group's committed offset read after the run (None: not read, so not checked).
    group_offsets: dict[int, int] | None = None
    #: Why the group's committed offsets could not be read after the run, if they could not.
    group_offsets_error: str | None = None

    @property
    def acked_count(self) -> int:
        return sum(len(values) for values in self.acked.values())

    def problems(self) -> list[str]:
        """Every way the run broke the guarantees (empty when it kept them)."""
        found = []
        for partition, values in sorted(self.acked.items()):
            found += self._partition_problems(partition, values)
        for partition, consumed in sorted(self.consumed.items()):
            unknown = [v for _, v in consumed if not 0 <= v < self.sent or v % max(self.partitions, 1) != partition]
            if self.sent and unknown:
                found.append(f"partition {partition}: {len(unknown)} values never sent there, e.g. {unknown[:5]}")
        return found + self._commit_problems()

    def _partition_problems(self, partition: int, values: list[int]) -> list[str]:
        found = []
        consumed = self.consumed.get(partition, [])
        offsets = [offset for offset, _ in consumed]
        if offsets != sorted(set(offsets)):
            found.append(f"partition {partition}: offsets not strictly increasing")
        seen = [value for _, value in consumed]
        if len(seen) != len(set(seen)):
            # The offsets let a failed run's segment files tell who wrote each copy (which producer epoch).
            where: dict[int, list[int]] = {}
            for offset, value in consumed:
                where.setdefault(value, []).append(offset)
            twice = [(value, offsets) for value, offsets in where.items() if len(offsets) > 1]
            examples = ", ".join(f"{value} at offsets {offsets}" for value, offsets in twice[:3])
            found.append(f"partition {partition}: {len(seen) - len(set(seen))} values consumed twice, e.g. {examples}")
        missing = set(values) - set(seen)
        if missing:
            found.append(f"partition {partition}: {len(missing)} acked values lost, e.g. {sorted(missing)[:5]}")
        if seen != sorted(seen):
            found.append(f"partition {partition}: values out of produce order")
        at = dict(consumed)
        moved = [(o, v) for o, v in self.acked_at.get(partition, {}).items() if o in at and at[o] != v]
        if moved:
            found.append(f"partition {partition}: {len(moved)} acked offsets hold another value, e.g. {moved[:3]}")
        end = self.ends.get(partition)
        highest = max(self.acked_at.get(partition, {}), default=-1)
        if end is not None and end <= highest:
            found.append(f"partition {partition}: high watermark {end} not past acked offset {highest}")
        return found

    def _commit_problems(self) -> list[str]:
        """Jepsen's check of consumer groups: committed offsets never go backwards."""
        found = []
        if self.group_offsets_error is not None:
            found.append(f"the group's committed offsets could not be read: {self.group_offsets_error}")
        if self.group_offsets is not None and any(self.consumed.values()) and not any(self.commits.values()):
            found.append("no offset commit was acknowledged, so none could be checked")
        for partition, offsets in sorted(self.commits.items()):
            back = [(before, after) for before, after in pairwise(offsets) if after < before]
            if back:
                before, after = back[0]
                found.append(
                    f"partition {partition}: acknowledged commits went backwards {len(back)} times, "
                    f"e.g. to {after} after {before}"
                )
            final = None if self.group_offsets is None else self.group_offsets.get(partition)
            if self.group_offsets is not None and offsets and (final is None or final < offsets[-1]):
                found.append(
                    f"partition {partition}: the group's committed offset {final} is behind the last "
                    f"acknowledged commit {offsets[-1]}"
                )
        return found
