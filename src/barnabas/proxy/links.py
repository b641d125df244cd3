"""Connections to the real brokers: one pipelined connection per broker address, per owner.

Each client connection of the proxy has its own set (opened on first use), as a client talking
to the brokers directly would: a broker serves a connection's requests one at a time, so a
JoinGroup waiting for a rebalance (or a long-poll Fetch) on a connection shared by several clients
would hold up everyone else's requests behind it, and could wait forever on a member whose
requests are stuck there. The proxy's own requests (Metadata, FindCoordinator) use a set of their
own. A connection that fails is dropped and the next request opens a new one; concurrent requests
wait for the same connect instead of racing several.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from barnabas.client import BrokerConnectionError, KafkaClient

__all__ = ["Address", "BrokerLinks"]

log = logging.getLogger(__name__)

Address = tuple[str, int]


class BrokerLinks:
    def __init__(
        self, *, client_id: str, connect_timeout_s: float, request_timeout_s: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.client_id = client_id
        #: The TLS context towards the brokers' SSL listener (broker.security.protocol=SSL), else None.
        self.tls = tls
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._open: dict[Address, KafkaClient] = {}
        self._connecting: dict[Address, asyncio.Task[KafkaClient]] = {}

    async def get(self, address: Address) -> KafkaClient:
        """The open connection to ``address``, opened now if there is none.

        Raises:
            BrokerConnectionError: the broker cannot be reached.
        """
        client = self._open.get(address)
        if client is not None and not client.closed:
            return client
        task = self._connecting.get(address)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(address))
            self._connecting[address] = task
            task.add_done_callback(lambda _: self._connecting.pop(address, None))
        return await asyncio.shield(task)

    async def _connect(self, address: Address) -> KafkaClient:
        host, port = address
        client = await KafkaClient.connect(
            host,
            port,
            client_id=self.client_id,
            timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            tls=self.tls,
        )
        self._open[address] = client
        return client

    def sibling(self) -> BrokerLinks:
        """A new, empty set of connections with the same settings (for another client connection)."""
        return BrokerLinks(
            client_id=self.client_id,
            connect_timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            tls=self.tls,
        )

    def close_nowait(self) -> None:
        """Close every connection without waiting (the client connection owning them is gone)."""
        for task in list(self._connecting.values()):
            task.cancel()
        for client in self._open.values():
            client.close()
        self._open.clear()

    def drop(self, address: Address) -> None:
        """Forget (and close) the connection to ``address``: the broker moved or failed."""
        client = self._open.pop(address, None)
        if client is not None:
            client.close()

    async def close(self) -> None:
        for task in list(self._connecting.values()):
            task.cancel()
        for client in list(self._open.values()):
            client.close()
            with contextlib.suppress(BrokerConnectionError):
                await client.wait_closed()
        self._open.clear()
