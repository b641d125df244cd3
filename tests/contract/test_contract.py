"""Every coordination backend against the one contract (barnabas.coordination.testing.contract)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from barnabas.coordination.testing import contract
from barnabas.coordination.testing.contract import Target

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("check", contract.ALL_CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
def test_contract(target: Target, check: Callable[[Target], Awaitable[None]]) -> None:
    asyncio.run(check(target))


def test_listeners_resync_after_server_restart(server_target: Target) -> None:
    asyncio.run(contract.check_listeners_resync_after_server_restart(server_target))


def test_election_survives_server_leader_kill(cluster_target: Target) -> None:
    asyncio.run(contract.check_election_survives_server_leader_kill(cluster_target))
