"""Who sent the request being handled, and how: Kafka's RequestContext, for the handlers that need it.

Each connection serves its requests in its own task and sets these first, so a handler reads
the values of its own connection. Outside a connection (handlers driven in memory) they keep
their defaults: no listener, the anonymous principal.
"""

from __future__ import annotations

from contextvars import ContextVar

from barnabas.security import ANONYMOUS, KafkaPrincipal, SaslAuthenticator

__all__ = ["CLIENT_HOST", "LISTENER_NAME", "PRINCIPAL", "SASL"]

#: The client's address as Kafka reports it ("/127.0.0.1").
CLIENT_HOST: ContextVar[str] = ContextVar("client_host", default="")
#: The name of the listener the connection came in on (Metadata answers with that listener's endpoints).
LISTENER_NAME: ContextVar[str] = ContextVar("listener_name", default="")
#: Who the connection is (User:ANONYMOUS, or the mapped name of a verified client certificate), for ACLs.
PRINCIPAL: ContextVar[KafkaPrincipal] = ContextVar("principal", default=ANONYMOUS)
#: The connection's SASL state on a SASL listener (SaslHandshake and SaslAuthenticate drive it); None elsewhere.
SASL: ContextVar[SaslAuthenticator | None] = ContextVar("sasl", default=None)
