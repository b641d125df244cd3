"""Requests naming several coordinator keys: split by each key's coordinator, the answers merged back.

DescribeGroups, DeleteGroups and OffsetFetch (v8+) name several groups, DescribeTransactions several
transactional ids; each key's coordinator answers for it alone (Kafka's ``CoordinatorStrategy``
batches keys per coordinator the same way). Rules this module keeps:

- each sub-request carries the request's other fields and its keys in the request's order;
- the merged answer has one entry per key the request names, in the request's order (a key named
  twice is answered twice, as a broker would), and no throttle time;
- a key no coordinator answered (its broker failed) gets COORDINATOR_NOT_AVAILABLE, on which Kafka's
  clients look the coordinator up again and retry.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from barnabas.protocol import ErrorCode, make, response_class

from .coordinators import GROUP_KEY, TRANSACTION_KEY

__all__ = ["BATCHED", "Batched", "answered_entries", "keys_of", "merge_keyed", "split_keys"]

Where = TypeVar("Where", bound=Hashable)

OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS, DESCRIBE_TRANSACTIONS = 9, 15, 42, 65
NO_THROTTLE = datetime.timedelta(0)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


@dataclass(frozen=True, slots=True)
class Batched:
    """Where one API keeps its keys, in requests and in responses."""

    key_type: int
    request_field: str
    request_id: Callable[[Any], str]
    response_field: str
    response_entity: str
    response_id: Callable[[Any], str]
    #: Fields of a key's entry when no coordinator answered for it, besides its error code.
    empty: Callable[[str], dict[str, Any]]


BATCHED: dict[int, Batched] = {
    DESCRIBE_GROUPS: Batched(
        GROUP_KEY, "groups", str, "groups", "DescribedGroup", lambda g: str(g.group_id),
        lambda g: {"group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "", "members": (),
                   "authorized_operations": -(2**31)},
    ),
    DELETE_GROUPS: Batched(
        GROUP_KEY, "groups_names", str, "results", "DeletableGroupResult", lambda g: str(g.group_id),
        lambda g: {"group_id": g},
    ),
    OFFSET_FETCH: Batched(
        GROUP_KEY, "groups", lambda g: str(g.group_id), "groups", "OffsetFetchResponseGroup",
        lambda g: str(g.group_id), lambda g: {"group_id": g, "topics": ()},
    ),
    # Kafka's coordinator leaves a failed id's other fields at their defaults (0, "").
    DESCRIBE_TRANSACTIONS: Batched(
        TRANSACTION_KEY, "transactional_ids", str, "transaction_states", "TransactionState",
        lambda t: str(t.transactional_id),
        lambda t: {"transactional_id": t, "transaction_state": "", "transaction_timeout": NO_THROTTLE,
                   "transaction_start_time": _EPOCH, "producer_id": 0, "producer_epoch": 0, "topics": ()},
    ),
}  # fmt: skip


def keys_of(spec: Batched, body: Any) -> list[str]:
    """The keys ``body`` names, in its order (repeats kept)."""
    return [spec.request_id(entry) for entry in getattr(body, spec.request_field)]


def split_keys(spec: Batched, body: Any, where: Mapping[str, Where]) -> dict[Where, Any]:
    """One sub-request per destination (``where`` places every key), its keys in the request's order."""
    entries: dict[Where, list[Any]] = {}
    for entry in getattr(body, spec.request_field):
        entries.setdefault(where[spec.request_id(entry)], []).append(entry)
    return {dest: dataclasses.replace(body, **{spec.request_field: tuple(own)}) for dest, own in entries.items()}


def answered_entries(spec: Batched, answers: Sequence[Any]) -> Iterator[tuple[str, Any]]:
    """(key, entry) of every entry in the brokers' ``answers``."""
    for answer in answers:
        for entry in getattr(answer, spec.response_field):
            yield spec.response_id(entry), entry


def merge_keyed(spec: Batched, api_key: int, version: int, keys: Sequence[str], answers: Sequence[Any]) -> Any:
    """One response answering each of ``keys`` in order from the brokers' ``answers``."""
    found = dict(answered_entries(spec, answers))
    entity_cls = response_class(api_key, version, spec.response_entity)
    merged = tuple(
        found.get(key) or make(entity_cls, error_code=ErrorCode.coordinator_not_available, **spec.empty(key))
        for key in keys
    )
    return make(response_class(api_key, version), throttle_time=NO_THROTTLE, **{spec.response_field: merged})
