"""Proxy nodes: ids every node agrees on, and a choice among them that every node makes alike.

Clients must get the same answer from every proxy node, so ids come from the set of addresses
alone, a key goes to the same node on every proxy that sees the same up set, and losing a node
moves only the keys it answered for.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import pytest

from barnabas.proxy.nodes import ProxyNode, ProxyNodes, parse_node_address

PEERS = [("proxy-c", 9192, "r2"), ("proxy-a", 9192, "r1"), ("proxy-d", 9192, "r2"), ("proxy-b", 9192, "r1")]
KEYS = [b"orders-%d" % i for i in range(400)]


def nodes_as(me: str, peers: Sequence[tuple[str, int, str | None]] = PEERS) -> ProxyNodes:
    (own,) = [peer for peer in peers if peer[0] == me]
    return ProxyNodes(own, peers)


def test_ids_are_positions_of_sorted_addresses_whatever_the_order() -> None:
    forward = nodes_as("proxy-a", PEERS)
    backward = nodes_as("proxy-d", list(reversed(PEERS)))
    expected = [(0, "proxy-a", "r1"), (1, "proxy-b", "r1"), (2, "proxy-c", "r2"), (3, "proxy-d", "r2")]
    for nodes in (forward, backward):
        assert [(n.node_id, n.host, n.rack) for n in nodes.nodes] == expected
    assert forward.me.host == "proxy-a"
    assert backward.me.host == "proxy-d"


def test_ids_order_ports_as_numbers() -> None:
    nodes = ProxyNodes(("h", 10000, None), [("h", 9000, None), ("h", 10000, None), ("g", 20000, None)])
    assert [n.address for n in nodes.nodes] == ["g:20000", "h:9000", "h:10000"]


def test_me_is_a_node_even_when_not_among_the_peers() -> None:
    nodes = ProxyNodes(("proxy-z", 9192, "r3"), PEERS)
    assert nodes.me.host == "proxy-z"
    assert nodes.me.rack == "r3"
    assert len(nodes.nodes) == 5


def test_pick_is_the_same_on_every_node_and_every_call() -> None:
    everyone = [nodes_as(name) for name in ("proxy-a", "proxy-b", "proxy-c", "proxy-d")]
    for key in KEYS:
        picks = {nodes.pick(key).node_id for nodes in everyone}
        picks |= {nodes.pick(key).node_id for nodes in everyone}
        assert len(picks) == 1, key


def test_pick_spreads_keys_over_every_node() -> None:
    counts = collections.Counter(nodes_as("proxy-a").pick(key).node_id for key in KEYS)
    assert sorted(counts) == [0, 1, 2, 3]
    assert min(counts.values()) > len(KEYS) // 4 // 2, counts


def test_pick_prefers_the_rack() -> None:
    nodes = nodes_as("proxy-a")
    in_r2 = {nodes.pick(key, "r2").node_id for key in KEYS}
    in_r1 = {nodes.pick(key, "r1").node_id for key in KEYS}
    assert in_r2 == {2, 3}
    assert in_r1 == {0, 1}


def test_pick_falls_back_to_every_up_node_without_one_in_the_rack() -> None:
    nodes = nodes_as("proxy-a")
    assert {nodes.pick(key, "r9").node_id for key in KEYS} == {0, 1, 2, 3}
    assert {nodes.pick(key, None).node_id for key in KEYS} == {0, 1, 2, 3}
    nodes.set_up([0, 1])  # both r2 nodes down
    assert {nodes.pick(key, "r2").node_id for key in KEYS} == {0, 1}


def test_set_up_moves_only_the_keys_of_the_node_that_went_down() -> None:
    nodes = nodes_as("proxy-a")
    for rack in (None, "r2"):
        nodes.set_up([0, 1, 2, 3])
        before = {key: nodes.pick(key, rack).node_id for key in KEYS}
        assert nodes.set_up([0, 1, 3]) is True
        after = {key: nodes.pick(key, rack).node_id for key in KEYS}
        moved = {key for key in KEYS if before[key] != after[key]}
        assert moved == {key for key in KEYS if before[key] == 2}, rack
        assert all(after[key] != 2 for key in KEYS)


def test_set_up_keeps_me_up_and_says_whether_anything_changed() -> None:
    nodes = nodes_as("proxy-b")
    assert nodes.set_up([0, 1, 2, 3]) is False
    assert nodes.set_up([2]) is True
    assert [n.node_id for n in nodes.up()] == [1, 2]
    assert nodes.set_up([2, 1]) is False
    assert {nodes.pick(key).node_id for key in KEYS} == {1, 2}


def test_spread_gives_distinct_up_nodes_the_pick_first() -> None:
    nodes = nodes_as("proxy-a")
    for key in KEYS:
        for rack in (None, "r1", "r2"):
            spread = nodes.spread(key, 3, rack)
            assert len(spread) == 3
            assert len({n.node_id for n in spread}) == 3
            assert spread[0] == nodes.pick(key, rack)
            assert rack is None or spread[0].rack == rack
            assert nodes.spread(key, 2, rack) == spread[:2]


def test_spread_is_at_most_every_up_node() -> None:
    nodes = nodes_as("proxy-a")
    nodes.set_up([0, 2])
    assert sorted(n.node_id for n in nodes.spread(b"k", 5)) == [0, 2]
    assert nodes.spread(b"k", 0) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("proxy-a:9192", ("proxy-a", 9192, None)),
        ("proxy-a:9192@r1", ("proxy-a", 9192, "r1")),
        (" 10.0.0.7:1 ", ("10.0.0.7", 1, None)),
        ("[::1]:65535@eu-west-1a", ("::1", 65535, "eu-west-1a")),
    ],
)
def test_parse_node_address(text: str, expected: tuple[str, int, str | None]) -> None:
    assert parse_node_address(text) == expected


@pytest.mark.parametrize(
    "text", ["proxy-a", "proxy-a:", ":9192", "proxy-a:port", "proxy-a:0", "proxy-a:65536", "proxy-a:-1", "@r1", ""]
)
def test_parse_node_address_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_node_address(text)


def test_a_node_alone_keeps_its_own_id_until_the_group_brings_the_others() -> None:
    me = ProxyNode(7, "10.0.0.7", 9192, "r1")
    nodes = ProxyNodes.alone(me)
    assert nodes.up() == (me,) and nodes.pick(b"any") is me
    other = ProxyNode(3, "10.0.0.3", 9192, "r2")
    assert nodes.replace([other])
    assert [n.node_id for n in nodes.up()] == [3, 7]
    assert not nodes.replace([other, me]), "the same members again is no change"
    assert nodes.replace([])
    assert nodes.up() == (me,), "this node stays a node whatever the group says"


def test_replaced_members_are_chosen_alike_on_every_node() -> None:
    members = [ProxyNode(i, f"10.0.0.{i}", 9192) for i in range(4)]
    views = []
    for me in members:
        nodes = ProxyNodes.alone(me)
        nodes.replace(reversed(members))
        views.append([nodes.pick(bytes([k])).node_id for k in range(64)])
    assert all(view == views[0] for view in views)
