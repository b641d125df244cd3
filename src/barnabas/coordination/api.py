"""The backend contract: versioned keys, atomic commits, sessions with ephemeral keys, watches.

A backend implements only :class:`Metastore` and :class:`Session` (a KIP-273-style metastore).
Storage, LeaderElection, GroupMembership and ListenerRegistry are written once over them
(``storage.py``, ``election.py``, ``membership.py``, ``listeners.py``), as kazoo's recipes are
written over the ZooKeeper client.

What every backend guarantees:

- **Versions.** A key's version is 1 when it is created and grows by exactly one on each write;
  a deleted key has no version (``Check`` with version 0) and starts again at 1 when re-created.
- **Atomic, linearizable commits.** ``commit(checks, ops)`` applies every op or none: all checks
  must hold at the same instant. Every ``Put`` and ``Delete`` must be covered by a ``Check`` on the
  same key in the same commit (so every write is a compare-and-set, and a backend always knows
  whether a ``Put`` creates or updates). Operations on a key are linearizable. Keys are non-empty
  strings. A backend may refuse (ValueError) a commit whose puts name two different sessions
  (ZooKeeper binds a whole multi to one session).
- **Sessions.** A session is a lease held by one process, with a TTL. A key put with a session is
  *ephemeral*: it is removed by the backend, for everyone, at most ``ttl_s`` plus one keepalive
  interval after the session ends or its process dies (``kill -9`` included). A key's session is
  fixed when the key is created; a later ``Put`` keeps it.
- **Session states** (kazoo's three, mapped in one place per backend): CONNECTED; SUSPENDED when the
  backend cannot be reached and the lease may or may not still hold (do not act as leader); LOST
  when the lease has ended or is known to end within its TTL (its ephemeral keys are gone, or go
  once the backend notices). LOST is final. ``ttl_s`` is the TTL the backend granted, which may be
  rounded up from what was asked (etcd: whole seconds and a minimum).
- **Closing a session** never raises: when the backend is unreachable, its keys go when the lease
  expires instead of at once.
- **Watches are hints.** ``watch(prefix)`` yields ``Changed(keys)`` after keys under the prefix
  changed, and ``Resync()`` whenever the stream may have missed something (always first; after a
  reconnect either Resync or a replay of what was missed; after a compaction or a pruned change
  log, Resync). A consumer re-reads state on every event; it never applies an event as a delta.
  A watch is an async generator: cancelling a pending ``anext()`` ends it (Python's rule), so a
  consumer that times out on a watch must open a new one to keep watching. The first Resync may
  wait until the backend is reachable.

What no backend guarantees: ordering of notifications across different watches, delivery of
every intermediate version of a key (changes may be coalesced), or liveness of a session whose
process is stopped (SIGSTOP) longer than its TTL (the lease expires; fencing keeps that safe).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "Changed",
    "Check",
    "Delete",
    "Metastore",
    "Op",
    "Put",
    "Resync",
    "Session",
    "SessionState",
    "Versioned",
    "WatchEvent",
    "check_ops_covered",
]


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Versioned:
    """A key's value, its version, and the id of the session owning it if it is ephemeral."""

    value: bytes
    version: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Check:
    """A condition a commit needs: ``version`` 0 means absent, None means present at any version."""

    key: str
    version: int | None


@dataclass(frozen=True, slots=True)
class Put:
    """Write ``value``; with ``session`` a newly created key is ephemeral to that session."""

    key: str
    value: bytes
    session: Session | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    key: str


Op = Put | Delete


@dataclass(frozen=True, slots=True)
class Changed:
    """Keys under the watched prefix that changed (were put or deleted) since the last event."""

    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class Resync:
    """The stream may have missed changes: re-read everything under the prefix."""


WatchEvent = Changed | Resync


@runtime_checkable
class Session(Protocol):
    """A lease owned by one process; ephemeral keys live and die with it."""

    @property
    def id(self) -> str:
        """Unique among all sessions the backend has ever had."""
        ...

    @property
    def ttl_s(self) -> float:
        """How long the lease outlives its last keepalive."""
        ...

    @property
    def state(self) -> SessionState: ...

    def add_state_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Call ``listener`` on every state change, from the event loop. Errors are logged."""
        ...

    def remove_state_listener(self, listener: Callable[[SessionState], None]) -> None: ...

    async def close(self) -> None:
        """End the lease now: its ephemeral keys are removed and the state becomes LOST."""
        ...


class Metastore(Protocol):
    """What a coordination backend implements. Obtain one with ``open_metastore(url)``."""

    @property
    def url(self) -> str: ...

    async def get(self, key: str) -> Versioned | None:
        """The key's value, version and owning session, or None.

        Raises:
            UnavailableError: the backend cannot be reached.
        """
        ...

    async def list(self, prefix: str) -> dict[str, Versioned]:
        """Every key starting with ``prefix`` (a consistent snapshot), in key order."""
        ...

    async def commit(self, checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, int]:
        """Apply ``ops`` atomically if every check holds; return the new version of each put key.

        Raises:
            VersionConflictError: a check failed (``key`` names one that failed); nothing applied.
                KeyExistsError when the key was expected absent and exists, NoSuchKeyError when it
                was expected to exist and does not, VersionConflictError itself for another version.
            SessionLostError: a put names a session that has ended (found out after sending, the
                commit may have been applied, as with UnavailableError).
            ValueError: a put names a session of another metastore (a caller's bug).
            UnavailableError: the backend cannot be reached; the commit may or may not have
                been applied (re-read before retrying).
            ValueError: an op is not covered by a check on the same key.
        """
        ...

    async def open_session(self, ttl_s: float) -> Session:
        """Start a lease kept alive in the background until closed or lost."""
        ...

    def watch(self, prefix: str) -> AsyncGenerator[WatchEvent, None]:
        """Hints about changes under ``prefix``: ``Resync()`` first, then ``Changed``/``Resync``.

        An async generator (write it as ``async def … yield``): it runs until the consumer calls
        ``aclose()`` or the metastore closes, and ``aclose()`` releases everything it holds.
        """
        ...

    async def close(self) -> None:
        """Close sessions and connections; the object is unusable afterwards."""
        ...


def check_ops_covered(checks: Sequence[Check], ops: Sequence[Op]) -> dict[str, Check]:
    """Every op's key must have a check; return the checks by key (for backends to use).

    Raises:
        ValueError: an op has no check, or a key is checked twice.
    """
    by_key: dict[str, Check] = {}
    for check in checks:
        if check.key in by_key:
            raise ValueError(f"key {check.key!r} is checked twice in one commit")
        by_key[check.key] = check
    seen: set[str] = set()
    for op in ops:
        if op.key not in by_key:
            raise ValueError(f"{type(op).__name__} of {op.key!r} has no check on that key")
        if op.key in seen:
            raise ValueError(f"key {op.key!r} is written twice in one commit")
        seen.add(op.key)
        if isinstance(op, Delete) and by_key[op.key].version == 0:
            raise ValueError(f"Delete of {op.key!r} is checked as absent")
    return by_key
