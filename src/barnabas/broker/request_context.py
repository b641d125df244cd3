"""Who sent the request being handled, for the few handlers that report it (JoinGroup's client host).

Each connection serves its requests in its own task and sets these first, so a handler reads
the values of its own connection.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["CLIENT_HOST"]

#: The client's address as Kafka reports it ("/127.0.0.1").
CLIENT_HOST: ContextVar[str] = ContextVar("client_host", default="")
