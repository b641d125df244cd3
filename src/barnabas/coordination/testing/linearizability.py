"""Record concurrent Storage histories and check that they are linearizable.

The checker is Porcupine's (anishathalye/porcupine, ``checker.go``): Wing & Gong's depth-first search
over the list of call and return entries, with Lowe's cache of (linearized bitset, model state)
pairs already explored, run separately on each key (linearizability is P-compositional: a history
is linearizable iff its restriction to every key is, Herlihy & Wing §3.3). coordination.md §7.

Rules this module keeps:

- **Times.** A call is invoked before its request is sent and returns after its answer is back, both
  read from one clock (``time.monotonic_ns``), so a recorded interval contains the real one. Equal
  times count as overlapping (calls sort before returns), which can only accept more.
- **Outcomes.** A call returns a value, or fails with the error its check predicts
  (KeyExistsError, NoSuchKeyError, VersionConflictError: nothing changed; FencedError: nothing
  changed and nothing is said about the key), or has an *unknown* outcome (UnavailableError, a
  cancellation, anything else): it returns at +infinity and may or may not have taken effect. Reads
  with unknown outcome say nothing and are dropped. A call never answered counts as unknown. The
  search places an unknown call only where it takes effect (elsewhere it equals placing it last).
- **The model** is one key as Storage sees it: absent (None) or (value, version), versions 1 on
  create and +1 per write, starting again at 1 after a delete (api.py). Every Storage write is one
  compare-and-set, so each write kind is "check, then put or delete": put_if_absent checks absent,
  update_if_exists checks present, compare_and_set and fenced_put check ``expected_version`` (0 =
  absent, None = present). A failed check is a legal result exactly when the check does not hold.
- **Composite calls.** Storage.compare_and_set and Storage.delete re-read the key after a failed
  commit to pick their error or return False. The model places each call at one instant: a
  ``delete`` returning False at the re-read (the key was absent), a failed compare-and-set or delete
  at its commit (the key was not at the expected version, so NoSuchKeyError is not taken as proof
  that the key was absent at that instant).
- Not checked: ``list``, multi-key ``fenced_write`` commits (use the recorded single-key calls), and
  ephemeral keys (a session's end deletes keys outside the history; record persistent keys only).
  Every key is assumed absent when the history starts: use fresh keys.
"""

from __future__ import annotations

import asyncio
import enum
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from ..api import Versioned
from ..election import Fence
from ..errors import FencedError, UnavailableError, VersionConflictError
from ..storage import Storage

__all__ = [
    "UNKNOWN",
    "Call",
    "CheckResult",
    "Failed",
    "History",
    "KeyOp",
    "OpKind",
    "Outcome",
    "RecordingStorage",
    "Result",
    "State",
    "Unknown",
    "check",
    "check_key",
    "run_concurrent_history",
    "step",
]


class OpKind(enum.Enum):
    GET = "get"
    PUT_IF_ABSENT = "put_if_absent"
    UPDATE_IF_EXISTS = "update_if_exists"
    COMPARE_AND_SET = "compare_and_set"
    DELETE = "delete"
    FENCED_PUT = "fenced_put"


@dataclass(frozen=True, slots=True)
class KeyOp:
    """One Storage call on one key, as the model sees it (build it with the class methods)."""

    kind: OpKind
    key: str
    value: bytes | None = None
    #: compare_and_set, fenced_put and delete: the version checked (0 absent, None present/any).
    expected_version: int | None = None

    @classmethod
    def get(cls, key: str) -> KeyOp:
        return cls(OpKind.GET, key)

    @classmethod
    def put_if_absent(cls, key: str, value: bytes) -> KeyOp:
        return cls(OpKind.PUT_IF_ABSENT, key, value)

    @classmethod
    def update_if_exists(cls, key: str, value: bytes) -> KeyOp:
        return cls(OpKind.UPDATE_IF_EXISTS, key, value)

    @classmethod
    def compare_and_set(cls, key: str, value: bytes, expected_version: int) -> KeyOp:
        return cls(OpKind.COMPARE_AND_SET, key, value, expected_version)

    @classmethod
    def delete(cls, key: str, expected_version: int | None = None) -> KeyOp:
        return cls(OpKind.DELETE, key, None, expected_version)

    @classmethod
    def fenced_put(cls, key: str, value: bytes, expected_version: int | None) -> KeyOp:
        return cls(OpKind.FENCED_PUT, key, value, expected_version)

    def __str__(self) -> str:
        args = [] if self.value is None else [repr(self.value)]
        if self.kind in (OpKind.COMPARE_AND_SET, OpKind.FENCED_PUT) or self.expected_version is not None:
            args.append(f"expected={self.expected_version}")
        return f"{self.kind.value}({', '.join(args)})"


@dataclass(frozen=True, slots=True)
class Failed:
    """The call raised the error its check predicts (named by ``error``); it changed nothing."""

    error: str


class Unknown(enum.Enum):
    """The outcome of a call that may or may not have taken effect."""

    UNKNOWN = "?"


UNKNOWN = Unknown.UNKNOWN

#: What a call returned: get → Versioned or None, writes → the new version, delete → bool.
Result = Versioned | int | bool | Failed | None
Outcome = Result | Unknown
#: One key's model state: None when absent, else (value, version).
State = tuple[bytes, int] | None


@dataclass(slots=True)
class Call:
    """One recorded call: who made it, what it was, when, and how it ended."""

    client_id: Hashable
    op: KeyOp
    invoked_ns: int
    #: When the answer arrived; None while pending or when the outcome is unknown (+infinity).
    returned_ns: int | None = None
    result: Outcome = UNKNOWN
    finished: bool = False


class History:
    """Calls of concurrent clients, recorded as they are invoked and answered."""

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        """Start an empty history.

        Args:
            clock: nanoseconds, never decreasing (inject a counter to build histories by hand).
        """
        self._clock = clock
        self._calls: list[Call] = []

    @property
    def calls(self) -> Sequence[Call]:
        return self._calls

    def __len__(self) -> int:
        return len(self._calls)

    def keys(self) -> list[str]:
        """Every key a call touched, sorted."""
        return sorted({call.op.key for call in self._calls})

    def invoke(self, client_id: Hashable, op: KeyOp) -> int:
        """Record that ``client_id`` is about to call ``op``; return the token to finish it with."""
        self._calls.append(Call(client_id, op, self._clock()))
        return len(self._calls) - 1

    def respond(self, token: int, result: Result) -> None:
        """Record the answer to the call ``token``.

        Raises:
            ValueError: the call already ended.
        """
        call = self._finish(token)
        call.returned_ns = self._clock()
        call.result = result

    def unknown(self, token: int) -> None:
        """Record that the call ``token`` ended without telling whether it took effect.

        Raises:
            ValueError: the call already ended.
        """
        self._finish(token)

    def _finish(self, token: int) -> Call:
        call = self._calls[token]
        if call.finished:
            raise ValueError(f"call {token} already ended")
        call.finished = True
        return call


# -- the model ------------------------------------------------------------------------------------


def _holds(state: State, expected: int | None) -> bool:
    if expected == 0:
        return state is None
    if expected is None:
        return state is not None
    return state is not None and state[1] == expected


def _write_check(op: KeyOp) -> int | None:
    if op.kind is OpKind.PUT_IF_ABSENT:
        return 0
    if op.kind is OpKind.UPDATE_IF_EXISTS:
        return None
    return op.expected_version


def step(state: State, op: KeyOp, outcome: Outcome) -> tuple[bool, State]:
    """Whether ``op`` answering ``outcome`` is legal from ``state``, and the state after it.

    An unknown outcome is always legal: the write applies if its check holds at that instant (the
    search also tries placing it after everything else, where it changes nothing observed).
    """
    if op.kind is OpKind.GET:
        if outcome is UNKNOWN:
            return True, state
        if outcome is None:
            return state is None, state
        if isinstance(outcome, Versioned):
            return state == (outcome.value, outcome.version), state
        return False, state
    if op.kind is OpKind.DELETE:
        holds = _holds(state, op.expected_version)
        if outcome is UNKNOWN:
            return True, None if holds else state
        if outcome is True:
            return holds, None
        if outcome is False:
            return state is None, state
        if isinstance(outcome, Failed):
            return op.expected_version is not None and not holds, state
        return False, state
    # put_if_absent, update_if_exists, compare_and_set, fenced_put: check, then put.
    assert op.value is not None, f"{op.kind.value} needs a value"
    holds = _holds(state, _write_check(op))
    written = (op.value, 1 if state is None else state[1] + 1)
    if outcome is UNKNOWN:
        return True, written if holds else state
    if isinstance(outcome, bool):
        return False, state
    if isinstance(outcome, int):
        return holds and outcome == written[1], written
    if isinstance(outcome, Failed):
        if outcome.error == FencedError.__name__:
            return op.kind is OpKind.FENCED_PUT, state
        return not holds, state
    return False, state


# -- the checker ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Whether a history is linearizable; when not, the first bad key and why."""

    ok: bool
    key: str | None
    explanation: str


def check(history: History | Iterable[Call]) -> CheckResult:
    """Check every key of ``history`` on its own (keys in sorted order; stop at the first bad one)."""
    calls = list(history.calls if isinstance(history, History) else history)
    by_key: dict[str, list[Call]] = {}
    for call in calls:
        by_key.setdefault(call.op.key, []).append(call)
    for key in sorted(by_key):
        result = check_key(key, by_key[key])
        if not result.ok:
            return result
    return CheckResult(True, None, f"linearizable: {len(calls)} calls over {len(by_key)} keys")


def check_key(key: str, calls: Sequence[Call]) -> CheckResult:
    """Porcupine's search over the calls of one key (all of ``calls`` must be on ``key``)."""
    kept = [call for call in calls if _kept(call)]
    failure = _search(kept)
    if failure is None:
        return CheckResult(True, key, f"{key!r}: linearizable ({len(kept)} calls)")
    return CheckResult(False, key, _explain(key, kept, failure, _origin(calls)))


def _kept(call: Call) -> bool:
    """A read that did not answer observed nothing: drop it."""
    return not (call.op.kind is OpKind.GET and (not call.finished or call.result is UNKNOWN))


def _answered(call: Call) -> bool:
    return call.finished and call.result is not UNKNOWN and call.returned_ns is not None


@dataclass(frozen=True, slots=True)
class _Failure:
    prefix: list[int]  # the longest linearizable prefix found, in linearization order
    state: State  # the model state after it
    stuck: list[int]  # the calls that could come next; none of them fits
    unobserved: bytes  # the value standing for every value no answered get returned


def _search(calls: Sequence[Call]) -> _Failure | None:
    """Wing & Gong with Lowe's cache; None when linearizable, else the deepest dead end.

    Entries form a doubly linked list (node 0 is the head; node 2i+1 is the call of ``calls[i]``,
    node 2i+2 its return). Linearizing a call lifts both of its nodes out of the list; backtracking
    puts them back (dancing links), so the list always holds exactly the calls not yet linearized.
    The candidates at each point are the calls before the first return in the list.

    Four refinements of Porcupine's loop, none changing the verdict:

    - A call of unknown outcome is linearized only where it takes effect: where it changes nothing
      it is the same as placed after every other call (its return is at +infinity), so the search
      ends once every answered call is linearized.
    - Answered candidates are tried before unknown ones (phase 1, then phase 2), so the unknown
      calls are placed only where the answered ones cannot go on without them.
    - A written value that no answered get returned is replaced by one sentinel: only a get
      compares values, so such states are indistinguishable, and the cache merges them.
    - Unknown candidates with equal (sentinel-replaced) operations are interchangeable: both were
      invoked and both return at +infinity, so any order placing one can place the other instead.
      Only the first of each such class in the list is tried.
    """
    n = len(calls)
    if n == 0:
        return None
    infinity = 1 << 64
    entries: list[tuple[int, int, int]] = []  # (time, 0 call / 1 return, node)
    for i, call in enumerate(calls):
        entries.append((call.invoked_ns, 0, 2 * i + 1))
        returned = call.returned_ns if _answered(call) else None
        entries.append((infinity if returned is None else returned, 1, 2 * i + 2))
    entries.sort()
    size = 2 * n + 1
    nxt = [-1] * size
    prv = [-1] * size
    previous = 0
    for _, _, node in entries:
        nxt[previous] = node
        prv[node] = previous
        previous = node
    outcomes = [call.result if _answered(call) else UNKNOWN for call in calls]
    observed = {outcome.value for outcome in outcomes if isinstance(outcome, Versioned)}
    unobserved = b"\x00unobserved"  # stands for them all: a value no answered get returned
    while unobserved in observed:
        unobserved += b"\x00"
    ops = [
        call.op if call.op.value is None or call.op.value in observed else replace(call.op, value=unobserved)
        for call in calls
    ]
    unknown = [outcome is UNKNOWN for outcome in outcomes]
    bits = [1 << i for i in range(n)]
    answered_left = unknown.count(False)

    linearized = 0
    state: State = None
    cache: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = []  # (call node, state before it)
    best: _Failure | None = None
    unknown_phase = False  # False: trying answered candidates; True: unknown ones
    tried: set[KeyOp] = set()  # in the unknown phase: the classes of the candidates tried so far
    node = nxt[0]
    while answered_left:
        if node & 1:  # a call: try to linearize it now
            i = node >> 1
            if unknown[i] == unknown_phase and not (unknown_phase and ops[i] in tried):
                if unknown_phase:
                    tried.add(ops[i])
                legal, after = step(state, ops[i], outcomes[i])
                if legal and not (unknown_phase and after == state):
                    marked = linearized | bits[i]
                    if (marked, after) not in cache:
                        cache.add((marked, after))
                        stack.append((node, state))
                        state, linearized = after, marked
                        answered_left -= not unknown_phase
                        ret = node + 1
                        nxt[prv[node]] = nxt[node]
                        prv[nxt[node]] = prv[node]
                        nxt[prv[ret]] = nxt[ret]
                        if nxt[ret] != -1:
                            prv[nxt[ret]] = prv[ret]
                        node, unknown_phase = nxt[0], False
                        continue
            node = nxt[node]
            continue
        if not unknown_phase:  # the answered candidates are exhausted: try the unknown ones
            node, unknown_phase = nxt[0], True
            tried.clear()
            continue
        # A return whose call is not linearized yet: every order from here is a dead end.
        if best is None or len(stack) > len(best.prefix):
            stuck = []
            walk = nxt[0]
            while walk != node:
                if walk & 1:
                    stuck.append(walk >> 1)
                walk = nxt[walk]
            best = _Failure([call_node >> 1 for call_node, _ in stack], state, stuck, unobserved)
        if not stack:
            return best
        node, state = stack.pop()
        i = node >> 1
        linearized &= ~bits[i]
        unknown_phase = unknown[i]
        answered_left += not unknown_phase
        ret = node + 1
        if nxt[ret] != -1:
            prv[nxt[ret]] = ret
        nxt[prv[ret]] = ret
        prv[nxt[node]] = node
        nxt[prv[node]] = node
        if unknown_phase:  # the unknown candidates up to this one were tried
            tried.clear()
            walk = nxt[0]
            while walk != node:
                if walk & 1 and unknown[walk >> 1]:
                    tried.add(ops[walk >> 1])
                walk = nxt[walk]
            tried.add(ops[i])
        node = nxt[node]
    return None


#: Calls of the longest prefix shown in an explanation (its last ones).
EXPLAIN_PREFIX = 12


def _origin(calls: Sequence[Call]) -> int:
    return min((call.invoked_ns for call in calls), default=0)


def _describe(call: Call, origin: int) -> str:
    start = (call.invoked_ns - origin) / 1e6
    if _answered(call) and call.returned_ns is not None:
        answer, end = _show(call.result), f"{(call.returned_ns - origin) / 1e6:.3f}"
    else:
        answer, end = "? (outcome unknown)", "∞"
    return f"client {call.client_id}: {call.op} -> {answer}  [{start:.3f} .. {end} ms]"


def _show(outcome: Outcome) -> str:
    if isinstance(outcome, Versioned):
        return f"({outcome.value!r}, version {outcome.version})"
    if isinstance(outcome, Failed):
        return f"raised {outcome.error}"
    return repr(outcome)


def _explain(key: str, calls: Sequence[Call], failure: _Failure, origin: int) -> str:
    prefix = failure.prefix
    lines = [
        f"{key!r} is not linearizable: the longest linearizable prefix has {len(prefix)} of {len(calls)} calls"
        + (f" (the last {EXPLAIN_PREFIX} shown)" if len(prefix) > EXPLAIN_PREFIX else "")
        + ":"
    ]
    shown = prefix[-EXPLAIN_PREFIX:]
    first = len(prefix) - len(shown) + 1
    lines += [f"  {first + j}. {_describe(calls[i], origin)}" for j, i in enumerate(shown)]
    if failure.state is None:
        state = "absent"
    else:
        value, version = failure.state
        value_text = "a value no get returned" if value == failure.unobserved else repr(value)
        state = f"({value_text}, version {version})"
    lines.append(f"after which the key is {state}, and none of these calls can come next:")
    lines += [f"  - {_describe(calls[i], origin)}" for i in failure.stuck]
    return "\n".join(lines)


# -- recording ------------------------------------------------------------------------------------

R = TypeVar("R", Versioned | None, int, bool)


class RecordingStorage:
    """A Storage that records each keyed call into a History (same signatures, same errors)."""

    def __init__(self, storage: Storage, history: History, client_id: Hashable) -> None:
        self.storage = storage
        self.history = history
        self.client_id = client_id

    async def _record(self, op: KeyOp, call: Callable[[], Awaitable[R]]) -> R:
        token = self.history.invoke(self.client_id, op)
        try:
            result = await call()
        except (VersionConflictError, FencedError) as exc:  # KeyExistsError, NoSuchKeyError included
            self.history.respond(token, Failed(type(exc).__name__))
            raise
        except BaseException:  # UnavailableError, cancellation, anything else: it may have applied
            self.history.unknown(token)
            raise
        self.history.respond(token, result)
        return result

    async def get(self, key: str) -> Versioned | None:
        return await self._record(KeyOp.get(key), lambda: self.storage.get(key))

    async def put_if_absent(self, key: str, value: bytes) -> int:
        """Storage.put_if_absent without a session (ephemeral keys leave the history unexplained)."""
        return await self._record(KeyOp.put_if_absent(key, value), lambda: self.storage.put_if_absent(key, value))

    async def update_if_exists(self, key: str, value: bytes) -> int:
        return await self._record(KeyOp.update_if_exists(key, value), lambda: self.storage.update_if_exists(key, value))

    async def compare_and_set(self, key: str, value: bytes, expected_version: int) -> int:
        return await self._record(
            KeyOp.compare_and_set(key, value, expected_version),
            lambda: self.storage.compare_and_set(key, value, expected_version),
        )

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        return await self._record(
            KeyOp.delete(key, expected_version), lambda: self.storage.delete(key, expected_version)
        )

    async def fenced_put(self, fence: Fence, key: str, value: bytes, expected_version: int | None) -> int:
        """Storage.fenced_put; only ``key`` is recorded (the election keys are checked, not written)."""
        return await self._record(
            KeyOp.fenced_put(key, value, expected_version),
            lambda: self.storage.fenced_put(fence, key, value, expected_version),
        )

    async def close(self) -> None:
        await self.storage.close()


# -- the driver -----------------------------------------------------------------------------------


async def run_concurrent_history(
    open_storage: Callable[[], Awaitable[Storage]],
    clients: int = 8,
    ops_per_client: int = 150,
    keys: int = 3,
    seed: int = 0,
) -> History:
    """Race ``clients`` Storages (one ``open_storage()`` each) over a few fresh keys; return the history.

    Each client makes ``ops_per_client`` random calls (get 30 %, put_if_absent 15 %,
    update_if_exists 15 %, compare_and_set 25 % at the version it last saw, delete 15 %, half of
    them at the version it last saw) with values unique to the call. Conflicts and
    UnavailableError are recorded and the client goes on. Keys live under
    ``linearizability/<random run id>/`` so runs never share state. The Storages are opened one
    after another (a backend's concurrent first open is not what this tests) and closed at the end.

    Raises:
        Whatever ``open_storage`` raises; an ExceptionGroup of the unexpected errors of calls (the
        other clients are cancelled and every Storage is closed first).
    """
    history = History()
    run_id = uuid.uuid4().hex[:12]
    names = [f"linearizability/{run_id}/k{j}" for j in range(keys)]
    storages: list[Storage] = []
    try:
        for _ in range(clients):  # one at a time: opening is not what is tested, the calls race
            storages.append(await open_storage())
        async with asyncio.TaskGroup() as group:  # an unexpected error cancels the other clients
            for client, storage in enumerate(storages):
                recorder = RecordingStorage(storage, history, client)
                group.create_task(_client(recorder, names, ops_per_client, random.Random(f"{seed}/{client}")))
    finally:
        await asyncio.gather(*(storage.close() for storage in storages), return_exceptions=True)
    return history


async def _client(storage: RecordingStorage, names: Sequence[str], count: int, rng: random.Random) -> None:
    seen: dict[str, int] = {}  # the version this client last saw per key (0: absent)
    for i in range(count):
        key = rng.choice(names)
        value = f"{storage.client_id}.{i}".encode()
        roll = rng.random()
        try:
            if roll < 0.30:
                found = await storage.get(key)
                seen[key] = found.version if found is not None else 0
            elif roll < 0.45:
                seen[key] = await storage.put_if_absent(key, value)
            elif roll < 0.60:
                seen[key] = await storage.update_if_exists(key, value)
            elif roll < 0.85:
                seen[key] = await storage.compare_and_set(key, value, seen.get(key, 0))
            else:
                last_seen = seen.get(key, 0)
                expected = last_seen if last_seen > 0 and rng.random() < 0.5 else None
                await storage.delete(key, expected)
                seen[key] = 0
        except (VersionConflictError, UnavailableError):
            pass
        await asyncio.sleep(0)  # let the others run even when a backend answers without suspending
