"""Topic and partition metadata as stored in coordination, one JSON document per key.

Keys (ARCHITECTURE.md, cluster model): ``topics/<name>`` holds the topic id, the replica
assignment and the config overrides; ``partitions/<name>/<p>`` holds the partition state
(leader, leader epoch, ISR, controller epoch) that the controller and leaders change.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

__all__ = ["PartitionState", "Reassignment", "Topic", "is_valid_topic_name", "topic_name_problem"]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's Topic.validate), or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return f"topic name {name!r} contains characters other than ASCII letters, digits, '.', '_' and '-'"
    return None


def is_valid_topic_name(name: str | None) -> bool:
    return topic_name_problem(name) is None


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition moving between replica sets (KIP-455): who is being added and who removed.

    While it lasts the partition's assignment is the union of the original and the target
    replicas (target first, as Kafka orders it); the target is the assignment less ``removing``.
    """

    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic's identity, replica assignment (partition → broker ids) and config overrides."""

    name: str
    topic_id: uuid.UUID
    assignment: dict[int, tuple[int, ...]]
    config: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    #: Partitions with a reassignment in progress.
    reassigning: dict[int, Reassignment] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.assignment)

    def target_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition is headed: its replicas once any reassignment completes."""
        moving = self.reassigning.get(partition)
        replicas = self.assignment[partition]
        return replicas if moving is None else tuple(r for r in replicas if r not in moving.removing)

    def original_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition was before any reassignment in progress started."""
        moving = self.reassigning.get(partition)
        replicas = self.assignment[partition]
        return replicas if moving is None else tuple(r for r in replicas if r not in moving.adding)

    def to_json(self) -> bytes:
        document: dict[str, object] = {
            "version": 1,
            "id": str(self.topic_id),
            "partitions": {str(p): list(replicas) for p, replicas in sorted(self.assignment.items())},
            "config": self.config,
            "internal": self.internal,
        }
        if self.reassigning:  # the names of ZooKeeper-mode Kafka's /brokers/topics/<t> (v3)
            document["adding_replicas"] = {str(p): list(r.adding) for p, r in sorted(self.reassigning.items())}
            document["removing_replicas"] = {str(p): list(r.removing) for p, r in sorted(self.reassigning.items())}
        return json.dumps(document, sort_keys=True).encode()

    @classmethod
    def from_json(cls, name: str, data: bytes) -> Topic:
        document = json.loads(data)
        adding = document.get("adding_replicas", {})
        removing = document.get("removing_replicas", {})
        return cls(
            name=name,
            topic_id=uuid.UUID(document["id"]),
            assignment={int(p): tuple(replicas) for p, replicas in document["partitions"].items()},
            config=dict(document.get("config", {})),
            internal=bool(document.get("internal", False)),
            reassigning={
                int(p): Reassignment(tuple(adding.get(p, ())), tuple(removing.get(p, ())))
                for p in sorted({*adding, *removing}, key=int)
            },
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch and ISR of one partition (Kafka's LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "controller_epoch": self.controller_epoch,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        document = json.loads(data)
        return cls(
            leader=int(document["leader"]),
            leader_epoch=int(document["leader_epoch"]),
            isr=tuple(document["isr"]),
            controller_epoch=int(document.get("controller_epoch", 0)),
        )
