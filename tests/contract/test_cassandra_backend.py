"""The Cassandra backend's own cases: its URL, its key ranges and its lease rounding (no server needed), and
how a renewal reads the answer of a node to a batch that did not apply.

Everything a Cassandra node must do as a coordination backend, it does in the shared contract
(barnabas.coordination.testing.contract and .outages, run by test_contract.py on a real node).
"""

from __future__ import annotations

import asyncio

import pytest

from barnabas.coordination.api import SessionState
from barnabas.coordination.backends.cassandra import _cql as cql
from barnabas.coordination.backends.cassandra import open_backend
from barnabas.coordination.backends.cassandra._connection import parse_url
from barnabas.coordination.backends.cassandra._metastore import prefix_end, renewal_outcome
from barnabas.coordination.backends.cassandra._session import Beat, lease_seconds, state_after
from tests.contract.servers.cassandra import CassandraServer

# -- pure parts (no server) ----------------------------------------------------------------


def test_url_parsing() -> None:
    target = parse_url("cassandra://a,b:9043/ks?replication_factor=3&namespace=n1")
    assert (target.hosts, target.port, target.keyspace, target.replication_factor, target.namespace) == (
        ("a", "b"),
        9043,
        "ks",
        3,
        "n1",
    )
    target = parse_url("cassandra://u:p%40ss@h/ks")
    assert (target.hosts, target.port, target.namespace, target.username, target.password) == (
        ("h",),
        9042,
        "barnabas",
        "u",
        "p@ss",
    )
    for bad in (
        "cassandra:///ks",
        "cassandra://h/",
        "cassandra://h/bad-name",
        "cassandra://h:1,g:2/ks",
        "cassandra://h/ks?colour=red",
        "cassandra://h/ks?replication_factor=0",
    ):
        with pytest.raises(ValueError):
            parse_url(bad)


def test_prefix_end_and_lease_rounding() -> None:
    assert prefix_end("") is None
    assert prefix_end("a/") == "a0"
    assert prefix_end("\U0010ffff") is None
    assert prefix_end("a\ud7ff") == "a\ue000"
    assert [lease_seconds(t) for t in (0.1, 1, 2, 2.5, 10)] == [2, 2, 2, 3, 10]
    assert state_after(Beat.ALIVE, 99, 2) is SessionState.CONNECTED
    assert state_after(Beat.GONE, 0, 2) is SessionState.LOST
    assert state_after(Beat.UNANSWERED, 1.9, 2) is SessionState.SUSPENDED
    assert state_after(Beat.UNANSWERED, 2.0, 2) is SessionState.LOST


# -- against a real node --------------------------------------------------------------------------


def test_a_renewal_whose_lease_row_is_gone_says_so(cassandra_server: CassandraServer) -> None:
    """A lease row can expire between a renewal's read and its batch. The batch's ``IF EXISTS`` then
    fails, and the node answers with ``[applied]`` alone: there is no row to show. The renewal must
    take that as the lease gone (LOST at once), as it takes a lease row it did not find when reading;
    it raised KeyError instead (seen on a 3-node ring under load, logged as "renewal failed"), and
    the session stayed SUSPENDED until its own clock ran the lease out.
    """

    async def scenario() -> None:
        metastore = await open_backend(cassandra_server.url_for())
        try:
            batch = metastore._connection.batch()
            batch.add(cql.RENEW_SESSION, (2, 2, metastore._connection.target.namespace, "no-such-session"))
            applied, rows = await batch.apply()
            assert (applied, rows) == (False, [{"[applied]": False}])
            assert renewal_outcome(applied, rows, "no-such-session") is False
        finally:
            await metastore.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
