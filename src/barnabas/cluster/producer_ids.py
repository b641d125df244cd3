"""Producer ids handed out in blocks reserved with compare-and-set (Kafka's ProducerIdManager).

A broker reserves ``BLOCK_SIZE`` ids at a time by advancing ``producer_ids/next_block``, so
ids stay unique across brokers and restarts without a write per InitProducerId.
"""

from __future__ import annotations

import json

from barnabas.coordination import KeyExistsError, Storage, VersionConflictError

from .stored_values import StoredDocument

__all__ = ["ProducerIdAllocator"]

KEY = "producer_ids/next_block"
BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, storage: Storage, broker_id: int) -> None:
        self._storage = storage
        self._broker_id = broker_id
        self._next = 0
        self._end = 0

    async def next_id(self) -> int:
        """A producer id never handed out before by any broker sharing this storage.

        Raises:
            CorruptValueError: the block counter does not read. Starting over at 0 would hand out
                ids given before, so no id is handed out until it is repaired.
        """
        if self._next >= self._end:
            self._next, self._end = await self._reserve_block()
        producer_id = self._next
        self._next += 1
        return producer_id

    async def ensure_beyond(self, producer_id: int) -> None:
        """Hand out only ids above ``producer_id`` from now on, on every broker of this store.

        For a store that lost its counter while the logs kept their producers' states (a cluster
        recreated on its old volumes): an id handed out again would meet its old sequence
        numbers in those logs (OUT_OF_ORDER_SEQUENCE_NUMBER for a new producer).

        Raises:
            CorruptValueError: the block counter does not read.
        """
        wanted = (producer_id // BLOCK_SIZE + 1) * BLOCK_SIZE
        if self._next <= producer_id:
            self._next = self._end = 0
        while True:
            current = await self._storage.get(KEY)
            document = json.dumps({"next": wanted, "broker": self._broker_id}).encode()
            try:
                if current is None:
                    await self._storage.put_if_absent(KEY, document)
                elif StoredDocument(current.value, f"the producer id block {KEY}").integer("next") <= producer_id:
                    await self._storage.compare_and_set(KEY, document, current.version)
            except (KeyExistsError, VersionConflictError):
                continue
            return

    async def _reserve_block(self) -> tuple[int, int]:
        while True:
            current = await self._storage.get(KEY)
            if current is None:
                document = json.dumps({"next": BLOCK_SIZE, "broker": self._broker_id}).encode()
                try:
                    await self._storage.put_if_absent(KEY, document)
                except KeyExistsError:
                    continue
                return 0, BLOCK_SIZE
            start = StoredDocument(current.value, f"the producer id block {KEY}").integer("next")
            document = json.dumps({"next": start + BLOCK_SIZE, "broker": self._broker_id}).encode()
            try:
                await self._storage.compare_and_set(KEY, document, current.version)
            except VersionConflictError:
                continue
            return start, start + BLOCK_SIZE
