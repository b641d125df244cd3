"""The linearizability checker: hand-written good and bad histories, generated ones, and real SQLite runs."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from barnabas.coordination import (
    KeyExistsError,
    NoSuchKeyError,
    Storage,
    UnavailableError,
    VersionConflictError,
    Versioned,
    open_metastore,
    open_storage,
)
from barnabas.coordination.testing.faults import FaultyMetastore
from barnabas.coordination.testing.linearizability import (
    UNKNOWN,
    Call,
    Failed,
    History,
    KeyOp,
    OpKind,
    Outcome,
    RecordingStorage,
    Result,
    State,
    check,
    run_concurrent_history,
    step,
)

EXISTS = Failed("KeyExistsError")
ABSENT = Failed("NoSuchKeyError")
CONFLICT = Failed("VersionConflictError")
FENCED = Failed("FencedError")


def counter() -> Callable[[], int]:
    """A clock that ticks once per reading, so every recorded instant is distinct."""
    now = 0

    def tick() -> int:
        nonlocal now
        now += 1
        return now

    return tick


def new_history() -> History:
    return History(clock=counter())


def done(history: History, client: int, op: KeyOp, result: Result) -> None:
    """A call that returned before the next one started."""
    history.respond(history.invoke(client, op), result)


# -- hand-written histories -----------------------------------------------------------------------


def test_sequential_history_passes() -> None:
    h = new_history()
    done(h, 0, KeyOp.get("k"), None)
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 1, KeyOp.put_if_absent("k", b"x"), EXISTS)
    done(h, 1, KeyOp.get("k"), Versioned(b"a", 1))
    done(h, 0, KeyOp.compare_and_set("k", b"b", 1), 2)
    done(h, 1, KeyOp.compare_and_set("k", b"y", 1), CONFLICT)
    done(h, 1, KeyOp.update_if_exists("k", b"c"), 3)
    done(h, 0, KeyOp.delete("k", 2), CONFLICT)
    done(h, 0, KeyOp.delete("k", 3), True)
    done(h, 1, KeyOp.delete("k"), False)
    done(h, 1, KeyOp.update_if_exists("k", b"z"), ABSENT)
    done(h, 1, KeyOp.compare_and_set("k", b"z", 3), ABSENT)
    done(h, 0, KeyOp.compare_and_set("k", b"d", 0), 1)  # versions start again at 1
    done(h, 0, KeyOp.fenced_put("k", b"e", 1), 2)
    done(h, 1, KeyOp.fenced_put("k", b"w", 1), FENCED)  # says nothing about the key
    done(h, 1, KeyOp.get("k"), Versioned(b"e", 2))
    result = check(h)
    assert result.ok, result.explanation


def test_concurrent_history_passes_in_any_consistent_order() -> None:
    h = new_history()
    # Two creates race; a read overlapping both sees the key absent; each client then reads.
    a = h.invoke(0, KeyOp.put_if_absent("k", b"a"))
    b = h.invoke(1, KeyOp.put_if_absent("k", b"b"))
    r = h.invoke(2, KeyOp.get("k"))
    h.respond(b, 1)  # b won although a was invoked first
    h.respond(r, None)
    h.respond(a, EXISTS)
    done(h, 0, KeyOp.get("k"), Versioned(b"b", 1))
    # A write and two reads overlap: one read sees the old value, one the new.
    w = h.invoke(0, KeyOp.update_if_exists("k", b"c"))
    r1 = h.invoke(1, KeyOp.get("k"))
    r2 = h.invoke(2, KeyOp.get("k"))
    h.respond(r2, Versioned(b"c", 2))
    h.respond(r1, Versioned(b"b", 1))
    h.respond(w, 2)
    # A delete and a CAS at the version before it race; the CAS lost.
    d = h.invoke(0, KeyOp.delete("k"))
    c = h.invoke(1, KeyOp.compare_and_set("k", b"x", 2))
    h.respond(c, ABSENT)
    h.respond(d, True)
    done(h, 2, KeyOp.get("other"), None)
    result = check(h)
    assert result.ok, result.explanation


def test_same_calls_in_another_order_leave_another_state() -> None:
    """Create a, delete, create b — or create b, delete, create a: the search must try both orders."""
    h = new_history()
    a = h.invoke(0, KeyOp.put_if_absent("k", b"a"))
    d = h.invoke(1, KeyOp.delete("k"))
    b = h.invoke(2, KeyOp.put_if_absent("k", b"b"))
    h.respond(a, 1)
    h.respond(d, True)
    h.respond(b, 1)
    done(h, 0, KeyOp.get("k"), Versioned(b"a", 1))
    result = check(h)
    assert result.ok, result.explanation


def assert_rejected(h: History, key: str = "k") -> str:
    result = check(h)
    assert not result.ok
    assert result.key == key
    assert repr(key) in result.explanation
    return result.explanation


def test_stale_read_after_completed_write_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 0, KeyOp.update_if_exists("k", b"b"), 2)
    done(h, 1, KeyOp.get("k"), Versioned(b"a", 1))
    explanation = assert_rejected(h)
    assert "longest linearizable prefix has 2 of 3 calls" in explanation
    assert "get() -> (b'a', version 1)" in explanation


def test_two_successful_creates_fail_even_when_concurrent() -> None:
    h = new_history()
    a = h.invoke(0, KeyOp.put_if_absent("k", b"a"))
    b = h.invoke(1, KeyOp.put_if_absent("k", b"b"))
    h.respond(a, 1)
    h.respond(b, 1)
    assert_rejected(h)


def test_cas_against_a_version_that_never_existed_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 1, KeyOp.compare_and_set("k", b"b", 5), 6)
    assert_rejected(h)


def test_skipped_version_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 0, KeyOp.update_if_exists("k", b"b"), 3)
    assert_rejected(h)


def test_version_not_restarting_after_delete_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 0, KeyOp.delete("k"), True)
    done(h, 0, KeyOp.put_if_absent("k", b"b"), 2)
    assert_rejected(h)


def test_lost_update_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    x = h.invoke(1, KeyOp.compare_and_set("k", b"x", 1))
    y = h.invoke(2, KeyOp.compare_and_set("k", b"y", 1))
    h.respond(x, 2)
    h.respond(y, 2)
    assert_rejected(h)


def test_failure_the_state_does_not_explain_fails() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    done(h, 1, KeyOp.compare_and_set("k", b"b", 1), CONFLICT)  # it was at version 1
    assert_rejected(h)


def test_only_the_bad_key_is_named() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("good", b"a"), 1)
    done(h, 0, KeyOp.put_if_absent("bad", b"a"), 1)
    done(h, 1, KeyOp.get("good"), Versioned(b"a", 1))
    done(h, 1, KeyOp.get("bad"), None)
    assert_rejected(h, "bad")


def test_unknown_write_may_or_may_not_have_applied() -> None:
    for seen in (None, Versioned(b"a", 1)):
        h = new_history()
        h.unknown(h.invoke(0, KeyOp.put_if_absent("k", b"a")))
        done(h, 1, KeyOp.get("k"), seen)
        result = check(h)
        assert result.ok, result.explanation


def test_unknown_write_can_apply_long_after_its_call_ended() -> None:
    h = new_history()
    h.unknown(h.invoke(0, KeyOp.put_if_absent("k", b"a")))
    done(h, 1, KeyOp.get("k"), None)
    done(h, 1, KeyOp.get("k"), Versioned(b"a", 1))
    result = check(h)
    assert result.ok, result.explanation


def test_unknown_write_once_seen_cannot_unhappen() -> None:
    h = new_history()
    h.unknown(h.invoke(0, KeyOp.put_if_absent("k", b"a")))
    done(h, 1, KeyOp.get("k"), Versioned(b"a", 1))
    done(h, 1, KeyOp.get("k"), None)
    assert_rejected(h)


def test_unknown_write_applies_as_its_check_says() -> None:
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    h.unknown(h.invoke(0, KeyOp.compare_and_set("k", b"b", 1)))
    done(h, 1, KeyOp.get("k"), Versioned(b"b", 2))
    assert check(h).ok
    h = new_history()
    done(h, 0, KeyOp.put_if_absent("k", b"a"), 1)
    h.unknown(h.invoke(0, KeyOp.compare_and_set("k", b"b", 7)))
    done(h, 1, KeyOp.get("k"), Versioned(b"b", 8))  # a CAS at 7 could never have applied
    assert_rejected(h)


def test_unanswered_calls_count_as_unknown_and_unknown_reads_are_dropped() -> None:
    h = new_history()
    h.invoke(0, KeyOp.update_if_exists("k", b"never answered"))
    h.unknown(h.invoke(1, KeyOp.get("k")))
    done(h, 2, KeyOp.get("k"), None)
    result = check(h)
    assert result.ok, result.explanation


def test_a_call_ends_once() -> None:
    h = new_history()
    token = h.invoke(0, KeyOp.get("k"))
    h.respond(token, None)
    with pytest.raises(ValueError, match="already ended"):
        h.unknown(token)


def test_model_steps() -> None:
    put = KeyOp.put_if_absent("k", b"v")
    assert step(None, put, 1) == (True, (b"v", 1))
    assert step((b"x", 4), put, EXISTS) == (True, (b"x", 4))
    assert not step(None, put, EXISTS)[0]
    assert not step(None, put, True)[0]  # a bool is not a version
    assert step((b"x", 4), KeyOp.delete("k", 4), True) == (True, None)
    assert step(None, KeyOp.delete("k", 4), CONFLICT)[0]  # absent at the commit, re-created before the re-read
    assert not step(None, KeyOp.delete("k"), CONFLICT)[0]  # an unconditional delete never conflicts
    assert step((b"x", 4), KeyOp.delete("k"), UNKNOWN) == (True, None)
    assert step((b"x", 4), KeyOp.update_if_exists("k", b"y"), UNKNOWN) == (True, (b"y", 5))
    assert not step(None, KeyOp.get("k"), CONFLICT)[0]


# -- generated histories --------------------------------------------------------------------------

KINDS = [OpKind.GET, OpKind.PUT_IF_ABSENT, OpKind.UPDATE_IF_EXISTS, OpKind.COMPARE_AND_SET, OpKind.DELETE]
ANSWERED, LOST_APPLIED, LOST_NOT_APPLIED = "answered", "lost, applied", "lost, not applied"


@dataclass(frozen=True)
class Planned:
    key: int
    kind: OpKind
    expected: int  # -1: the version this client last saw
    ending: str = ANSWERED


@dataclass
class Client:
    plan: Sequence[Planned]
    done: int = 0
    phase: int = 0  # 0 idle, 1 invoked, 2 applied
    token: int = -1
    op: KeyOp | None = None
    result: Result = None
    seen: dict[str, int] = field(default_factory=dict)


def apply(register: dict[str, State], op: KeyOp) -> Result:
    """The Storage call on a register that does each call atomically (trivially linearizable)."""
    state = register.get(op.key)
    version = 0 if state is None else state[1]
    if op.kind is OpKind.GET:
        return None if state is None else Versioned(state[0], state[1])
    if op.kind is OpKind.DELETE:
        if state is None:
            return False
        if op.expected_version is not None and op.expected_version != version:
            return CONFLICT
        register[op.key] = None
        return True
    assert op.value is not None
    expected = {OpKind.PUT_IF_ABSENT: 0, OpKind.UPDATE_IF_EXISTS: None}.get(op.kind, op.expected_version)
    holds = version == 0 if expected == 0 else version > 0 if expected is None else version == expected
    if not holds:
        if op.kind is OpKind.PUT_IF_ABSENT:
            return EXISTS
        return ABSENT if version == 0 and expected != 0 else CONFLICT
    register[op.key] = (op.value, version + 1)
    return version + 1


def simulate(plans: Sequence[Sequence[Planned]], schedule: Sequence[int], keys: int) -> History:
    """Run every client's plan on an atomic register, advancing the client ``schedule`` names."""
    history = new_history()
    register: dict[str, State] = {}
    clients = [Client(plan) for plan in plans]
    names = [f"k{j}" for j in range(keys)]
    order = list(schedule) + [i for i, c in enumerate(clients) for _ in range(3 * len(c.plan))]
    for index in order:
        client = clients[index % len(clients)]
        if client.done == len(client.plan):
            continue
        planned = client.plan[client.done]
        if client.phase == 0:
            key = names[planned.key % keys]
            value = f"{index}.{client.done}".encode()
            seen = client.seen.get(key, 0)
            expected = seen if planned.expected < 0 else planned.expected
            client.op = {
                OpKind.GET: KeyOp.get(key),
                OpKind.PUT_IF_ABSENT: KeyOp.put_if_absent(key, value),
                OpKind.UPDATE_IF_EXISTS: KeyOp.update_if_exists(key, value),
                OpKind.COMPARE_AND_SET: KeyOp.compare_and_set(key, value, expected),
                OpKind.DELETE: KeyOp.delete(key, expected or None),
            }[planned.kind]
            client.token = history.invoke(index, client.op)
        elif client.phase == 1:
            assert client.op is not None
            if planned.ending != LOST_NOT_APPLIED:
                client.result = apply(register, client.op)
        else:
            assert client.op is not None
            if planned.ending == ANSWERED:
                history.respond(client.token, client.result)
                if isinstance(client.result, Versioned):
                    client.seen[client.op.key] = client.result.version
                elif isinstance(client.result, int) and not isinstance(client.result, bool):
                    client.seen[client.op.key] = client.result
            else:
                history.unknown(client.token)
            client.done += 1
        client.phase = (client.phase + 1) % 3
    return history


planned_ops = st.builds(
    Planned,
    key=st.integers(0, 2),
    kind=st.sampled_from(KINDS),
    expected=st.integers(-1, 3),
    ending=st.sampled_from([ANSWERED] * 6 + [LOST_APPLIED, LOST_NOT_APPLIED]),
)


@st.composite
def histories(draw: st.DrawFn, max_clients: int = 5, max_ops: int = 12, max_keys: int = 3) -> History:
    plans = draw(st.lists(st.lists(planned_ops, max_size=max_ops), min_size=1, max_size=max_clients))
    schedule = draw(st.lists(st.integers(0, len(plans) - 1), max_size=3 * sum(map(len, plans))))
    return simulate(plans, schedule, draw(st.integers(1, max_keys)))


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(histories())
def test_histories_of_an_atomic_register_are_accepted(history: History) -> None:
    result = check(history)
    assert result.ok, result.explanation


@PROPERTY
@given(histories(), st.data())
def test_a_read_of_a_value_never_written_is_rejected(history: History, data: st.DataObject) -> None:
    reads = [
        call for call in history.calls if call.op.kind is OpKind.GET and call.finished and call.result is not UNKNOWN
    ]
    assume(reads)
    read = data.draw(st.sampled_from(reads))
    version = read.result.version if isinstance(read.result, Versioned) else 1
    read.result = Versioned(b"never written", version)
    result = check(history)
    assert not result.ok
    assert result.key == read.op.key


def brute_force(calls: Sequence[Call]) -> bool:
    """Linearizable by trying every order real time allows (all keys at once, remembering dead ends)."""
    infinity = float("inf")

    def answered(call: Call) -> bool:
        return call.finished and call.result is not UNKNOWN

    def returned(call: Call) -> float:
        return call.returned_ns if answered(call) and call.returned_ns is not None else infinity

    dead_ends: set[tuple[frozenset[int], frozenset[tuple[str, State]]]] = set()

    def search(remaining: frozenset[int], states: dict[str, State]) -> bool:
        if all(not answered(calls[i]) for i in remaining):
            return True  # calls that never answered can all go last
        memo = (remaining, frozenset(states.items()))
        if memo in dead_ends:
            return False
        dead_ends.add(memo)
        first_return = min(returned(calls[i]) for i in remaining)
        for i in remaining:
            call = calls[i]
            if call.invoked_ns > first_return:
                continue
            outcome: Outcome = call.result if answered(call) else UNKNOWN
            legal, after = step(states.get(call.op.key), call.op, outcome)
            if legal and search(remaining - {i}, {**states, call.op.key: after}):
                return True
        return False

    return search(frozenset(range(len(calls))), {})


def alternatives(call: Call, values: Sequence[bytes]) -> list[Result]:
    if call.op.kind is OpKind.GET:
        return [None, *(Versioned(value, version) for value in values for version in (1, 2, 3))]
    if call.op.kind is OpKind.DELETE:
        return [True, False, CONFLICT]
    return [1, 2, 3, 4, EXISTS, ABSENT, CONFLICT]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_clients=3, max_ops=3, max_keys=2), st.data())
def test_checker_agrees_with_brute_force_when_one_answer_changes(history: History, data: st.DataObject) -> None:
    """Corrupting an answer is caught exactly when no order explains it (not every change is visible)."""
    calls = list(history.calls)
    assert check(history).ok and brute_force(calls)
    answered = [call for call in calls if call.finished and call.result is not UNKNOWN]
    assume(answered)
    call = data.draw(st.sampled_from(answered))
    values = sorted({c.op.value for c in calls if c.op.value is not None} | {b"other"})
    call.result = data.draw(st.sampled_from(alternatives(call, values)))
    assert check(history).ok == brute_force(calls)


def random_history(clients: int, ops: int, keys: int, lost: float, seed: int) -> History:
    rng = random.Random(seed)
    endings = [ANSWERED, LOST_APPLIED, LOST_NOT_APPLIED]
    plans = [
        [
            Planned(
                rng.randrange(keys),
                rng.choice(KINDS),
                -1 if rng.random() < 0.8 else rng.randrange(4),
                endings[0] if rng.random() >= lost else rng.choice(endings[1:]),
            )
            for _ in range(ops)
        ]
        for _ in range(clients)
    ]
    schedule = [rng.randrange(clients) for _ in range(3 * clients * ops)]
    return simulate(plans, schedule, keys)


@pytest.mark.parametrize("lost", [0.0, 0.01])
def test_eight_clients_by_two_hundred_calls_check_in_under_a_second(lost: float) -> None:
    history = random_history(clients=8, ops=200, keys=3, lost=lost, seed=7)
    start = time.perf_counter()
    result = check(history)
    elapsed = time.perf_counter() - start
    assert result.ok, result.explanation
    assert elapsed < 1.0, f"{len(history)} calls took {elapsed:.3f} s"
    reads = [c for c in history.calls if c.op.kind is OpKind.GET and isinstance(c.result, Versioned)]
    reads[len(reads) // 2].result = Versioned(b"corrupt", 1)
    start = time.perf_counter()
    assert not check(history).ok
    assert time.perf_counter() - start < 1.0


# -- against SQLite -------------------------------------------------------------------------------


def test_recording_storage_records_results_and_errors(tmp_path: Path) -> None:
    async def scenario() -> History:
        history = History()
        storage = RecordingStorage(await open_storage(f"sqlite://{tmp_path / 'c.db'}"), history, "me")
        try:
            assert await storage.put_if_absent("k", b"a") == 1
            with pytest.raises(KeyExistsError):
                await storage.put_if_absent("k", b"b")
            with pytest.raises(NoSuchKeyError):
                await storage.compare_and_set("nope", b"b", 3)
            with pytest.raises(VersionConflictError):
                await storage.compare_and_set("k", b"b", 3)
            assert await storage.update_if_exists("k", b"c") == 2
            assert await storage.get("k") == Versioned(b"c", 2)
            assert await storage.delete("k", 2)
            assert not await storage.delete("k")
        finally:
            await storage.close()
        return history

    history = asyncio.run(scenario())
    assert [(call.client_id, call.op.kind.value, call.result) for call in history.calls] == [
        ("me", "put_if_absent", 1),
        ("me", "put_if_absent", EXISTS),
        ("me", "compare_and_set", ABSENT),
        ("me", "compare_and_set", CONFLICT),
        ("me", "update_if_exists", 2),
        ("me", "get", Versioned(b"c", 2)),
        ("me", "delete", True),
        ("me", "delete", False),
    ]
    assert all(call.returned_ns is not None and call.returned_ns >= call.invoked_ns for call in history.calls)
    assert check(history).ok


def test_unavailable_writes_are_recorded_as_unknown(tmp_path: Path) -> None:
    async def scenario() -> History:
        history = History()
        faulty = FaultyMetastore(await open_metastore(f"sqlite://{tmp_path / 'c.db'}"))
        storage = RecordingStorage(Storage(faulty), history, 0)
        try:
            faulty.fail(["commit"], count=1, applied=True)
            with pytest.raises(UnavailableError):
                await storage.put_if_absent("k", b"a")  # applied; the answer was lost
            faulty.fail(["commit"], count=1)
            with pytest.raises(UnavailableError):
                await storage.update_if_exists("k", b"b")  # never applied
            assert await storage.get("k") == Versioned(b"a", 1)
        finally:
            await storage.close()
        return history

    history = asyncio.run(scenario())
    assert [call.result for call in history.calls[:2]] == [UNKNOWN, UNKNOWN]
    assert all(call.finished and call.returned_ns is None for call in history.calls[:2])
    assert check(history).ok


def test_concurrent_sqlite_clients_are_linearizable(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'c.db'}"
    history = asyncio.run(run_concurrent_history(lambda: open_storage(url), clients=8, ops_per_client=150, seed=3))
    assert len(history) == 8 * 150
    assert len(history.keys()) == 3
    assert len({call.client_id for call in history.calls}) == 8
    writes = [c for c in history.calls if c.op.kind is not OpKind.GET and c.result not in (UNKNOWN, False)]
    assert sum(not isinstance(c.result, Failed) for c in writes) > len(writes) // 2  # most writes succeed
    start = time.perf_counter()
    result = check(history)
    assert result.ok, result.explanation
    assert time.perf_counter() - start < 1.0


def test_concurrent_sqlite_clients_with_lost_answers_are_linearizable(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'c.db'}"

    async def open_faulty() -> Storage:
        faulty = FaultyMetastore(await open_metastore(url))
        faulty.fail(["commit"], count=4, applied=True)  # each client's first 4 commits apply, answers lost
        return Storage(faulty)

    history = asyncio.run(run_concurrent_history(open_faulty, clients=4, ops_per_client=60, seed=5))
    assert sum(call.result is UNKNOWN for call in history.calls) >= 4 * 4
    result = check(history)
    assert result.ok, result.explanation


def test_a_history_corrupted_after_the_run_is_rejected(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'c.db'}"
    history = asyncio.run(run_concurrent_history(lambda: open_storage(url), clients=4, ops_per_client=50, seed=1))
    read = next(c for c in history.calls if c.op.kind is OpKind.GET and isinstance(c.result, Versioned))
    read.result = Versioned(b"999", 1)
    result = check(history)
    assert not result.ok
    assert result.key == read.op.key
