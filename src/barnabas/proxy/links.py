"""Connections to the real brokers: one pipelined connection per broker address, per owner.

Each client connection of the proxy has its own set (opened on first use), as a client talking
to the brokers directly would: a broker serves a connection's requests one at a time, so a
JoinGroup waiting for a rebalance (or a long-poll Fetch) on a connection shared by several clients
would hold up everyone else's requests behind it, and could wait forever on a member whose
requests are stuck there. The proxy's own requests (Metadata, FindCoordinator) use a set of their
own. A connection that fails is dropped and the next request opens a new one; concurrent requests
wait for the same connect instead of racing several.

Towards SASL brokers every connection logs in as the proxy (``login``). A client connection's set
names that client's principal as the authorization id (``act_for``), so the brokers authorize the
client, not the proxy; it opens nothing before it knows whom it acts for. The proxy's own set names
no one. The principal of a set never changes (KIP-368 forbids a client changing it).

A broker with ``connections.max.reauth.ms`` ends each SASL session after that long and closes a
connection that sends anything after it; the proxy does not re-authenticate its connections, it
renews them: one whose session is ``RENEW_AT`` over is no longer handed out, the next request opens
a new one, and the old one closes once it has had no request in flight for a request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

from barnabas.client import BrokerConnectionError, KafkaClient, SaslClientMechanism
from barnabas.protocol import BufferPool

__all__ = ["Address", "BrokerLinks"]

log = logging.getLogger(__name__)

Address = tuple[str, int]
#: How much of a broker's SASL session may pass before its connection is renewed (Kafka's clients
#: re-authenticate between 85% and 95% of it, SaslClientAuthenticator).
RENEW_AT = 0.85


#: A fresh client side of the proxy's SASL login, acting for the principal named ("" for the proxy itself).
Login = Callable[[str], SaslClientMechanism]


class BrokerLinks:
    def __init__(
        self,
        *,
        client_id: str,
        connect_timeout_s: float,
        request_timeout_s: float,
        tls: ssl.SSLContext | None = None,
        login: Login | None = None,
        acting_for: str | None = "",
        buffers: BufferPool | None = None,
    ) -> None:
        """Args: ``acting_for`` names the client's principal ("" the proxy itself; None not known yet);
        ``buffers`` is where the connections' large answers are read into (the proxy's shared pool)."""
        self.client_id = client_id
        #: The TLS context towards the brokers' SSL listener (broker.security.protocol=SSL), else None.
        self.tls = tls
        #: The proxy's SASL login towards SASL brokers, else None.
        self.login = login
        self.acting_for = acting_for
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.buffers = buffers
        self._open: dict[Address, KafkaClient] = {}
        self._connecting: dict[Address, asyncio.Task[KafkaClient]] = {}
        #: Connections renewed (their session nearly over), closing once idle.
        self._retired: set[KafkaClient] = set()

    async def get(self, address: Address) -> KafkaClient:
        """The open connection to ``address``, opened now if there is none.

        Raises:
            BrokerConnectionError: the broker cannot be reached.
        """
        client = self._open.get(address)
        if client is not None and not client.closed:
            if not _session_ending(client):
                return client
            self._retire(address, client)
        task = self._connecting.get(address)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(address))
            self._connecting[address] = task
            task.add_done_callback(lambda _: self._connecting.pop(address, None))
        return await asyncio.shield(task)

    async def _connect(self, address: Address) -> KafkaClient:
        host, port = address
        sasl = None
        if self.login is not None:
            if self.acting_for is None:
                raise BrokerConnectionError("the client's principal is not known yet (it has not authenticated)")
            sasl = self.login(self.acting_for)
        client = await KafkaClient.connect(
            host,
            port,
            client_id=self.client_id,
            timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            tls=self.tls,
            sasl=sasl,
            buffers=self.buffers,
        )
        self._open[address] = client
        return client

    def _retire(self, address: Address, client: KafkaClient) -> None:
        """Hand ``client`` out no more; close it once it has had no request in flight for a request timeout."""
        del self._open[address]
        self._retired.add(client)
        loop = asyncio.get_running_loop()

        def close_when_idle() -> None:
            if client.in_flight and not client.closed:
                loop.call_later(self.request_timeout_s, close_when_idle)
                return
            client.close()
            self._retired.discard(client)

        loop.call_later(self.request_timeout_s, close_when_idle)

    def sibling(self) -> BrokerLinks:
        """A new, empty set of connections with the same settings, for a client connection whose principal
        is not known yet (:meth:`act_for` tells it)."""
        return BrokerLinks(
            client_id=self.client_id,
            connect_timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            tls=self.tls,
            login=self.login,
            acting_for=None,
            buffers=self.buffers,
        )

    def act_for(self, principal_name: str) -> None:
        """Log in for ``principal_name`` (the client's, once it is known) from now on.

        Raises:
            ValueError: it names someone else than before (a set's principal never changes).
        """
        if self.acting_for is not None and self.acting_for != principal_name:
            raise ValueError(f"these broker connections act for {self.acting_for!r}, not {principal_name!r}")
        self.acting_for = principal_name

    def close_nowait(self) -> None:
        """Close every connection without waiting (the client connection owning them is gone)."""
        for task in list(self._connecting.values()):
            task.cancel()
        for client in [*self._open.values(), *self._retired]:
            client.close()
        self._open.clear()
        self._retired.clear()

    def drop(self, address: Address) -> None:
        """Forget (and close) the connection to ``address``: the broker moved or failed."""
        client = self._open.pop(address, None)
        if client is not None:
            client.close()

    async def close(self) -> None:
        for task in list(self._connecting.values()):
            task.cancel()
        for client in [*self._open.values(), *self._retired]:
            client.close()
            with contextlib.suppress(BrokerConnectionError):
                await client.wait_closed()
        self._open.clear()
        self._retired.clear()


def _session_ending(client: KafkaClient) -> bool:
    """Whether ``client``'s SASL session at the broker is ``RENEW_AT`` over (KIP-368)."""
    ends_at, lifetime_s = client.session_ends_at, client.session_lifetime_s
    if ends_at is None or lifetime_s is None:
        return False
    return asyncio.get_running_loop().time() >= ends_at - (1 - RENEW_AT) * lifetime_s
