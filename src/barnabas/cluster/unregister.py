"""Forget a removed broker: Kafka's UnregisterBroker (``kafka-cluster.sh unregister --id N``).

In KRaft a broker's registration outlives its process until it is unregistered. barnabas's
equivalent is what the store keeps about a broker id between its runs: its claim on its log dirs
(``claims/brokers/<id>``, which makes a start on an empty disk refuse) and its cordon
(``cordoned/brokers/<id>``). Unregistering deletes both, so a new broker may take the id on a new,
empty disk without ``--replace``. The broker epoch counter stays, so a new broker of the id still
never gets an epoch the old one had (KIP-380).

Rules this module keeps (Kafka refuses only an id it does not know; barnabas also refuses what
would lose data or unclaim a running broker's disks):

- the broker is running (a member of the ``brokers`` group): refused, stop it first;
- some partition names it a replica (a reassignment in progress included): refused, its
  replicas must move first (``barnabas cluster decommission``), or their data goes with it;
- neither a claim nor a cordon is stored for it: Kafka's BROKER_ID_NOT_REGISTERED.

Nothing is changed by a refused request.
"""

from __future__ import annotations

from collections.abc import Iterable

from barnabas.coordination import Storage

from .brokers import BrokerRegistry
from .claims import CLAIMS_PREFIX
from .cordons import CORDONS_PREFIX
from .model import Topic

__all__ = [
    "BrokerHoldsReplicasError",
    "BrokerNotRegisteredError",
    "BrokerRunningError",
    "UnregisterRefusedError",
    "unregister_broker",
]

#: Partitions named in a refusal at most.
NAMED = 3


class UnregisterRefusedError(Exception):
    """The broker cannot be unregistered now; the message says why in one line."""


class BrokerRunningError(UnregisterRefusedError):
    """The broker is registered in the ``brokers`` group: it runs."""


class BrokerHoldsReplicasError(UnregisterRefusedError):
    """Some partition still names the broker a replica."""


class BrokerNotRegisteredError(UnregisterRefusedError):
    """The store knows nothing of the broker id (Kafka's BrokerIdNotRegisteredException)."""


def replicas_on(topics: Iterable[Topic], broker_id: int) -> list[tuple[str, int]]:
    """The partitions whose replica list (a reassignment's included) names ``broker_id``."""
    return sorted(
        (topic.name, partition)
        for topic in topics
        for partition, replicas in topic.assignment.items()
        if broker_id in replicas
    )


async def unregister_broker(storage: Storage, brokers: BrokerRegistry, topics: Iterable[Topic], broker_id: int) -> None:
    """Delete ``broker_id``'s claim and cordon, so that a new broker may take the id on a new disk.

    Args:
        storage: the cluster's coordination storage.
        brokers: the live brokers (asked afresh whether ``broker_id`` runs).
        topics: every topic, as this broker knows them.
        broker_id: the broker to forget.

    Raises:
        BrokerRunningError, BrokerHoldsReplicasError, BrokerNotRegisteredError: see the module's rules.
        CoordinationError: the store cannot be reached.
    """
    if await brokers.membership.member(str(broker_id)) is not None:
        raise BrokerRunningError(f"broker {broker_id} is running: stop it before unregistering it")
    held = replicas_on(topics, broker_id)
    if held:
        named = ", ".join(f"{topic}-{partition}" for topic, partition in held[:NAMED])
        raise BrokerHoldsReplicasError(
            f"broker {broker_id} still holds {len(held)} replicas ({named}{', …' if len(held) > NAMED else ''}): "
            f"move them first (barnabas cluster decommission --broker {broker_id})"
        )
    claimed = await storage.delete(f"{CLAIMS_PREFIX}{broker_id}")
    cordoned = await storage.delete(f"{CORDONS_PREFIX}{broker_id}")
    if not (claimed or cordoned):
        raise BrokerNotRegisteredError(f"Broker ID {broker_id} is not currently registered")
