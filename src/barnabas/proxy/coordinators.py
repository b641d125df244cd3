"""Which coordinator a request belongs to, and Kafka's rule for where that coordinator is.

Rules this module keeps:

- A group request goes to its group's coordinator and a transaction request to its transactional
  id's: FindCoordinator key types 0 and 1, as Kafka's ``ConsumerCoordinator`` and
  ``TransactionManager`` send them. TxnOffsetCommit is a group request (the offsets go to the
  group's log; the transaction coordinator learnt of the group from AddOffsetsToTxn).
- An InitProducerId without a transactional id (an idempotent producer) has no coordinator: any
  broker answers it, as Kafka's ``Sender`` sends it to the least loaded node.
- Kafka keeps a transactional id on partition ``Utils.abs(id.hashCode()) % N`` of
  ``__transaction_state`` (``TransactionStateManager.partitionFor``); its leader coordinates it.
  ``Utils.abs`` is ``Math.abs`` but 0 for ``Integer.MIN_VALUE`` (KAFKA-1988), not ``n & 0x7fffffff``.
- An answer carrying NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE anywhere says the broker asked
  does not coordinate the key (any more): the proxy forgets what it knew and the client, told
  the same, asks FindCoordinator again.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

from barnabas.groups.partitioner import java_string_hash
from barnabas.protocol import ErrorCode

__all__ = [
    "GROUP_KEY",
    "TRANSACTION_KEY",
    "TRANSACTION_TOPIC",
    "coordinator_key",
    "no_longer_coordinates",
    "transaction_partition",
]

GROUP_KEY, TRANSACTION_KEY = 0, 1
TRANSACTION_TOPIC = "__transaction_state"
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN = 22, 24
_INT_MIN = -(2**31)
_NOT_COORDINATOR = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
#: api_key -> (key type, the request's field naming the key).
_KEYS: dict[int, tuple[int, str]] = {
    8: (GROUP_KEY, "group_id"),  # OffsetCommit
    9: (GROUP_KEY, "group_id"),  # OffsetFetch up to v7 (one group)
    11: (GROUP_KEY, "group_id"),  # JoinGroup
    12: (GROUP_KEY, "group_id"),  # Heartbeat
    13: (GROUP_KEY, "group_id"),  # LeaveGroup
    14: (GROUP_KEY, "group_id"),  # SyncGroup
    47: (GROUP_KEY, "group_id"),  # OffsetDelete
    28: (GROUP_KEY, "group_id"),  # TxnOffsetCommit
    INIT_PRODUCER_ID: (TRANSACTION_KEY, "transactional_id"),
    ADD_PARTITIONS_TO_TXN: (TRANSACTION_KEY, "v3_and_below_transactional_id"),  # v0-3: one transaction
    25: (TRANSACTION_KEY, "transactional_id"),  # AddOffsetsToTxn
    26: (TRANSACTION_KEY, "transactional_id"),  # EndTxn
}


def coordinator_key(api_key: int, body: Any) -> tuple[int, str] | None:
    """(key type, key) of the coordinator ``body`` goes to; None when any broker answers it.

    Raises:
        KeyError: ``api_key`` is not a request to one coordinator.
    """
    key_type, field = _KEYS[api_key]
    key = getattr(body, field)
    return None if key is None else (key_type, str(key))


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``, as Kafka computes it."""
    h = java_string_hash(transactional_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions


def no_longer_coordinates(response: Any) -> bool:
    """Whether any error code in ``response`` says its broker does not coordinate the request's key."""
    return any(code in _NOT_COORDINATOR for code in _error_codes(response))


def _error_codes(entity: Any) -> Iterator[Any]:
    kind: type = type(entity)
    for name in _field_names(kind):
        value = getattr(entity, name)
        if isinstance(value, ErrorCode):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _error_codes(item)
        elif dataclasses.is_dataclass(value):
            yield from _error_codes(value)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))
