"""Coordination in an etcd v3 cluster: ``etcd://host:port[,host:port…]/prefix[?timeout=seconds]``.

How the contract maps onto etcd (coordination.md §3), one job per module:

- ``_connection``: the URL, a gRPC channel per endpoint with fail-over, and the one table turning
  gRPC errors into coordination errors.
- ``_metastore``: keys under the prefix; our versions are etcd's per-key ``version``; a commit is
  one Txn whose compares are the checks; ephemeral keys carry their session's lease.
- ``_session``: a session is a lease kept alive by its own task every TTL/3; CONNECTED, SUSPENDED
  and LOST are decided in one function from what the keepalives learn.
- ``_watch``: a prefix watch, resumed from the last revision seen after a broken stream; Resync
  first, after a compaction, or when the cluster was replaced.

The driver is aetcd 1.0.0, used at its gRPC layer (``aetcd.rpc``: the generated etcd stubs over
grpc.aio): its Client has no ``ignore_lease`` on puts, no response headers on watch events and one
host per client, all of which the contract needs.
"""

from __future__ import annotations

from ._connection import parse_url
from ._metastore import EtcdMetastore
from ._session import EtcdSession

__all__ = ["EtcdMetastore", "EtcdSession", "open_backend", "parse_url"]


async def open_backend(url: str) -> EtcdMetastore:
    """Connect to the etcd cluster named by ``url`` and check that a member answers.

    Raises:
        ValueError: the URL is malformed.
        UnavailableError: no member answered within the request timeout.
    """
    metastore = EtcdMetastore(url, parse_url(url))
    try:
        await metastore.ping()
    except BaseException:
        await metastore.close()
        raise
    return metastore
