"""Servers for the contract suite and one ``<backend>_target`` fixture per backend.

Each server fixture lives in tests/contract/servers/<backend>.py and starts a real server on
loopback ports it picks; a target gives each test a fresh namespace on it (a prefix, chroot,
schema or keyspace), the timing the contract checks may expect from that backend, and the hooks the
outage checks take its server down with.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from barnabas.coordination.testing.contract import Target
from barnabas.testing import free_ports
from tests.contract.servers.cassandra import CassandraServer, cassandra_server  # noqa: F401
from tests.contract.servers.etcd import EtcdCluster, EtcdServer, etcd_cluster, etcd_server  # noqa: F401
from tests.contract.servers.postgres import PostgresServer, postgres_install, postgres_server  # noqa: F401
from tests.contract.servers.zookeeper import (  # noqa: F401
    ZooKeeperEnsemble,
    ZooKeeperServer,
    zookeeper_ensemble,
    zookeeper_server,
)

#: Backends every contract check runs against, in the order they run.
BACKENDS = ("sqlite", "etcd", "etcd3", "zookeeper", "postgres", "cassandra")
#: Backends with a server the outage checks take down (outages.py).
SERVER_BACKENDS = ("etcd", "zookeeper", "postgres", "cassandra")
#: Backends whose sessions end when their server is down past the TTL: leases that run on while it is
#: down (etcd, PostgreSQL, Cassandra), or a client that gives its session up after the timeout without
#: a server (ZooKeeper, whose servers restart their sessions' clocks when they start).
EXPIRING_BACKENDS = ("etcd", "zookeeper", "postgres", "cassandra")
#: Replicated server clusters whose own leader the fail-over check kills.
CLUSTER_BACKENDS = ("etcd3", "zookeeper3")


def unreachable_port() -> int:
    """A loopback port nothing listens on now."""
    return free_ports(1)[0]


@pytest.fixture
def sqlite_target(tmp_path: Path) -> Target:
    # Liveness is a flock: a dead owner's keys go within one reaper pass (0.2 s).
    return Target("sqlite", f"sqlite://{tmp_path / 'coordination.db'}", ttl_s=2.0, vanish_slack_s=2.0)


@pytest.fixture
def etcd_target(etcd_server: EtcdServer) -> Target:
    # A lease outlives its last keepalive (sent every ttl/3) by its TTL. A one-second request
    # timeout lets the outage checks see calls fail, and keepalives miss, quickly.
    url = etcd_server.url_for()
    return Target(
        "etcd",
        url,
        ttl_s=2.0,
        vanish_slack_s=3.0,
        server=etcd_server,
        outage_url=url + "?timeout=1",
        unreachable_url=f"etcd://127.0.0.1:{unreachable_port()}/x?timeout=0.5",
    )


@pytest.fixture
def etcd3_target(etcd_cluster: EtcdCluster) -> Target:
    # Every client lists all three members, the leader's first: the kill hits the member each one
    # talks to, and its keepalives, commits and watch must fail over.
    leader = etcd_cluster.leader()
    members = [leader, *(member for member in etcd_cluster.members if member is not leader)]
    url = f"etcd://{','.join(member.endpoint for member in members)}/t-{uuid.uuid4().hex[:12]}"

    def kill_leader() -> Callable[[], object]:
        killed = etcd_cluster.leader()
        killed.kill()
        return lambda: etcd_cluster.restart(killed)

    return Target("etcd3", url, ttl_s=2.0, vanish_slack_s=3.0, kill_server_leader=kill_leader)


@pytest.fixture
def zookeeper3_target(zookeeper_ensemble: ZooKeeperEnsemble) -> Target:
    # A session must outlast the ensemble's election (about a second with tickTime=200).
    def kill_leader() -> Callable[[], object]:
        leader = zookeeper_ensemble.leader()
        leader.kill()
        return leader.start

    return Target(
        "zookeeper3", zookeeper_ensemble.url_for(), ttl_s=4.0, vanish_slack_s=3.0, kill_server_leader=kill_leader
    )


@pytest.fixture
def zookeeper_target(zookeeper_server: ZooKeeperServer) -> Target:
    # Sessions expire in tickTime (200 ms) buckets after the negotiated timeout, at most 4 s here.
    # The outage URL names the server twice: ZooKeeper 3.8.0 accepts connections while it starts but
    # neither answers nor drops them (a NullPointerException in removeCnxn before its database is
    # loaded), and kazoo waits for a connect reply for the session timeout divided by the number of
    # hosts. With one host that wait outlasts the session the server has just restored; with two it
    # retries in time.
    url = zookeeper_server.url_for()
    chroot = url.rsplit("/", 1)[1]
    endpoint = zookeeper_server.endpoint
    return Target(
        "zookeeper",
        url,
        ttl_s=2.0,
        vanish_slack_s=3.0,
        server=zookeeper_server,
        outage_url=f"zookeeper://{endpoint},{endpoint}/{chroot}?op_timeout=1",
        outage_ttl_s=4.0,
        unreachable_url=f"zookeeper://127.0.0.1:{unreachable_port()}/x?op_timeout=0.5",
    )


@pytest.fixture
def postgres_target(postgres_server: PostgresServer) -> Target:
    # Leases on the server clock, renewed every ttl/3; each client's reaper deletes expired ones.
    return Target(
        "postgres",
        postgres_server.url_for(),
        ttl_s=2.0,
        vanish_slack_s=3.0,
        server=postgres_server,
        unreachable_url=f"postgresql://postgres@127.0.0.1:{unreachable_port()}/postgres",
    )


@pytest.fixture
def cassandra_target(cassandra_server: CassandraServer) -> Target:
    # TTLs have one-second granularity (the backend rounds up to >= 2 s); LWT rounds are slow. The
    # node takes 10-20 s to start again: an outage check's session must outlast that.
    if not cassandra_server.running:  # a check that took it down failed before starting it again
        cassandra_server.start()
    return Target(
        "cassandra",
        cassandra_server.url_for(),
        ttl_s=2.0,
        vanish_slack_s=3.0,
        notify_timeout_s=20.0,
        server=cassandra_server,
        outage_ttl_s=60.0,
        unreachable_url=f"cassandra://127.0.0.1:{unreachable_port()}/ks",
    )


def _target(request: pytest.FixtureRequest) -> Target:
    found: Target = request.getfixturevalue(f"{request.param}_target")
    return found


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest) -> Target:
    return _target(request)


@pytest.fixture(params=SERVER_BACKENDS)
def server_target(request: pytest.FixtureRequest) -> Target:
    return _target(request)


@pytest.fixture(params=EXPIRING_BACKENDS)
def expiring_target(request: pytest.FixtureRequest) -> Target:
    return _target(request)


@pytest.fixture(params=CLUSTER_BACKENDS)
def cluster_target(request: pytest.FixtureRequest) -> Target:
    return _target(request)
