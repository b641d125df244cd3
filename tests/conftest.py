"""Fixtures shared by every test layer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contract.servers.etcd import etcd_server  # noqa: F401 - coordination servers for every layer
from tests.contract.servers.zookeeper import zookeeper_server  # noqa: F401
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import BrokerCluster
from tests.support.scheduling import LongestFirstScheduling, run_rank


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    """Build brokers under this test's tmp dir; every one started is stopped afterwards."""
    started: list[BrokerProcess] = []

    def make(**kwargs: object) -> BrokerProcess:
        index = len(started)
        data_dir = Path(str(kwargs.pop("data_dir", tmp_path / f"broker-{index}")))
        kwargs.setdefault("name", f"broker-{index}")  # its log and port files, even on another's data dir
        process = BrokerProcess(data_dir, **kwargs)  # type: ignore[arg-type]
        started.append(process)
        return process

    yield make  # type: ignore[misc]
    for process in started:
        process.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    """A running single broker with default settings."""
    return broker_factory().start()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a whole test module, for tests that do not restart it."""
    process = BrokerProcess(tmp_path_factory.mktemp("shared-broker") / "data").start()
    yield process
    process.kill()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, the unit tests last (tests/support/scheduling.py says why)."""
    items.sort(key=lambda item: run_rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LongestFirstScheduling:
    config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems made
    return LongestFirstScheduling(config, log)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """Keep each phase's report on the item, so fixtures can tell at teardown whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def cluster_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., BrokerCluster]]:
    """Build broker clusters (BrokerCluster's arguments, and ``cluster_class``, a subclass, to build another kind);
    every broker of every one is killed afterwards, however the test ended, and its log's last lines are printed
    if the test failed."""
    made: list[BrokerCluster] = []

    def make(*args: object, cluster_class: type[BrokerCluster] = BrokerCluster, **kwargs: object) -> BrokerCluster:
        cluster = cluster_class(*args, **kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for cluster in made:
            for broker in cluster.brokers:
                print(f"--- broker {broker.broker_id}, last lines ---\n" + "\n".join(broker.output))
