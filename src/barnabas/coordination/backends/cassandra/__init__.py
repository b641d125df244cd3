"""Coordination on Apache Cassandra (``cassandra://host[,host][:port]/keyspace[?namespace=…]``).

Rules this package keeps (coordination.md §6):

- Everything of one namespace lives in one partition of table ``kv``, so a commit is one
  single-partition conditional batch: a Paxos round (Cassandra ≥ 4.0; ``paxos_variant: v2`` on
  4.1 and newer). Every row is written only through LWT statements, never plain writes.
- Reads of the API run at SERIAL (linearizable); commits decide their checks on a SERIAL snapshot
  and apply under ``IF`` conditions on every row they read, and on the namespace's revision.
- Sessions are TTL'd lease rows renewed by a keepalive every lease/3; ephemeral keys share the
  lease's TTL and die with it. TTLs are whole seconds: a lease is ``max(2, ceil(ttl_s))`` seconds.
- Watches poll the revision and a change log kept in the same partition, plus an index of the
  ephemeral keys to see those that expire (an expiry writes nothing).

Modules: ``_cql`` (every statement), ``_connection`` (URL, driver, asyncio bridge, error table),
``_schema`` (the keyspace and table, created by clients racing on nodes that hear of it in turn),
``_metastore`` (reads, commits, lease operations), ``_session`` (keepalive and states),
``_watch`` (polling watches).
"""

from __future__ import annotations

from ._connection import Connection, parse_url
from ._metastore import CassandraMetastore
from ._session import CassandraSession

__all__ = ["CassandraMetastore", "CassandraSession", "open_backend"]


async def open_backend(url: str) -> CassandraMetastore:
    """Connect to the cluster a ``cassandra://`` URL names, creating the keyspace and table if missing.

    Raises:
        ValueError: the URL is malformed.
        UnavailableError: no host could be reached.
        UnsupportedBackendError: the server is older than 4.0 or runs Paxos v1.
    """
    return CassandraMetastore(url, await Connection.open(parse_url(url)))
