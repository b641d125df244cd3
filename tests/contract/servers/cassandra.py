"""Cassandra for the coordination tests: the shipped CassandraServer, built from ``cassandra/`` here, as a fixture.

``cassandra/build.sh`` resolves ``cassandra-all`` (version in ``cassandra/pom.xml``) into
``cassandra/build/lib`` (gitignored). One node per test session (it takes seconds to start and ~1 GB
of memory); tests isolate themselves with a fresh keyspace per test (``url_for()``). A test that fails
nodes of a ring gets three for its module (``cassandra_ring``). When the nodes cannot be built or started
here (no ``java``/``mvn``, Maven Central unreachable, the JVM dies), the fixtures *skip* with the
reason and the log tail, printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from barnabas.testing import free_ports
from barnabas.testing.servers.cassandra import CassandraRing, CassandraServer, build_cassandra

__all__ = [
    "BUILD_SCRIPT",
    "LIB_DIR",
    "CassandraRing",
    "CassandraServer",
    "build_cassandra",
    "cassandra_ring",
    "cassandra_server",
    "free_ports",
]

HERE = Path(__file__).resolve().parent / "cassandra"
BUILD_SCRIPT = HERE / "build.sh"
LIB_DIR = HERE / "build" / "lib"


@pytest.fixture(scope="session")
def cassandra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    """One Cassandra node for the whole run; skips, saying why, when it cannot be built or started here."""
    try:
        lib_dir = build_cassandra(BUILD_SCRIPT, LIB_DIR)
    except RuntimeError as exc:
        _skip_without("Cassandra node", exc)
    server = CassandraServer(tmp_path_factory.mktemp("cassandra-server"), lib_dir)
    try:
        server.start()
    except RuntimeError as exc:
        _skip_without("Cassandra node", exc)
    print(f"cassandra node {server.endpoint} (pid {server.pid}) accepted CQL after {server.started_in_s:.1f} s")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cassandra_ring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraRing]:
    """Three nodes on 127.0.0.1-3 for one test module, whose tests may kill, pause and restart them (and
    leave them running); skips, saying why, when they cannot be built or started here."""
    try:
        lib_dir = build_cassandra(BUILD_SCRIPT, LIB_DIR)
        ring = CassandraRing(tmp_path_factory.mktemp("cassandra-ring"), lib_dir)
        began = time.monotonic()
        ring.start()
    except RuntimeError as exc:
        _skip_without("Cassandra ring", exc)
    print(f"cassandra ring {ring.url_for()} joined after {time.monotonic() - began:.1f} s")
    yield ring
    ring.stop()


def _skip_without(what: str, exc: RuntimeError) -> NoReturn:
    """Skip, saying why, in the output too (a skip reason alone is easy to miss in a long run)."""
    reason = f"no {what} for the tests: {exc}"
    print(reason)
    pytest.skip(reason)
