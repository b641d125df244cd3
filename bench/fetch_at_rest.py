"""What one incremental fetch at rest costs the leader and the follower, by the partitions its session holds.

Leader: a broker in memory (the handler tests' harness: no sockets, the real request path from
decode to encode) holds one topic of ``--partitions`` partitions; a client opens a fetch session
over all of them (epoch 0) and then sends incremental fetches naming none, with no wait: nothing
has changed, so each answer is empty. Follower: a replica fetcher following the same partitions
(their logs; the fetcher is not started) makes its fetch rounds against a leader that answers each
at once, empty, keeping the session: its own work per round, building the request and reading the
answer. Printed: the mean time per fetch over ``--fetches`` of them, for each side. To compare with
an older build, run this file from that build's checkout with its ``src`` first on ``PYTHONPATH``:

    python bench/fetch_at_rest.py [--partitions 3000] [--fetches 300]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.requests import FETCH, fetch_request  # noqa: E402
from tests.unit.broker.in_memory import in_memory_broker  # noqa: E402

from barnabas.broker.follower_appends import FollowerAppends  # noqa: E402
from barnabas.broker.replication.fetcher import ReplicaFetcher  # noqa: E402

WARM_UP = 20


async def measure(partitions: int, fetches: int) -> float:
    """Seconds per incremental fetch at rest."""
    with tempfile.TemporaryDirectory(prefix="fetch-at-rest-") as directory:
        async with in_memory_broker(Path(directory), {}) as broker:
            await broker.create_topic("at-rest", partitions)
            opening = fetch_request([("at-rest", p, 0, 1 << 20) for p in range(partitions)], session_epoch=0)
            session = int((await broker.call(FETCH, 12, opening)).session_id)
            assert session != 0, "no fetch session was opened"
            epoch = 1
            for _ in range(WARM_UP):
                await broker.call(FETCH, 12, fetch_request([], session_id=session, session_epoch=epoch))
                epoch += 1
            started = time.perf_counter()
            for _ in range(fetches):
                answer = await broker.call(FETCH, 12, fetch_request([], session_id=session, session_epoch=epoch))
                epoch += 1
            took = time.perf_counter() - started
            assert answer.error_code == 0 and not answer.responses, "a fetch at rest was answered something"
            return took / fetches


class EmptyAnswers:
    """A leader keeping the fetch session and answering every fetch at once with nothing."""

    SESSION_ID = 77

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        return SimpleNamespace(error_code=0, session_id=self.SESSION_ID, responses=())


async def measure_follower(partitions: int, fetches: int) -> float:
    """Seconds of the follower's own work per fetch round at rest."""
    with tempfile.TemporaryDirectory(prefix="fetch-at-rest-") as directory:
        async with in_memory_broker(Path(directory), {}) as broker:
            await broker.create_topic("at-rest", partitions)
            node = broker.state.node
            fetcher = ReplicaFetcher(node, FollowerAppends(node), leader_id=1)
            for p in range(partitions):
                fetcher.add(("at-rest", p), 0)
            for tp in list(fetcher._untruncated):  # as a leader agreeing with every log leaves them
                getattr(fetcher, "_truncated", fetcher._untruncated.discard)(tp)  # older builds: discard alone
            leader: Any = EmptyAnswers()
            for _ in range(WARM_UP):
                assert await fetcher._fetch(leader)
            started = time.perf_counter()
            for _ in range(fetches):
                await fetcher._fetch(leader)
            return (time.perf_counter() - started) / fetches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--fetches", type=int, default=300)
    args = parser.parse_args()
    leader = asyncio.run(measure(args.partitions, args.fetches))
    follower = asyncio.run(measure_follower(args.partitions, args.fetches))
    print(
        f"{args.partitions:,} partitions: {leader * 1e6:,.0f} µs per incremental fetch at rest on the leader,"
        f" {follower * 1e6:,.0f} µs on the follower"
    )


if __name__ == "__main__":
    main()
