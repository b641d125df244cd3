"""Live brokers: each broker is a member of the coordination group ``brokers`` (Kafka's /brokers/ids).

A broker's membership key is ephemeral, so it vanishes when the broker's session ends, however
the process dies; the controller and every broker learn of that from a watch. The member data
is the broker's advertised endpoint and rack, as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from barnabas.coordination import GroupMembership, Metastore, Session

__all__ = ["BROKERS_GROUP", "BrokerInfo", "BrokerRegistry"]

BROKERS_GROUP = "brokers"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What the cluster knows of a live broker: how clients reach it and where it stands."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None

    def to_json(self) -> bytes:
        return json.dumps({"version": 1, "host": self.host, "port": self.port, "rack": self.rack}).encode()

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> BrokerInfo:
        document = json.loads(data)
        return cls(broker_id, str(document["host"]), int(document["port"]), document.get("rack"))


class BrokerRegistry:
    """Registers this broker and keeps the set of live brokers (refreshed by the metadata watcher)."""

    def __init__(self, metastore: Metastore) -> None:
        self.membership = GroupMembership(metastore, BROKERS_GROUP)
        self.live: dict[int, BrokerInfo] = {}
        #: Bumped whenever ``live`` may have changed (see TopicStore.generation).
        self.generation = 0

    @property
    def prefix(self) -> str:
        return self.membership.prefix

    async def register(self, session: Session, info: BrokerInfo, wait_s: float | None = None) -> None:
        """Join as ``info.broker_id``, waiting for a previous holder of that id to vanish.

        Raises:
            KeyExistsError: another live broker holds the id after ``wait_s``.
        """
        await self.membership.join(session, str(info.broker_id), info.to_json(), wait_s)
        self.live[info.broker_id] = info
        self.generation += 1

    async def deregister(self, session: Session, broker_id: int) -> None:
        await self.membership.leave(session, str(broker_id))

    async def refresh(self) -> dict[int, BrokerInfo]:
        """Re-read the live brokers from storage."""
        members = await self.membership.members()
        live = {}
        for member, data in members.items():
            try:
                live[int(member)] = BrokerInfo.from_json(int(member), data)
            except (ValueError, KeyError):
                continue  # not a broker registration; ignore rather than fail the cluster
        self.live = live
        self.generation += 1
        return live
