"""Fixtures of the fault tests: every cluster test runs once per coordination backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cluster import CLUSTER_BACKENDS
from tests.support.cluster import coordination_url as coordination_url_on


@pytest.fixture(params=CLUSTER_BACKENDS)
def coordination_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh coordination URL on each cluster backend in turn."""
    return coordination_url_on(request, request.param, tmp_path)
