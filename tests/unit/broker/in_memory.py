"""A broker built in memory for handler tests: real parts, no listener, no client.

The broker opens its embedded SQLite coordination and its logs in a temporary directory, joins its
one-broker cluster and builds every service, but binds no socket (``Broker.start(listen=False)``).
A request is a kio entity: it is encoded to a frame and decoded by the broker's own decoder, the
handler runs on the complete ``BrokerState``, and its answer (bytes, or chunks with log file
slices, read back here) is decoded with kio, the way h11 tests a connection without sockets.
"""

from __future__ import annotations

import contextlib
import datetime
import inspect
import itertools
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.types import TopicName

from barnabas.broker import Broker
from barnabas.broker.registry import CLOSE_CONNECTION
from barnabas.broker.state import BrokerState
from barnabas.config import load_broker_config
from barnabas.log import FileSlice
from barnabas.protocol import decode_request
from tests.support.raw_client import decode_response, encode_request

__all__ = ["ClosedConnectionError", "InMemoryBroker", "in_memory_broker"]

#: Settings that make a one-broker cluster answer at once (Kafka's own test defaults do the same).
TEST_SETTINGS = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


class ClosedConnectionError(Exception):
    """The handler asked for the connection to be closed instead of answering."""


class InMemoryBroker:
    def __init__(self, broker: Broker) -> None:
        assert broker.state is not None
        self.broker = broker
        self.state: BrokerState = broker.state
        self._correlation = itertools.count(1)

    async def call(self, api_key: int, version: int, body: Any, client_id: str = "in-memory") -> Any:
        """Run one request through the decoder and its handler; the decoded response entity."""
        correlation_id = next(self._correlation)
        frame = encode_request(api_key, version, body, correlation_id, client_id)[4:]
        request = decode_request(frame)
        spec = self.state.registry.get(api_key)
        assert spec is not None and spec.accepts(version), f"api {api_key} v{version} is not served"
        result = spec.handler(self.state, request)
        if inspect.isawaitable(result):
            result = await result
        if result is CLOSE_CONNECTION:
            raise ClosedConnectionError(f"api {api_key} v{version}")
        assert result is not None, "no response (acks=0)"
        payload = _joined(result)
        answered_id, response = decode_response(api_key, version, payload[4:])
        assert answered_id == correlation_id
        return response

    async def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic through the CreateTopics handler (replication factor 1, no overrides)."""
        topic = CreatableTopic(
            name=TopicName(name), num_partitions=partitions, replication_factor=1, assignments=(), configs=()
        )
        timeout = datetime.timedelta(seconds=10)
        response = await self.call(19, 7, CreateTopicsRequest(topics=(topic,), timeout=timeout, validate_only=False))
        (result,) = response.topics
        assert result.error_code == 0, result


def _joined(result: Any) -> bytes:
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result)
    parts = []
    for chunk in result:
        parts.append(chunk.read() if isinstance(chunk, FileSlice) else bytes(chunk))
    return b"".join(parts)


@contextlib.asynccontextmanager
async def in_memory_broker(directory: Path, settings: Mapping[str, str] | None = None) -> AsyncIterator[InMemoryBroker]:
    """A started one-broker cluster in ``directory``, stopped cleanly on exit."""
    overrides = {
        **TEST_SETTINGS,
        "log.dirs": str(directory / "data"),
        "coordination.url": f"sqlite:///{directory / 'coordination.db'}",
        **(settings or {}),
    }
    broker = Broker(load_broker_config(overrides=overrides, environ={}))
    await broker.start(listen=False)
    try:
        yield InMemoryBroker(broker)
    finally:
        await broker.stop()
