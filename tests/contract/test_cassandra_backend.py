"""The Cassandra backend's own cases: its URL, its key ranges and its lease rounding (no server needed),
how a renewal reads the answer of a node to a batch that did not apply, and how long a renewal answered
late is counted on.

Everything a Cassandra node must do as a coordination backend, it does in the shared contract
(barnabas.coordination.testing.contract and .outages, run by test_contract.py on a real node).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from barnabas.coordination.api import SessionState
from barnabas.coordination.backends.cassandra import _cql as cql
from barnabas.coordination.backends.cassandra import open_backend
from barnabas.coordination.backends.cassandra._connection import parse_url
from barnabas.coordination.backends.cassandra._metastore import prefix_end, renewal_outcome
from barnabas.coordination.backends.cassandra._session import Beat, lease_clock, lease_seconds, state_after
from barnabas.coordination.errors import UnavailableError
from tests.contract.servers.cassandra import CassandraServer
from tests.contract.support import StateLog, eventually

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
    lease = lease_clock(2)
    lease.started(sent=100.0, answered=100.5)  # rows written in between, living 1 to 2 s
    assert state_after(Beat.ALIVE, lease, 100.5) is SessionState.CONNECTED
    assert state_after(Beat.ALIVE, lease, 101.0) is SessionState.SUSPENDED  # may be gone by the rounding
    assert state_after(Beat.GONE, lease, 100.5) is SessionState.LOST
    assert state_after(Beat.UNANSWERED, lease, 100.6) is SessionState.SUSPENDED
    assert state_after(Beat.UNANSWERED, lease, 102.49) is SessionState.SUSPENDED
    assert state_after(Beat.UNANSWERED, lease, 102.5) is SessionState.LOST


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


def test_a_renewal_answered_late_is_trusted_only_from_its_sending(cassandra_server: CassandraServer) -> None:
    """The node writes a renewal's rows when the renewal reaches it, with a TTL that may end a second
    early (whole seconds, counted from the second of the write), so a session may count on them only
    until ``lease - 1`` seconds after the renewal was sent: counted from a late answer, it called
    itself CONNECTED after the rows could be gone. Here one renewal is answered 1.5 s late (lease 3 s)
    and the next ones go unanswered: the session must be SUSPENDED by then, and LOST only once the rows
    are surely gone (the lease after the late answer).
    """
    answer_delay_s = 1.5

    async def scenario() -> None:
        metastore = await open_backend(cassandra_server.url_for())
        renew = metastore.renew_lease
        answered_late = asyncio.Event()
        sent_at = answered_at = 0.0

        async def late_then_unanswered(session_id: str, lease_s: int, timeout_s: float) -> bool:
            nonlocal sent_at, answered_at
            if answered_late.is_set():
                await asyncio.sleep(timeout_s)  # no answer, for as long as the caller waits
                raise UnavailableError("no answer")
            sent_at = time.monotonic()
            alive = await renew(session_id, lease_s, timeout_s)
            await asyncio.sleep(answer_delay_s)
            answered_at = time.monotonic()
            answered_late.set()
            return alive

        try:
            session = await metastore.open_session(3.0)
            log = StateLog(session)
            metastore.renew_lease = late_then_unanswered  # type: ignore[method-assign]
            await asyncio.wait_for(answered_late.wait(), 10)
            await eventually(lambda: session.state is SessionState.LOST, "LOST", 10)
            doubted = log.first_after(answered_at, SessionState.SUSPENDED)
            may_be_gone = sent_at + session.ttl_s - 1
            assert doubted <= may_be_gone + 0.05, f"CONNECTED {doubted - may_be_gone:.2f} s after the rows may be gone"
            lost = log.first_after(answered_at, SessionState.LOST)
            assert lost >= answered_at + session.ttl_s - 0.05, f"LOST {answered_at + session.ttl_s - lost:.2f} s early"
        finally:
            await metastore.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
