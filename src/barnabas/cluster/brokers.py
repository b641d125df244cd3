"""Live brokers: each broker is a member of the coordination group ``brokers`` (Kafka's /brokers/ids).

A broker's membership key is ephemeral, so it vanishes when the broker's session ends, however
the process dies; the controller and every broker learn of that from a watch. The member data
is the broker's advertised endpoint and rack, and its **broker epoch**, as JSON.

The broker epoch (KIP-380) tells incarnations apart: every registration takes the next number from
the counter ``broker_epochs/<id>`` (compare-and-set, so it only grows), whether the broker process
is new or re-registers after losing its session. Watches are hints and may fold a broker's
departure and return into one change; the epoch is what shows that it came back, so the controller
never mistakes a restarted broker (which may have lost writes it never flushed) for the one whose
place it holds in an ISR. ``clean`` says whether the incarnation's logs were closed cleanly last
time (KIP-966's unclean-shutdown detection): the controller prefers such a broker when it must
choose among restarted ones.

A broker registers every advertised endpoint, one per listener name with its security protocol
(Kafka's ``endpoints`` and ``listener_security_protocol_map`` in /brokers/ids/<id>). ``host`` and
``port`` are its inter-broker listener's endpoint; a registration written before endpoints
existed reads as a single PLAINTEXT listener there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass

from barnabas.coordination import GroupMembership, Metastore, Session, Storage, VersionConflictError

from .stored_values import CorruptValueError, StoredDocument, decimal_value

__all__ = ["BROKERS_GROUP", "BROKER_EPOCHS_PREFIX", "BrokerEndpoint", "BrokerInfo", "BrokerRegistry"]

log = logging.getLogger(__name__)

BROKERS_GROUP = "brokers"
BROKER_EPOCHS_PREFIX = "broker_epochs/"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One advertised listener of a broker: its name, address and security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def to_json(self) -> dict[str, object]:
        return {"listener": self.listener, "host": self.host, "port": self.port, "protocol": self.security_protocol}

    @classmethod
    def from_json(cls, document: StoredDocument) -> BrokerEndpoint:
        """One entry of a registration's ``endpoints``.

        Raises:
            CorruptValueError: a field is missing or of another type.
        """
        return cls(
            document.text("listener"), document.text("host"), document.integer("port"), document.text("protocol")
        )


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What the cluster knows of a live broker: how clients reach it, where it stands, which incarnation."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    #: This incarnation's broker epoch; -1 until registered.
    epoch: int = -1
    #: Whether this incarnation started from logs closed cleanly (nothing unflushed was lost).
    clean: bool = True
    #: Every advertised listener; empty means a single PLAINTEXT listener at ``host:port``.
    endpoints: tuple[BrokerEndpoint, ...] = ()

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        """This broker's endpoint on the listener named ``listener``, if it has one."""
        for endpoint in self.endpoints or (BrokerEndpoint("PLAINTEXT", self.host, self.port),):
            if endpoint.listener == listener:
                return endpoint
        return None

    def to_json(self) -> bytes:
        return json.dumps({
            "version": 3, "host": self.host, "port": self.port, "rack": self.rack, "epoch": self.epoch,
            "clean": self.clean, "endpoints": [endpoint.to_json() for endpoint in self.endpoints],
        }).encode()  # fmt: skip

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> BrokerInfo:
        """Broker ``broker_id``'s registration, its member data in the ``brokers`` group.

        Raises:
            CorruptValueError: the value is not a registration as barnabas writes it.
        """
        document = StoredDocument(data, f"the registration of broker {broker_id}")
        return cls(
            broker_id,
            document.text("host"),
            document.integer("port"),
            document.optional_text("rack"),
            document.integer("epoch", -1),
            document.flag("clean", False),
            tuple(BrokerEndpoint.from_json(endpoint) for endpoint in document.documents("endpoints")),
        )


class BrokerRegistry:
    """Registers this broker and keeps the set of live brokers (refreshed by the metadata watcher)."""

    def __init__(self, metastore: Metastore) -> None:
        self.membership = GroupMembership(metastore, BROKERS_GROUP)
        self._storage = Storage(metastore)
        self.live: dict[int, BrokerInfo] = {}
        #: Members left out of ``live`` at the last refresh (their data), so each is logged once.
        self._ignored: dict[str, bytes] = {}
        #: Bumped whenever ``live`` may have changed (see TopicStore.generation).
        self.generation = 0

    @property
    def prefix(self) -> str:
        return self.membership.prefix

    def epochs(self) -> dict[int, int]:
        """Live broker id -> its broker epoch, as last read."""
        return {broker_id: info.epoch for broker_id, info in self.live.items()}

    async def register(self, session: Session, info: BrokerInfo, wait_s: float | None = None) -> BrokerInfo:
        """Join as ``info.broker_id`` with a new broker epoch, waiting for a previous holder of the id to vanish.

        Returns:
            ``info`` with the epoch this registration got.

        Raises:
            KeyExistsError: another live broker holds the id after ``wait_s``.
        """
        registered = dataclasses.replace(info, epoch=await self._next_epoch(info.broker_id))
        await self.membership.join(session, str(info.broker_id), registered.to_json(), wait_s)
        self.live[info.broker_id] = registered
        self.generation += 1
        return registered

    async def _next_epoch(self, broker_id: int) -> int:
        """The next broker epoch from the counter; a counter that does not read stops the registration.

        Raises:
            CorruptValueError: the counter is not a number. Starting over at 1 could hand out an
                epoch the broker had before, which is what epochs exist to tell apart (KIP-380).
        """
        key = f"{BROKER_EPOCHS_PREFIX}{broker_id}"
        while True:
            current = await self._storage.get(key)
            epoch = decimal_value(current.value, f"the epoch counter {key}") + 1 if current is not None else 1
            try:
                await self._storage.compare_and_set(key, str(epoch).encode(), current.version if current else 0)
            except VersionConflictError:
                continue
            return epoch

    async def deregister(self, session: Session, broker_id: int) -> None:
        await self.membership.leave(session, str(broker_id))

    async def read(self, broker_id: int) -> BrokerInfo | None:
        """Read one broker's registration now (not from the cache): None if it is not registered.

        A registration that does not read is logged and taken as none, as :meth:`refresh` takes it:
        the broker's incarnation cannot be told, so it does not join an ISR.
        """
        data = await self.membership.member(str(broker_id))
        if data is None:
            return None
        try:
            return BrokerInfo.from_json(broker_id, data)
        except CorruptValueError as exc:
            log.warning("taking broker %d as not registered: %s", broker_id, exc)
            return None

    async def refresh(self) -> dict[int, BrokerInfo]:
        """Re-read the live brokers from storage.

        A member that is not a broker id, or whose registration does not read, is left out and
        logged: the cluster treats it as not live (no leadership, out of ISRs), which is what a
        broker nobody can reach is, rather than failing every broker's view of the cluster.
        """
        members = await self.membership.members()
        live = {}
        ignored: dict[str, bytes] = {}
        for member, data in members.items():
            try:
                if not (member.isdigit() and member.isascii()):
                    raise CorruptValueError(f"member {member[:60]!r} of the brokers group", "not a broker id")
                live[int(member)] = BrokerInfo.from_json(int(member), data)
            except CorruptValueError as exc:
                ignored[member] = data
                if self._ignored.get(member) != data:  # once per value, not on every refresh
                    log.warning("taking it as a broker that is not live: %s", exc)
        self.live, self._ignored = live, ignored
        self.generation += 1
        return live
