"""Topic and partition metadata as stored in coordination, one JSON document per key.

Keys (ARCHITECTURE.md, cluster model): ``topics/<name>`` holds the topic id, the replica
assignment and the config overrides; ``partitions/<name>/<p>`` holds the partition state
(leader, leader epoch, ISR with each member's broker epoch, controller epoch, topic id) that
the controller and leaders change. Decoding refuses any other shape with CorruptValueError
(``stored_values``); TopicStore decides what a broker does with such a value.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .stored_values import CorruptValueError, StoredDocument

__all__ = [
    "PartitionState",
    "Reassignment",
    "Topic",
    "describe_partitions",
    "is_valid_topic_name",
    "topic_name_problem",
]

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


def describe_partitions(epochs: Mapping[int, int]) -> str:
    """Partitions and their leader epochs for a log line: "partition 3 at epoch 2", "partitions 0-49 at epoch 0"."""
    by_epoch: dict[int, list[int]] = {}
    for partition, epoch in sorted(epochs.items()):
        by_epoch.setdefault(epoch, []).append(partition)
    parts = []
    for epoch, partitions in sorted(by_epoch.items()):
        ranges, start = [], partitions[0]
        for previous, current in zip(partitions, [*partitions[1:], None], strict=True):
            if current != previous + 1:
                ranges.append(str(start) if start == previous else f"{start}-{previous}")
                start = current if current is not None else start
        noun = "partition" if len(partitions) == 1 else "partitions"
        parts.append(f"{noun} {', '.join(ranges)} at epoch {epoch}")
    return "; ".join(parts)


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
        """The topic stored under ``topics/<name>``.

        Raises:
            CorruptValueError: the value is not a topic document as barnabas writes it.
        """
        document = StoredDocument(data, f"topic {name!r}")
        adding = document.integers_by_number("adding_replicas")
        removing = document.integers_by_number("removing_replicas")
        return cls(
            name=name,
            topic_id=document.identifier("id"),
            assignment=document.integers_by_number("partitions", required=True),
            config=document.text_map("config"),
            internal=document.flag("internal", False),
            reassigning={p: Reassignment(adding.get(p, ()), removing.get(p, ())) for p in sorted({*adding, *removing})},
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch and ISR of one partition (Kafka's LeaderAndIsr), and whose it is.

    ``broker_epochs`` holds, for each ISR member, the broker epoch (the incarnation: a number a
    broker gets anew each time it registers, KIP-380) in which it was in sync. A member counts as
    in sync only while it is registered in that same epoch: a broker that restarted may have lost
    writes it never flushed, so its old place in the ISR is not its new incarnation's (KIP-903).
    ``topic_id`` names the topic the state belongs to, so a state left behind by a deleted topic
    of the same name is never taken for the state of its successor.

    ``recovered`` is set (possibly empty) only on the state of a partition restored from its
    replicas' logs after the coordination store was lost (``cluster.restore``): who led it and
    who was in sync is unknown, so each replica reports the end of its log there — broker id ->
    (latest leader epoch in its log, or -1, log end offset) — and the controller elects the
    replica with the most once every replica has reported (``leadership.recovered_election``).
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    broker_epochs: Mapping[int, int] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None
    recovered: Mapping[int, tuple[int, int]] | None = None

    def in_sync(self, broker_id: int, broker_epoch: int | None) -> bool:
        """Whether ``broker_id``, registered now in ``broker_epoch``, is in the ISR in that incarnation."""
        return broker_id in self.isr and broker_epoch is not None and self.broker_epochs.get(broker_id) == broker_epoch

    def current_isr(self, live: Mapping[int, int]) -> tuple[int, ...]:
        """The ISR members that are live (``live``: broker id -> broker epoch) in the epoch they joined in."""
        return tuple(r for r in self.isr if self.in_sync(r, live.get(r)))

    def with_isr(self, isr: Sequence[int], epochs: Mapping[int, int]) -> PartitionState:
        """This state with ISR ``isr``, each member's broker epoch taken from ``epochs``, else as recorded."""
        merged = {**self.broker_epochs, **epochs}
        return replace(self, isr=tuple(isr), broker_epochs={r: merged[r] for r in isr if r in merged})

    def to_json(self) -> bytes:
        document: dict[str, object] = {
            "version": 2,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "controller_epoch": self.controller_epoch,
            "broker_epochs": {str(r): e for r, e in sorted(self.broker_epochs.items())},
        }
        if self.topic_id is not None:
            document["topic_id"] = str(self.topic_id)
        if self.recovered is not None:
            document["recovering"] = True
            document["recovered"] = {str(r): list(end) for r, end in sorted(self.recovered.items())}
        return json.dumps(document, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, what: str = "a partition state") -> PartitionState:
        """The state stored under ``partitions/<topic>/<p>`` (``what`` names it in the error).

        Raises:
            CorruptValueError: the value is not a partition state as barnabas writes it.
        """
        document = StoredDocument(data, what)
        recovered: dict[int, tuple[int, int]] | None = None
        if document.flag("recovering", False):
            ends = document.integers_by_number("recovered")
            if any(len(end) != 2 for end in ends.values()):
                raise CorruptValueError(what, "field 'recovered' has a log end that is not [epoch, offset]")
            recovered = {broker: (end[0], end[1]) for broker, end in ends.items()}
        return cls(
            leader=document.integer("leader"),
            leader_epoch=document.integer("leader_epoch"),
            isr=document.integers("isr"),
            controller_epoch=document.integer("controller_epoch", 0),
            broker_epochs=document.integer_by_number("broker_epochs"),
            topic_id=document.optional_identifier("topic_id"),
            recovered=recovered,
        )
