"""The keyspace and its table, created by whichever client comes first, on nodes that hear of schema changes in turn.

Rules this module keeps:

- Clients that start together (a cluster's brokers) create the keyspace and table at once, through
  different nodes, and a node hears of a schema change only when it has spread to it (Cassandra
  before 5.1 has no transactional metadata): a node that has not heard of the keyspace refuses the
  table ("Keyspace ... doesn't exist"), one that has not heard of the table refuses to prepare on it
  ("table kv does not exist"), and two nodes creating the table at once would give it two ids.
  Three brokers on a fresh keyspace of a 3-node ring failed to start one start in two.
- So the table's id is derived from its keyspace's name (every creator makes the same table); after
  each step the client waits until the live nodes agree on the schema; and a step a node refused for
  a keyspace or table it has not heard of, or that found no node to answer it (a busy node marked
  down for a moment), is tried again, until SCHEMA_WAIT_S. Every step may run twice: each is
  ``IF NOT EXISTS`` or a prepare.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import cassandra

from ...errors import CoordinationError, UnavailableError
from . import _cql as cql

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["SCHEMA_WAIT_S", "create_schema", "not_known_yet", "table_id"]

#: How long a client keeps trying to create (or find) the keyspace and table while nodes disagree.
SCHEMA_WAIT_S = 30.0
#: Pause before a refused step is tried again (after waiting for agreement).
RETRY_S = 0.2
_NOT_KNOWN = re.compile(r"does(?:n't| not) exist")


def table_id(keyspace: str) -> uuid.UUID:
    """The id every client gives ``keyspace``'s table, so that creating it twice at once makes one table."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"barnabas:{keyspace}.kv")


def not_known_yet(exc: BaseException) -> bool:
    """Whether a node refused a request for a keyspace or table it has not heard of (yet)."""
    cause = exc.__cause__ if isinstance(exc, CoordinationError) else exc
    return isinstance(cause, cassandra.InvalidRequest) and _NOT_KNOWN.search(str(cause)) is not None


async def create_schema(connection: Connection) -> None:
    """Create the keyspace and table if missing and prepare the statements, once every step can be.

    Raises:
        CoordinationError: a step was refused for another reason, or still refused after SCHEMA_WAIT_S.
        UnavailableError: the cluster could not be reached.
    """
    target = connection.target
    names = {
        "keyspace": target.keyspace,
        "replication_factor": target.replication_factor,
        "table_id": table_id(target.keyspace),
    }
    deadline = time.monotonic() + SCHEMA_WAIT_S
    steps: list[Callable[[], Awaitable[object]]] = [
        lambda: connection.execute(cql.CREATE_KEYSPACE.format(**names), prepared=False),
        lambda: connection.execute(cql.CREATE_TABLE.format(**names), prepared=False),
        connection.prepare,
    ]
    for step in steps:
        while True:
            try:
                await step()
                break
            except CoordinationError as exc:
                retryable = isinstance(exc, UnavailableError) or not_known_yet(exc)
                if not retryable or time.monotonic() >= deadline:
                    raise
            await connection.wait_for_schema_agreement(deadline - time.monotonic())
            await asyncio.sleep(RETRY_S)
        await connection.wait_for_schema_agreement(deadline - time.monotonic())
