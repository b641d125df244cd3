"""The proxy nodes clients see as the cluster's brokers, and the deterministic choice among them.

Clients must get the same answer from every proxy node, or they would chase partitions between
them: each proxy node knows the same set of nodes (static ``--peers``, or the coordination group
``proxies``) and picks among those that are up by a hash of what is being placed (a
partition's topic id and index, a group id), within the rack of the real broker that serves it
when a proxy node sits there, among all up nodes otherwise. With static peers, node ids are the
positions of the nodes' advertised addresses in sorted order, so every node numbers the same set the
same way; in the coordination group each node joins under its own ``proxy.node.id``.

The hash is rendezvous (highest random weight) hashing over the nodes' addresses: each node
scores the key, the highest score wins. A node going down moves only the keys it had won, and
one coming back takes back only those, so clients chase as few partitions as possible (a key
hashed modulo the node count would move most keys whenever the count changes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from barnabas.config.definitions import parse_host_port

__all__ = ["ProxyNode", "ProxyNodes", "parse_node_address"]


@dataclass(frozen=True, slots=True)
class ProxyNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_node_address(text: str) -> tuple[str, int, str | None]:
    """``HOST:PORT`` or ``HOST:PORT@RACK``, as ``--peers`` lists them.

    Raises:
        ValueError: not that shape, or the port is not a number in 1..65535.
    """
    address, _, rack = text.strip().partition("@")
    try:
        host, port = parse_host_port(address)
    except ValueError:
        raise ValueError(f"{text!r} is not HOST:PORT[@RACK]") from None
    return host, port, rack or None


#: Rankings kept per ProxyNodes (a key's ranking never changes; the cache is emptied when full).
_RANKINGS_KEPT = 1 << 17


class ProxyNodes:
    """The proxy nodes, which of them are up, and which one answers for a given key."""

    def __init__(self, me: tuple[str, int, str | None], peers: Iterable[tuple[str, int, str | None]] = ()) -> None:
        everyone = {(host, port): rack for host, port, rack in peers}
        everyone[me[:2]] = me[2]
        ordered = sorted(everyone)
        self.nodes: tuple[ProxyNode, ...] = tuple(
            ProxyNode(index, host, port, everyone[(host, port)]) for index, (host, port) in enumerate(ordered)
        )
        self.me = next(node for node in self.nodes if (node.host, node.port) == me[:2])
        self._up: frozenset[int] = frozenset(node.node_id for node in self.nodes)
        self._rankings: dict[bytes, tuple[ProxyNode, ...]] = {}
        #: spread()'s answers while the nodes and the up set stay as they are (a Metadata answer asks
        #: twice per partition).
        self._spreads: dict[tuple[bytes, int, str | None], tuple[ProxyNode, ...]] = {}
        #: Grows whenever the nodes or the up set change: answers computed from them are stale then.
        self.generation = 0

    @classmethod
    def alone(cls, me: ProxyNode) -> ProxyNodes:
        """Only this node, under its own id, until :meth:`replace` brings the others (coordination membership)."""
        nodes = cls((me.host, me.port, me.rack))
        nodes.me = me
        nodes.nodes = (me,)
        nodes._up = frozenset({me.node_id})
        return nodes

    def replace(self, nodes: Iterable[ProxyNode]) -> bool:
        """The nodes are now ``nodes`` (all up), this one always among them; whether anything changed."""
        by_id = {node.node_id: node for node in nodes}
        by_id[self.me.node_id] = self.me
        replaced = tuple(sorted(by_id.values(), key=lambda node: node.node_id))
        if replaced == self.nodes and self._up == frozenset(by_id):
            return False
        self.nodes = replaced
        self._up = frozenset(by_id)
        self._rankings = {}
        self._spreads = {}
        self.generation += 1
        return True

    def up(self) -> tuple[ProxyNode, ...]:
        """The nodes believed up, this one always among them, in node id order."""
        return tuple(node for node in self.nodes if node.node_id in self._up or node is self.me)

    def set_up(self, node_ids: Iterable[int]) -> bool:
        """Replace the set of up nodes; whether it changed."""
        up = frozenset(node_ids) | {self.me.node_id}
        changed = up != self._up
        self._up = up
        if changed:
            self._spreads = {}
            self.generation += 1
        return changed

    def pick(self, key: bytes, rack: str | None = None) -> ProxyNode:
        """The up node that answers for ``key``: the same on every node that sees the same up set."""
        return self.spread(key, 1, rack)[0]

    def spread(self, key: bytes, count: int, rack: str | None = None) -> tuple[ProxyNode, ...]:
        """``count`` distinct up nodes (at most all of them): :meth:`pick`'s, then the rest by their score.

        The pick is the best-scored up node in ``rack``, else the best-scored up node.
        """
        if count <= 0:
            return ()
        spread = self._spreads.get((key, count, rack))
        if spread is None:
            if len(self._spreads) >= _RANKINGS_KEPT:
                self._spreads.clear()
            up = [node for node in self._ranking(key) if node.node_id in self._up or node is self.me]
            first = next((node for node in up if rack is not None and node.rack == rack), up[0])
            spread = (first, *[node for node in up if node is not first][: count - 1])
            self._spreads[(key, count, rack)] = spread
        return spread

    def _ranking(self, key: bytes) -> tuple[ProxyNode, ...]:
        """Every node, the best score for ``key`` first (it depends on nothing else, so it is kept)."""
        ranking = self._rankings.get(key)
        if ranking is None:
            if len(self._rankings) >= _RANKINGS_KEPT:
                self._rankings.clear()
            ranking = self._rankings[key] = tuple(sorted(self.nodes, key=lambda node: _score(key, node), reverse=True))
        return ranking


def _score(key: bytes, node: ProxyNode) -> tuple[bytes, int]:
    """``node``'s rendezvous score for ``key``: the same in every process (no per-process hash seed)."""
    digest = hashlib.blake2b(node.address.encode() + b"\x00" + key, digest_size=8).digest()
    return digest, node.node_id
