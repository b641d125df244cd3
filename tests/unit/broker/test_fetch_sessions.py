"""Incremental fetch sessions (KIP-227) through the broker's Fetch handler, on real logs.

Each test opens a session with a full fetch (epoch 0) and goes on with incremental ones, as the Java
client's FetchSessionHandler does, and checks which partitions the broker answers and in what order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from kio.schema.errors import ErrorCode

from barnabas.broker.fetch_sessions import CachedPartition, FetchSession, FetchSessionCache
from barnabas.broker.handlers import fetch as fetch_handler
from barnabas.protocol import FetchPartitionResult
from tests.support.requests import FETCH, PRODUCE, batch, fetch_request, produce_request, timeout_ms
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker
from tests.unit.broker.test_handlers import create

T = TypeVar("T")
TOPIC = "sessions"
DELETE_RECORDS = 21


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]], **settings: str) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path, settings) as broker:
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


async def fetch(
    broker: InMemoryBroker,
    offsets: dict[int, int],
    session_id: int = 0,
    epoch: int = -1,
    forgotten: tuple[int, ...] = (),
) -> Any:
    """A Fetch v12 of TOPIC's partitions at ``offsets``; the decoded answer."""
    request = fetch_request(
        [(TOPIC, p, offset, 1 << 20) for p, offset in offsets.items()],
        session_id=session_id,
        session_epoch=epoch,
        forgotten=tuple((TOPIC, p) for p in forgotten),
    )
    return await broker.call(FETCH, 12, request)


def listed(response: Any) -> list[tuple[int, bool]]:
    """(partition, has records) for each partition the answer lists, in its order."""
    return [(int(p.partition_index), bool(p.records)) for topic in response.responses for p in topic.partitions]


async def produce(broker: InMemoryBroker, partition: int, *values: bytes) -> None:
    response = await broker.call(PRODUCE, 9, produce_request(TOPIC, partition, batch(*values), -1))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_an_incremental_fetch_is_answered_only_what_changed(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, TOPIC, 2)
        await produce(broker, 0, b"a")
        full = await fetch(broker, {0: 0, 1: 0}, epoch=0)
        session = int(full.session_id)
        assert session != 0 and full.error_code == ErrorCode.none
        assert listed(full) == [(0, True), (1, False)]
        # The client moves partition 0 on; nothing else changed, so nothing is listed.
        quiet = await fetch(broker, {0: 1}, session, 1)
        assert (int(quiet.session_id), listed(quiet)) == (session, [])
        await produce(broker, 1, b"b", b"c")
        moved = await fetch(broker, {}, session, 2)
        assert listed(moved) == [(1, True)]
        # Partition 1's fetch offset, still 0 in the session, is what the broker read from.
        assert int(moved.responses[0].partitions[0].high_watermark) == 2
        assert listed(await fetch(broker, {1: 2}, session, 3)) == []
        assert len(broker.state.node.fetch_sessions) == 1

    run(tmp_path, scenario)


def test_a_partition_that_returned_records_goes_to_the_end(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> list[tuple[int, bool]]:
        await create(broker, TOPIC, 2)
        session = int((await fetch(broker, {0: 0, 1: 0}, epoch=0)).session_id)
        await produce(broker, 0, b"a")
        assert listed(await fetch(broker, {}, session, 1)) == [(0, True)]
        await produce(broker, 0, b"b")
        await produce(broker, 1, b"c")
        return listed(await fetch(broker, {0: 1}, session, 2))

    assert run(tmp_path, scenario) == [(1, True), (0, True)]


def test_a_fetch_reads_only_the_partitions_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition read at its end is not read again while its leader and offsets stay as they were."""
    read: list[int] = []
    original = fetch_handler._Reading._read

    def counted(reading: Any, topic: str, partition: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(partition.partition)
        return original(reading, topic, partition, *args, **kwargs)

    monkeypatch.setattr(fetch_handler._Reading, "_read", counted)

    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, TOPIC, 3)
        session = int((await fetch(broker, {0: 0, 1: 0, 2: 0}, epoch=0)).session_id)
        assert sorted(read) == [0, 1, 2]
        read.clear()
        assert listed(await fetch(broker, {}, session, 1)) == []
        assert read == []
        await produce(broker, 1, b"a")
        assert listed(await fetch(broker, {}, session, 2)) == [(1, True)]
        assert read == [1]
        read.clear()
        # Named anew, a partition is read whatever its mark says (partition 2's still holds).
        assert listed(await fetch(broker, {1: 1, 2: 0}, session, 3)) == []
        assert sorted(read) == [1, 2]
        read.clear()
        assert listed(await fetch(broker, {}, session, 4)) == []
        assert read == []

    run(tmp_path, scenario)


def test_a_fetch_at_rest_walks_no_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose partitions are all quiet reads none and looks at none: its ready set is empty."""
    walked: list[int] = []
    original = FetchSession.to_read

    def counted(session: Any) -> Any:
        found = original(session)
        walked.append(len(found[0]))
        return found

    monkeypatch.setattr(FetchSession, "to_read", counted)

    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, TOPIC, 50)
        session = int((await fetch(broker, dict.fromkeys(range(50), 0), epoch=0)).session_id)
        assert listed(await fetch(broker, {}, session, 1)) == []
        await produce(broker, 7, b"a")
        assert listed(await fetch(broker, {}, session, 2)) == [(7, True)]
        assert listed(await fetch(broker, {7: 1}, session, 3)) == []
        assert listed(await fetch(broker, {}, session, 4)) == []

    run(tmp_path, scenario)
    assert walked == [0, 1, 1, 0]


def test_a_waiting_fetch_of_quiet_partitions_is_woken_by_an_append(tmp_path: Path) -> None:
    """The long poll of a session at rest ends at the first append to one of its partitions, not at max wait."""

    async def scenario(broker: InMemoryBroker) -> tuple[list[tuple[int, bool]], float]:
        await create(broker, TOPIC, 3)
        session = int((await fetch(broker, {0: 0, 1: 0, 2: 0}, epoch=0)).session_id)
        request = fetch_request([], max_wait_ms=20_000, min_bytes=1, session_id=session, session_epoch=1)
        started = asyncio.get_running_loop().time()
        waiting = asyncio.ensure_future(broker.call(FETCH, 12, request))
        held = broker.state.node.fetch_sessions.get(session)
        assert held is not None
        while held.on_ready is None:  # until the fetch has read its (empty) ready set and waits
            await asyncio.sleep(0)
        assert not waiting.done()
        await produce(broker, 2, b"a")
        answer = await asyncio.wait_for(waiting, 10)
        return listed(answer), asyncio.get_running_loop().time() - started

    answered, took = run(tmp_path, scenario)
    assert answered == [(2, True)]
    assert took < 10, f"answered after {took:.1f} s"


def test_a_session_that_ends_leaves_no_callback_on_its_quiet_logs(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> tuple[int, int]:
        await create(broker, TOPIC, 2)
        session = int((await fetch(broker, {0: 0, 1: 0}, epoch=0)).session_id)
        logs = [broker.state.node.logs.get(TOPIC, p) for p in (0, 1)]
        waiting = sum(log.next_move_callbacks for log in logs if log is not None)
        await fetch(broker, {0: 0, 1: 0}, session, -1)  # a final fetch closes the session
        return waiting, sum(log.next_move_callbacks for log in logs if log is not None)

    assert run(tmp_path, scenario) == (2, 0)


def test_a_quiet_partition_whose_log_start_moves_is_answered(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, TOPIC, 1)
        await produce(broker, 0, b"a", b"b")
        session = int((await fetch(broker, {0: 2}, epoch=0)).session_id)
        assert listed(await fetch(broker, {}, session, 1)) == []
        request = DeleteRecordsRequest(
            topics=(DeleteRecordsTopic(name=TOPIC, partitions=(DeleteRecordsPartition(partition_index=0, offset=1),)),),
            timeout=timeout_ms(5000),
        )
        (deleted,) = (await broker.call(DELETE_RECORDS, 2, request)).topics
        assert deleted.partitions[0].error_code == ErrorCode.none
        return await fetch(broker, {}, session, 2)

    moved = run(tmp_path, scenario)
    assert listed(moved) == [(0, False)]
    assert int(moved.responses[0].partitions[0].log_start_offset) == 1


def test_session_errors_and_closing(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, TOPIC, 1)
        session = int((await fetch(broker, {0: 0}, epoch=0)).session_id)
        wrong_epoch = await fetch(broker, {}, session, 5)
        assert (wrong_epoch.error_code, int(wrong_epoch.session_id), listed(wrong_epoch)) == (
            ErrorCode.invalid_fetch_session_epoch, 0, []
        )  # fmt: skip
        unknown = await fetch(broker, {}, session + 1, 1)
        assert (unknown.error_code, int(unknown.session_id)) == (ErrorCode.fetch_session_id_not_found, 0)
        # The session survived both: its next epoch is still 1. Epoch -1 closes it, answered without one.
        assert (await fetch(broker, {}, session, 1)).error_code == ErrorCode.none
        closing = await fetch(broker, {0: 0}, session, -1)
        assert (int(closing.session_id), listed(closing)) == (0, [(0, False)])
        assert (await fetch(broker, {}, session, 2)).error_code == ErrorCode.fetch_session_id_not_found
        assert len(broker.state.node.fetch_sessions) == 0

    run(tmp_path, scenario)


def test_forgetting_every_partition_closes_the_session(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        await create(broker, TOPIC, 2)
        session = int((await fetch(broker, {0: 0, 1: 0}, epoch=0)).session_id)
        await produce(broker, 0, b"a")
        await produce(broker, 1, b"b")
        kept = await fetch(broker, {}, session, 1, forgotten=(0,))
        assert listed(kept) == [(1, True)]
        emptied = await fetch(broker, {}, session, 2, forgotten=(1,))
        assert (emptied.error_code, int(emptied.session_id), listed(emptied)) == (ErrorCode.none, 0, [])
        assert (await fetch(broker, {}, session, 3)).error_code == ErrorCode.fetch_session_id_not_found

    run(tmp_path, scenario)


def test_no_session_without_slots(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> Any:
        await create(broker, TOPIC, 1)
        return await fetch(broker, {0: 0}, epoch=0)

    full = run(tmp_path, scenario, **{"max.incremental.fetch.session.cache.slots": "0"})
    assert (int(full.session_id), listed(full)) == (0, [(0, False)])


class _Part:
    def __init__(self, partition: int) -> None:
        self.partition = partition


def _open(cache: FetchSessionCache[_Part], *, privileged: bool, now_ms: int, size: int = 1) -> int:
    """A full fetch of ``size`` partitions asking for a session; the id answered (0: none)."""
    wanted = [("t", _Part(i)) for i in range(size)]
    context = cache.open(0, 0, wanted, (), privileged=privileged, now_ms=now_ms)
    answers = [(topic, FetchPartitionResult(p.partition, 0, 0, 0, 0, ())) for topic, p in context.partitions]
    return cache.answer(context, answers, now_ms).session_id


def test_a_full_cache_evicts_by_kafkas_rules() -> None:
    cache: FetchSessionCache[_Part] = FetchSessionCache(max_slots=1, eviction_ms=1_000)
    consumer = _open(cache, privileged=False, now_ms=0, size=3)
    assert consumer != 0
    # A fresh consumer session is evictable by a follower only, and by nobody smaller.
    assert _open(cache, privileged=False, now_ms=10, size=5) == 0
    follower = _open(cache, privileged=True, now_ms=20, size=1)
    assert follower != 0 and cache.get(consumer) is None and cache.evictions == 1
    # Once older than the eviction time (and in use), a follower's session gives way to a larger one.
    assert _open(cache, privileged=False, now_ms=500, size=9) == 0
    assert cache.open(follower, 1, [], (), privileged=True, now_ms=1_050).error == ErrorCode.none
    assert _open(cache, privileged=True, now_ms=1_100, size=1) == 0
    bigger = _open(cache, privileged=True, now_ms=1_100, size=2)
    assert bigger != 0 and cache.get(follower) is None
    # An idle session of any kind gives way to anything.
    assert _open(cache, privileged=False, now_ms=2_200, size=1) != 0 and cache.evictions == 3


def test_an_answer_after_another_request_used_the_session_is_refused() -> None:
    cache: FetchSessionCache[_Part] = FetchSessionCache(max_slots=10, eviction_ms=1_000)
    session = _open(cache, privileged=False, now_ms=0)
    first = cache.open(session, 1, [], (), privileged=False, now_ms=1)
    second = cache.open(session, 2, [], (), privileged=False, now_ms=2)  # the client retried past it
    assert second.error == ErrorCode.none
    assert cache.answer(first, [], 3).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.answer(second, [], 3).error == ErrorCode.none


def test_ready_partitions_come_in_answer_order_however_many_are_ready() -> None:
    """Few ready: sorted by position; most ready: the session's dict walked. Both are the answer order."""
    session: FetchSession[_Part] = FetchSession(1, True, 0, 0, 1)
    for p in range(8):
        session.partitions[("t", p)] = part = CachedPartition(_Part(p))
        session.place_last(part)
    for p in (2, 5):  # they returned records: to the end, in the dict and by position
        session.partitions[("t", p)] = session.partitions.pop(("t", p))
        session.place_last(session.partitions[("t", p)])
    session.ready = {("t", 5), ("t", 1), ("t", 2)}
    few = [request.partition for _, request in session.to_read()[0]]
    session.ready = {("t", p) for p in range(8)} - {("t", 3)}
    most = [request.partition for _, request in session.to_read()[0]]
    assert few == [1, 2, 5]
    assert most == [0, 1, 4, 6, 7, 2, 5]
