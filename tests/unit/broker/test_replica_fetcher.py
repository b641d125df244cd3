"""What a follower's fetcher asks of its leader, round by round, and what it looks at to decide.

The fetcher keeps each partition's fetch position from round to round and looks again only at the
partitions something may have changed: a fetch at rest looks at none, however many it follows. The
logs are real (a broker's log manager in a temporary directory); the fetcher is not started, each
round is built by hand and answered as a leader holding the session would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from barnabas.broker.follower_appends import FollowerAppends
from barnabas.broker.replication.fetcher import LEADER_CATCH_UP_S, ReplicaFetcher
from barnabas.broker.replication.session_handler import SessionFetch
from barnabas.log import LogConfig, PartitionLog
from barnabas.protocol import ErrorCode, build_record_batch
from tests.unit.broker.in_memory import InMemoryBroker
from tests.unit.broker.test_handlers import create, run

LEADER_ID = 1
EPOCH = 3
SESSION_ID = 77
NOW_MS = 1_700_000_000_000


async def following(broker: InMemoryBroker, topic: str, partitions: int) -> tuple[ReplicaFetcher, list[PartitionLog]]:
    """A fetcher following the ``partitions`` empty logs of a new topic.

    The topic is created as any is (a log without one is a stray the broker deletes); the broker
    leads it, which the fetcher, working on the logs alone, does not see.
    """
    await create(broker, topic, partitions)
    node = broker.state.node
    fetcher = ReplicaFetcher(node, FollowerAppends(node), LEADER_ID)
    logs = [node.logs.get(topic, p) for p in range(partitions)]
    assert all(log is not None for log in logs)
    for p in range(partitions):
        fetcher.add((topic, p), EPOCH)
    return fetcher, [log for log in logs if log is not None]


def truncated(fetcher: ReplicaFetcher) -> None:
    """As a leader's OffsetForLeaderEpoch answer agreeing with every log leaves them: ready to fetch."""
    for tp in list(fetcher._untruncated):
        fetcher._truncated(tp)


def next_round(fetcher: ReplicaFetcher) -> SessionFetch[tuple[int, int, int]] | None:
    """The next fetch, answered by a leader keeping the session."""
    fetch = fetcher._next_fetch()
    if fetch is not None:
        assert fetcher._session.answered(fetch, ErrorCode.none, SESSION_ID)
    return fetch


def append(fetcher: ReplicaFetcher, tp: tuple[str, int], log: PartitionLog, count: int) -> None:
    """Records from the leader, as an answer to a fetch brings them."""
    batch = build_record_batch(
        [(None, b"v")] * count, base_timestamp_ms=NOW_MS, base_offset=log.log_end_offset, partition_leader_epoch=EPOCH
    )
    fetcher.followers.append(tp, log, batch, log.log_end_offset + count)


def test_a_fetch_at_rest_looks_at_no_partition_and_a_move_at_that_one_alone(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        fetcher, logs = await following(broker, "orders", 1000)
        truncated(fetcher)
        full = next_round(fetcher)
        assert full is not None and full.epoch == 0 and len(full.send) == 1000
        assert full.send[("orders", 7)] == (0, 0, EPOCH)
        looks = fetcher.looks

        at_rest = next_round(fetcher)
        assert at_rest is not None and (at_rest.epoch, at_rest.send, at_rest.forget) == (1, {}, ())
        assert fetcher.looks == looks, "a fetch at rest looked at partitions"

        append(fetcher, ("orders", 7), logs[7], 5)
        moved = next_round(fetcher)
        assert moved is not None and (moved.send, moved.forget) == ({("orders", 7): (5, 0, EPOCH)}, ())
        assert fetcher.looks == looks + 1, "a move of one partition looked at others"

    run(tmp_path, scenario)


def test_a_paused_partition_is_forgotten_and_asked_again_once_its_pause_ends(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        fetcher, _ = await following(broker, "orders", 3)
        truncated(fetcher)
        next_round(fetcher)
        fetcher._pause(("orders", 1), ErrorCode.not_leader_or_follower)
        paused = next_round(fetcher)
        assert paused is not None and (paused.send, paused.forget) == ({}, (("orders", 1),))
        await asyncio.sleep(LEADER_CATCH_UP_S)  # the pause itself is the time under test
        resumed = next_round(fetcher)
        assert resumed is not None and (resumed.send, resumed.forget) == ({("orders", 1): (0, 0, EPOCH)}, ())

    run(tmp_path, scenario)


def test_a_log_deleted_and_created_again_is_asked_from_the_new_log(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        fetcher, logs = await following(broker, "orders", 2)
        truncated(fetcher)
        append(fetcher, ("orders", 0), logs[0], 4)
        next_round(fetcher)
        node = broker.state.node
        assert node.logs.delete_topic_partition("orders", 0)
        gone = next_round(fetcher)
        assert gone is not None and (gone.send, gone.forget) == ({}, (("orders", 0),))
        waiting = next_round(fetcher)  # still no log: not asked, and nothing else changed
        assert waiting is not None and (waiting.send, waiting.forget) == ({}, ())
        node.logs.create("orders", 0, None, LogConfig(), NOW_MS)
        back = next_round(fetcher)
        assert back is not None and (back.send, back.forget) == ({("orders", 0): (0, 0, EPOCH)}, ())

    run(tmp_path, scenario)


def test_a_removed_partition_is_forgotten_and_its_log_keeps_no_callback(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        fetcher, logs = await following(broker, "orders", 2)
        truncated(fetcher)
        next_round(fetcher)
        assert logs[1].next_move_callbacks == 1
        fetcher.remove(("orders", 1))
        assert logs[1].next_move_callbacks == 0
        dropped = next_round(fetcher)
        assert dropped is not None and (dropped.send, dropped.forget) == ({}, (("orders", 1),))
        fetcher.remove(("orders", 0))
        assert next_round(fetcher) is None, "a fetcher following nothing fetched"

    run(tmp_path, scenario)
