"""Cluster-wide listings: which brokers a proxy node asks, and their answers merged into one.

Kafka's clients ask every broker in Metadata for ListGroups, DescribeLogDirs and ListTransactions,
each broker answering for what it holds. Through the proxy, Metadata's brokers are the proxy nodes.
Rules this module keeps:

- ListGroups and DescribeLogDirs: a proxy node asks every broker and merges; a group listed by
  two brokers (its coordinator moved between their answers) is listed once. Java's admin client
  keeps one listing per group id, so asking every proxy node lists each group once.
- ListTransactions: a proxy node asks only the brokers it stands for, those whose id its
  ``node_of_broker`` picks it for, so that the proxy nodes share the brokers out and a client
  asking every proxy node (Kafka's ``AllBrokersStrategy``) hears from each broker once: Java's
  ``ListTransactionsResult.all()`` concatenates the answers without removing repeats. A node that
  stands for no broker answers an empty list itself.
- The merged answer carries the first error a broker gave (the client retries or reports it) and
  the first answer's throttle time.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any

from barnabas.protocol import ErrorCode, make, response_class

from .cluster_view import BrokerAddress, ClusterView
from .nodes import ProxyNodes
from .rewrite import node_of_broker

__all__ = ["KNOWN_TRANSACTION_STATES", "merge_listings", "nothing_listed", "own_brokers"]

LIST_GROUPS, DESCRIBE_LOG_DIRS, LIST_TRANSACTIONS = 16, 35, 66
#: Kafka's transaction states by name (``TransactionState``): a ListTransactions filter naming
#: another is answered back as unknown.
KNOWN_TRANSACTION_STATES = frozenset(
    {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
     "PrepareEpochFence"}
)  # fmt: skip


def own_brokers(view: ClusterView, nodes: ProxyNodes) -> list[BrokerAddress]:
    """The brokers this proxy node answers ListTransactions for, in broker id order."""
    return [
        broker
        for broker_id, broker in sorted(view.brokers.items())
        if node_of_broker(view, nodes, broker_id) == nodes.me.node_id
    ]


def merge_listings(api_key: int, responses: Sequence[Any]) -> Any:
    """The brokers' answers to one listing (at least one) as one answer."""
    changes: dict[str, Any] = {}
    code = next((r.error_code for r in responses if getattr(r, "error_code", ErrorCode.none) != ErrorCode.none), None)
    if code is not None:
        changes["error_code"] = code
    if api_key == LIST_GROUPS:
        changes["groups"] = _unique((g.group_id, g) for r in responses for g in r.groups)
    elif api_key == DESCRIBE_LOG_DIRS:
        changes["results"] = tuple(result for r in responses for result in r.results)
    elif api_key == LIST_TRANSACTIONS:
        changes["transaction_states"] = _unique(
            (t.transactional_id, t) for r in responses for t in r.transaction_states
        )
        changes["unknown_state_filters"] = _unique((f, f) for r in responses for f in r.unknown_state_filters)
    return dataclasses.replace(responses[0], **changes)


def nothing_listed(version: int, body: Any) -> Any:
    """The answer to a ListTransactions ``body`` from a proxy node that stands for no broker."""
    unknown = tuple(dict.fromkeys(f for f in body.state_filters if f not in KNOWN_TRANSACTION_STATES))
    return make(
        response_class(LIST_TRANSACTIONS, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=(),
    )


def _unique(pairs: Any) -> tuple[Any, ...]:
    """The values of (key, value) ``pairs``, the first for each key, in order."""
    kept: dict[Any, Any] = {}
    for key, value in pairs:
        kept.setdefault(key, value)
    return tuple(kept.values())
