"""A broker whose topic document in coordination does not read: it keeps the topic's data, and starts.

Before shapes were checked, ``"partitions": {"0": "0"}`` read as partition 0 on broker "0" (a
string, so not broker 0): the broker took the topic for one it no longer holds and deleted its log.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kio.schema.errors import ErrorCode

from barnabas.protocol import build_record_batch
from tests.unit.broker.in_memory import in_memory_broker
from tests.unit.broker.test_handlers import create, produce


def test_a_topic_whose_document_does_not_read_keeps_its_logs_across_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with in_memory_broker(tmp_path) as broker:
            await create(broker, "orders")
            batch = build_record_batch([(b"k", b"v")], base_timestamp_ms=1_700_000_000_000)
            assert (await produce(broker, "orders", batch)).error_code == ErrorCode.none
            storage = broker.state.node.storage
            stored = await storage.get("topics/orders")
            assert stored is not None
            damaged = {**json.loads(stored.value), "partitions": {"0": "0"}}
            await storage.compare_and_set("topics/orders", json.dumps(damaged).encode(), stored.version)
            await broker.state.node.topics.refresh(["topics/orders"])
        async with in_memory_broker(tmp_path) as broker:
            node = broker.state.node
            assert node.topics.unreadable_topics == {"orders"}
            kept = node.logs.get("orders", 0)
            assert kept is not None and kept.log_end_offset == 1

    asyncio.run(asyncio.wait_for(main(), 60))
