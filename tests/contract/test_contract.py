"""Every coordination backend against the one contract (barnabas.coordination.testing.contract and .outages)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from barnabas.coordination.testing import contract, outages
from barnabas.coordination.testing.contract import Target

pytestmark = pytest.mark.timeout(180)

Check = Callable[[Target], Awaitable[None]]


def _name(check: Check) -> str:
    return check.__name__.removeprefix("check_")


@pytest.mark.parametrize("check", contract.ALL_CHECKS, ids=_name)
def test_contract(target: Target, check: Check) -> None:
    asyncio.run(check(target))


@pytest.mark.parametrize(
    "check",
    [
        outages.check_an_unreachable_server_is_unavailable,
        outages.check_session_rides_out_a_server_restart,
        outages.check_session_rides_out_a_paused_server,
        outages.check_listeners_resync_after_server_restart,
    ],
    ids=_name,
)
def test_server_outage(server_target: Target, check: Check) -> None:
    asyncio.run(check(server_target))


def test_session_is_lost_when_the_server_is_down_past_its_ttl(expiring_target: Target) -> None:
    asyncio.run(outages.check_session_is_lost_when_the_server_is_down_past_its_ttl(expiring_target))


def test_election_survives_server_leader_kill(cluster_target: Target) -> None:
    asyncio.run(outages.check_election_survives_server_leader_kill(cluster_target))
