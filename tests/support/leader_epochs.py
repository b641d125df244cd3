"""Who led what, read back from the brokers' logs: no two brokers may hold one epoch of one leadership.

Every broker logs each partition leadership it takes (``<topic>: leading partitions 0-2 at epoch 3``,
ReplicaManager's RoleChanges, "leading on" when it keeps a partition at a new epoch) and each
controller term it wins (``broker 1 is the controller (epoch 4)``). An epoch is a fencing token (Kafka's
leader epoch, KIP-101; its controller epoch): two brokers acting under the same one is the split
brain epochs exist to rule out. Logs are read whole, every run of a restarted broker included.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

__all__ = ["controller_terms", "leaderships", "shared_epochs"]

_LEADING = re.compile(r"replication\.manager: (\S+): (?:leading on|leading) (.+)$", re.MULTILINE)
_AT_EPOCH = re.compile(r"partitions? ([\d, -]+) at epoch (\d+)")
_CONTROLLER = re.compile(r"broker (\d+) is the controller \(epoch (\d+)\)")


def _partitions(ranges: str) -> Iterable[int]:
    for piece in ranges.split(","):
        first, _, last = piece.strip().partition("-")
        yield from range(int(first), int(last or first) + 1)


def leaderships(logs: Mapping[int, str]) -> dict[tuple[str, int, int], set[int]]:
    """(topic, partition, leader epoch) -> the brokers whose log says they led it then."""
    found: dict[tuple[str, int, int], set[int]] = defaultdict(set)
    for broker, text in logs.items():
        for topic, described in _LEADING.findall(text):
            for ranges, epoch in _AT_EPOCH.findall(described):
                for partition in _partitions(ranges):
                    found[(topic, partition, int(epoch))].add(broker)
    return found


def controller_terms(logs: Mapping[int, str]) -> dict[int, set[int]]:
    """Controller epoch -> the brokers that logged winning it."""
    found: dict[int, set[int]] = defaultdict(set)
    for text in logs.values():
        for broker, epoch in _CONTROLLER.findall(text):
            found[int(epoch)].add(int(broker))
    return found


def shared_epochs(logs: Mapping[int, str]) -> list[str]:
    """Every epoch two brokers held at once, as a sentence each (empty when epochs fenced as they must)."""
    problems = [
        f"{topic}-{partition} led by brokers {sorted(brokers)} in epoch {epoch}"
        for (topic, partition, epoch), brokers in sorted(leaderships(logs).items())
        if len(brokers) > 1
    ]
    problems += [
        f"brokers {sorted(brokers)} were all controller in epoch {epoch}"
        for epoch, brokers in sorted(controller_terms(logs).items())
        if len(brokers) > 1
    ]
    return problems
