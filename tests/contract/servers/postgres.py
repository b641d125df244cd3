"""PostgreSQL for the coordination tests: the shipped PostgresInstall and PostgresServer, as pytest fixtures.

The install's temp dir is removed at the end unless a test failed; the servers' logs are printed then.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import pytest

from barnabas.testing import free_ports
from barnabas.testing.servers.postgres import PostgresInstall, PostgresServer

__all__ = ["PostgresInstall", "PostgresServer", "free_port", "postgres_install", "postgres_server"]


def free_port() -> int:
    return free_ports(1)[0]


def _print_logs_on_failure(request: pytest.FixtureRequest, install: PostgresInstall) -> bool:
    """Print the servers' logs if any test failed; return whether one did (then the dir is kept)."""
    failed = bool(request.session.testsfailed)
    if failed:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        context = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
        with context:
            print(f"\nPostgreSQL test servers kept in {install.base}\n{install.log_tails()}", file=sys.stderr)
    return failed


@pytest.fixture(scope="session")
def postgres_install(request: pytest.FixtureRequest) -> Iterator[PostgresInstall]:
    """initdb once per run; tests that restart or kill a server make their own with ``.server()``."""
    try:
        install = PostgresInstall().initdb()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        yield install
    finally:
        install.cleanup(keep=_print_logs_on_failure(request, install))


@pytest.fixture(scope="session")
def postgres_server(postgres_install: PostgresInstall) -> Iterator[PostgresServer]:
    """One server for the whole run; tests isolate themselves with ``url_for()`` schemas."""
    server = postgres_install.server("shared").start()
    yield server
    server.stop()
