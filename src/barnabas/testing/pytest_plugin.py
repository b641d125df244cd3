"""The pytest plugin: a real Kafka-compatible broker, or a replicated 3-broker cluster, for any project's tests.

Installed with barnabas (entry point ``pytest11``), so its fixtures are there without a conftest:

- ``barnabas_broker`` (session): one broker; ``barnabas_bootstrap`` (session) its ``host:port``;
- ``barnabas_topic``: a fresh topic on that broker for each test, deleted after it
  (``@pytest.mark.barnabas_topic(partitions=3, config={...})`` shapes it);
- ``barnabas_cluster``: a 3-broker cluster (replication factor 3, ``min.insync.replicas`` 2),
  shared by the session and healed after each test that used it: brokers the test killed,
  paused or stopped are running and registered again before the next test. Topics stay for the
  session: name them per test.

No Docker and no JVM: the brokers are ``barnabas broker`` processes bound to 127.0.0.1 on ports
they pick, with their data under pytest's temporary directory, which pytest-xdist gives every
worker its own of. When a test fails, the last lines of each broker's log it used are added to
its report.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from .broker import Broker
from .cluster import BrokerCluster

#: Settings that keep test runs quick: no 3 s wait before a new group's first rebalance, a small
#: offsets topic (Kafka's 50 partitions cost time on the first group), and Kafka's other defaults.
TEST_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
CLUSTER_SETTINGS = {**TEST_SETTINGS, "min.insync.replicas": "2", "default.replication.factor": "3"}
TOPIC_TIMEOUT_S = 30
LOG_LINES_ON_FAILURE = 30


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "barnabas_topic(partitions=1, config=None): the shape of the test's barnabas_topic"
    )


@pytest.fixture(scope="session")
def barnabas_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the whole session."""
    broker = Broker(tmp_path_factory.mktemp("barnabas-broker") / "data", properties=TEST_SETTINGS).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def barnabas_bootstrap(barnabas_broker: Broker) -> str:
    """``host:port`` of the session's broker, for ``bootstrap.servers``."""
    return barnabas_broker.bootstrap


@pytest.fixture
def barnabas_topic(barnabas_broker: Broker, request: pytest.FixtureRequest) -> Iterator[str]:
    """A topic of its own for this test (1 partition unless the barnabas_topic marker says otherwise)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    marker = request.node.get_closest_marker("barnabas_topic")
    shape: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    name = f"{re.sub(r'[^A-Za-z0-9._-]+', '-', request.node.name)[:150]}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": barnabas_broker.bootstrap})
    wanted = NewTopic(name, int(shape.get("partitions", 1)), 1, config=dict(shape.get("config") or {}))
    admin.create_topics([wanted], operation_timeout=TOPIC_TIMEOUT_S)[name].result(TOPIC_TIMEOUT_S)
    yield name
    if barnabas_broker.running:
        admin.delete_topics([name], operation_timeout=TOPIC_TIMEOUT_S)[name].result(TOPIC_TIMEOUT_S)


@pytest.fixture(scope="session")
def barnabas_session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    """The session's 3-broker cluster, as the tests left it (``barnabas_cluster`` heals it after each)."""
    cluster = BrokerCluster(tmp_path_factory.mktemp("barnabas-cluster"), 3, properties=CLUSTER_SETTINGS).start()
    yield cluster
    for broker in cluster.brokers:
        broker.stop()


@pytest.fixture
def barnabas_cluster(barnabas_session_cluster: BrokerCluster) -> Iterator[BrokerCluster]:
    """A running 3-broker cluster; kill, pause, resume and restart its brokers freely."""
    yield barnabas_session_cluster
    barnabas_session_cluster.heal()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and call.when == "call":
        funcargs = getattr(item, "funcargs", {})
        brokers = []
        if isinstance(funcargs.get("barnabas_broker"), Broker):
            brokers.append(funcargs["barnabas_broker"])
        for key in ("barnabas_cluster", "barnabas_session_cluster"):
            if isinstance(funcargs.get(key), BrokerCluster):
                brokers += funcargs[key].brokers
        for broker in dict.fromkeys(brokers):
            report.sections.append((f"barnabas broker {broker.broker_id} log", broker.tail(LOG_LINES_ON_FAILURE)))
    return report
