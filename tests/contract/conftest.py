"""Servers for the contract suite and one ``<backend>_target`` fixture per backend.

Each server fixture lives in tests/contract/servers/<backend>.py and starts a real server on
loopback ports it picks; a target gives each test a fresh namespace on it (a prefix, chroot,
schema or keyspace) and the timing the contract checks may expect from that backend.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from barnabas.coordination.testing.contract import Target
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
#: Backends with a server the restart check can bounce.
SERVER_BACKENDS = ("etcd", "zookeeper", "postgres", "cassandra")
#: Replicated server clusters whose own leader the fail-over check kills.
CLUSTER_BACKENDS = ("etcd3", "zookeeper3")


@pytest.fixture
def sqlite_target(tmp_path: Path) -> Target:
    # Liveness is a flock: a dead owner's keys go within one reaper pass (0.2 s).
    return Target("sqlite", f"sqlite://{tmp_path / 'coordination.db'}", ttl_s=2.0, vanish_slack_s=2.0)


@pytest.fixture
def etcd_target(etcd_server: EtcdServer) -> Target:
    # A lease outlives its last keepalive (sent every ttl/3) by its TTL.
    return Target("etcd", etcd_server.url_for(), ttl_s=2.0, vanish_slack_s=3.0, restart=etcd_server.restart)


@pytest.fixture
def etcd3_target(etcd_cluster: EtcdCluster) -> Target:
    # Every client lists all three members and fails over between them.
    def kill_leader() -> Callable[[], object]:
        leader = etcd_cluster.leader()
        leader.kill()
        return lambda: etcd_cluster.restart(leader)

    return Target("etcd3", etcd_cluster.url_for(), ttl_s=2.0, vanish_slack_s=3.0, kill_server_leader=kill_leader)


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
    # Sessions expire in tickTime (200 ms) buckets after the negotiated timeout.
    return Target(
        "zookeeper", zookeeper_server.url_for(), ttl_s=2.0, vanish_slack_s=3.0, restart=zookeeper_server.restart
    )


@pytest.fixture
def postgres_target(postgres_server: PostgresServer) -> Target:
    # Leases on the server clock, renewed every ttl/3; each client's reaper deletes expired ones.
    return Target("postgres", postgres_server.url_for(), ttl_s=2.0, vanish_slack_s=3.0, restart=postgres_server.restart)


@pytest.fixture
def cassandra_target(cassandra_server: CassandraServer) -> Target:
    # TTLs have one-second granularity (the backend rounds up to >= 2 s); LWT rounds are slow.
    return Target(
        "cassandra",
        cassandra_server.url_for(),
        ttl_s=2.0,
        vanish_slack_s=3.0,
        notify_timeout_s=20.0,
        restart=cassandra_server.restart,
    )


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest) -> Target:
    found: Target = request.getfixturevalue(f"{request.param}_target")
    return found


@pytest.fixture(params=SERVER_BACKENDS)
def server_target(request: pytest.FixtureRequest) -> Target:
    found: Target = request.getfixturevalue(f"{request.param}_target")
    return found


@pytest.fixture(params=CLUSTER_BACKENDS)
def cluster_target(request: pytest.FixtureRequest) -> Target:
    found: Target = request.getfixturevalue(f"{request.param}_target")
    return found
