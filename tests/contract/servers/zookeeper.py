"""ZooKeeper for the coordination tests: the shipped ZooKeeperServer and ZooKeeperEnsemble, as pytest fixtures.

When a test using a server fails, the server's log tail is written to the terminal at teardown.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from barnabas.testing import free_ports
from barnabas.testing.servers.zookeeper import JAVA, ZOOKEEPER_JAR, ZooKeeperEnsemble, ZooKeeperServer, four_letter_word

__all__ = [
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "four_letter_word",
    "free_ports",
    "zookeeper_ensemble",
    "zookeeper_server",
]


def _require_zookeeper() -> None:
    if not ZOOKEEPER_JAR.exists() or not os.access(JAVA, os.X_OK):
        pytest.skip("ZooKeeper is not installed (apt-get install zookeeper)")


def _report_logs_on_failure(request: pytest.FixtureRequest, failed_before: int, logs: str) -> None:
    """Write the server logs to the terminal if a test failed while this server was in use."""
    if request.session.testsfailed > failed_before:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\n{logs}")


@pytest.fixture(scope="session")
def zookeeper_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper for the whole run; tests isolate themselves with ``url_for()`` chroots."""
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper-server")).start()
    failed_before = request.session.testsfailed
    yield server
    server.stop()
    _report_logs_on_failure(request, failed_before, server.log_tail())


@pytest.fixture
def zookeeper_ensemble(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperEnsemble]:
    """A fresh three-member ensemble for one test (it may kill and restart members)."""
    _require_zookeeper()
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zookeeper-ensemble")).start()
    failed_before = request.session.testsfailed
    yield ensemble
    ensemble.stop()
    _report_logs_on_failure(request, failed_before, ensemble.log_tails())
