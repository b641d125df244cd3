"""The replica manager's full passes let the event loop run while they lead many partitions.

A broker that registers again after a restart is made leader of all its partitions at once; with
33,000 of them one pass held the event loop for 16 s, past its own coordination session's TTL, so
the broker lost the session and the next election started the same again. Here every partition's
leader epoch is bumped at once (an election elsewhere) and a pass taken with a slice of zero: other
tasks must run between its partitions, seeing some at the new epoch and some not yet.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from barnabas.broker.replication import manager
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

PARTITIONS = 40


def test_a_full_pass_lets_other_tasks_run_between_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager, "RECONCILE_SLICE_S", 0.0)

    async def scenario(broker: InMemoryBroker) -> set[int]:
        replicas = broker.state.replicas
        topics = broker.state.node.topics
        await broker.create_topic("many", partitions=PARTITIONS)
        assert all(replicas.leader("many", p) is not None for p in range(PARTITIONS))
        replicas.poke = lambda: None  # type: ignore[method-assign]  # the pass below is the only one
        for p in range(PARTITIONS):
            state = topics.states[("many", p)]
            version = topics.state_version("many", p)
            assert version is not None
            bumped = dataclasses.replace(state, leader_epoch=state.leader_epoch + 1)
            await topics.update_state("many", p, bumped, version)
        new_epoch = topics.states[("many", 0)].leader_epoch

        def at_new_epoch() -> int:
            return sum(1 for p in range(PARTITIONS) if replicas.leaders[("many", p)].leader_epoch == new_epoch)

        seen: set[int] = set()
        passing = asyncio.ensure_future(replicas._reconcile_in_slices())
        while not passing.done():
            seen.add(at_new_epoch())
            await asyncio.sleep(0)
        await passing
        seen.add(at_new_epoch())
        return seen

    async def main() -> set[int]:
        async with in_memory_broker(tmp_path) as broker:
            return await scenario(broker)

    seen = asyncio.run(asyncio.wait_for(main(), 60))
    assert PARTITIONS in seen, "the pass led every partition at the new epoch"
    assert [n for n in seen if 0 < n < PARTITIONS], f"other tasks ran only before or after the pass: {sorted(seen)}"
